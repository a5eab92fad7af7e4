"""``gpuwatch demo`` and ``gpuwatch serve``: the dashboard, on a simulated fleet or the store."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from sqlalchemy import Engine

from gpuwatch.cli.context import AppContext, pass_app
from gpuwatch.config import DATABASE_URL_ENV, DEFAULT_CONFIG_FILE, resolve_config_path
from gpuwatch.domain.durations import DAY_S, parse_duration
from gpuwatch.store import repository
from gpuwatch.store.engine import (
    StoreError,
    make_engine,
    require_current_schema,
    sqlite_path,
    upgrade,
)

DEFAULT_DEMO_DB = "gpuwatch-demo.db"


def _progress(message: str) -> None:
    click.echo(f"gpuwatch demo: {message}", err=True)


def _demo_is_usable(path: Path) -> bool:
    if not path.is_file():
        return False
    engine = make_engine(f"sqlite:///{path}")
    try:
        require_current_schema(engine)
        return repository.summary(engine).samples > 0
    except StoreError:
        return False
    finally:
        engine.dispose()


def build_demo_database(path: Path, *, days: int, step_s: int, seed: int, now_ts: int) -> None:
    """Build the simulated fleet into a new SQLite file, atomically (temp file, then rename)."""
    from gpuwatch.simulate.fleet import build_fleet
    from gpuwatch.simulate.generate import generate
    from gpuwatch.simulate.load import load_simulated

    end_ts = now_ts - now_ts % step_s
    start_ts = end_ts - days * DAY_S
    tmp = path.with_name(f".{path.name}.building")
    for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
        leftover.unlink(missing_ok=True)
    began = time.monotonic()
    fleet = build_fleet(seed=seed)
    data = generate(fleet, start_ts, end_ts, step_s)
    _progress(
        f"simulated {len(data.gpus)} GPU units, {len(data.samples):,} samples over {days} days"
    )
    engine = make_engine(f"sqlite:///{tmp}")
    upgrade(engine)
    with engine.begin() as conn:
        load_simulated(conn, data)
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    os.replace(tmp, path)
    for leftover in (Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
        leftover.unlink(missing_ok=True)
    _progress(f"wrote {path} in {time.monotonic() - began:.1f}s")


def demo_database_url(path: Path, folder: Path) -> str:
    """The URL of the demo's file as ``folder``'s ``gpuwatch.yaml`` names it: relative when the
    file lies in ``folder`` (commands find that file only when run there)."""
    shown = path.name if path.parent == folder.resolve() else str(path)
    return f"sqlite:///{shown}"


def config_text(url: str) -> str:
    """The ``gpuwatch.yaml`` the demo writes where none exists."""
    return (
        "# Written by `gpuwatch demo`: gpuwatch commands run in this folder read the demo's\n"
        "# database. Point database_url at your own store (or delete this file) when done.\n"
        "# Every setting: docs/configuration.md\n"
        f"database_url: {url}\n"
    )


def _write_config(folder: Path, url: str) -> None:
    target = folder / DEFAULT_CONFIG_FILE
    try:
        with target.open("x", encoding="utf-8") as out:
            out.write(config_text(url))
    except OSError as exc:
        _progress(
            f"could not write {target} ({exc.strerror or exc}): "
            "other commands will not find the demo"
        )
        return
    _progress(
        f"wrote {target} (database_url: {url}): `gpuwatch recommend`, `gpuwatch report weekly` "
        "and the other commands run in this folder read the demo"
    )


def _same_file(url: str, path: Path) -> bool:
    found = sqlite_path(url)
    return found is not None and found.resolve() == path


def point_commands_at_demo(app: AppContext, path: Path, folder: Path) -> None:
    """Make later commands run in ``folder`` read the demo's file at ``path``: write
    ``gpuwatch.yaml`` there when no configuration file is in play, and say so; where the
    configuration still names another database, say how to read the demo."""
    environ = dict(os.environ)
    url = demo_database_url(path, folder)
    if resolve_config_path(app.config_file, environ) is None:
        _write_config(folder, url)
    looked = app.settings.database_url_value
    if _same_file(looked, path):
        return
    source = resolve_config_path(app.config_file, environ)
    where = f"${DATABASE_URL_ENV}" if DATABASE_URL_ENV in environ else str(source or "the default")
    _progress(
        f"other commands read {app.settings.safe_database_url()} (from {where}), not the demo; "
        f"run them with {DATABASE_URL_ENV}=sqlite:///{path} to read it"
    )


def _serve(engine: Engine, app_ctx: AppContext, host: str, port: int, workers: int = 1) -> None:
    from gpuwatch.app.server import create_app
    from gpuwatch.cli.wsgi import serve_threads, serve_workers, shared_folder

    settings = app_ctx.settings
    threads = settings.dashboard.threads
    where = f"http://{host}:{port}/"
    if workers == 1:
        click.echo(f"gpuwatch: dashboard on {where} (Ctrl+C to stop)", err=True)
        serve_threads(create_app(engine, settings).server, host, port, threads)
        return
    url = engine.url
    engine.dispose()
    with shared_folder() as shared:

        def one_worker() -> Any:
            worker_engine = make_engine(url.render_as_string(hide_password=False))
            return create_app(worker_engine, settings, shared_dir=shared).server

        click.echo(
            f"gpuwatch: dashboard on {where} with {workers} workers × {threads} threads "
            "(Ctrl+C to stop)",
            err=True,
        )
        serve_workers(one_worker, host, port, workers, threads)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve on.")
@click.option("--port", default=8050, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--db",
    "db_path",
    default=DEFAULT_DEMO_DB,
    show_default=True,
    type=click.Path(dir_okay=False),
    help="SQLite file for the simulated fleet (reused on later runs).",
)
@click.option("--no-serve", is_flag=True, help="Only build the data; do not serve the dashboard.")
@click.option(
    "--rebuild", is_flag=True, help="Rebuild the simulated fleet even if the file exists."
)
@click.option("--days", default=14, show_default=True, type=click.IntRange(1, 90))
@click.option("--step", "step", default="5m", show_default=True, help="Sample resolution.")
@click.option("--seed", default=7, show_default=True, type=int, help="Simulation seed.")
@pass_app
def demo(
    app: AppContext,
    host: str,
    port: int,
    db_path: str,
    no_serve: bool,
    rebuild: bool,
    days: int,
    step: str,
    seed: int,
) -> None:
    """Build a simulated GPU fleet into SQLite and serve the dashboard on it.

    Two clusters, a few hundred GPUs (A100, H100 with MIG, L4, time-sliced T4), a dozen
    namespaces and the waste patterns seen in real fleets, with DAYS of history up to now.
    No cluster, Prometheus or GPU needed.
    """
    try:
        step_s = int(parse_duration(step).total_seconds())
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--step") from None
    if step_s < 10:
        raise click.BadParameter("must be at least 10s", param_hint="--step")
    path = Path(db_path).expanduser().resolve()
    if rebuild or not _demo_is_usable(path):
        _progress(f"building the simulated fleet into {path} ...")
        now_ts = int(datetime.now(UTC).timestamp())
        build_demo_database(path, days=days, step_s=step_s, seed=seed, now_ts=now_ts)
    else:
        _progress(f"reusing {path} (pass --rebuild for fresh data)")
    point_commands_at_demo(app, path, Path.cwd())
    if no_serve:
        return
    app.override("database_url", f"sqlite:///{path}")
    _serve(app.engine(), app, host, port)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve on.")
@click.option("--port", default=8050, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=None,
    help="Worker processes (default: dashboard.workers); more than 1 serves with gunicorn.",
)
@pass_app
def serve(app: AppContext, host: str, port: int, workers: int | None) -> None:
    """Serve the dashboard on the configured database."""
    engine = app.engine()
    if repository.summary(engine).samples == 0:
        click.echo("gpuwatch: the database holds no samples yet: run `gpuwatch collect`", err=True)
    _serve(engine, app, host, port, workers or app.settings.dashboard.workers)
