"""``gpuwatch report weekly`` and ``gpuwatch recommend``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from gpuwatch.analytics.recommend import recommend
from gpuwatch.analytics.render import instant_text, render_json, render_table, table_footer
from gpuwatch.analytics.render import render_csv as render_recommendations_csv
from gpuwatch.analytics.scope import Scope, in_scope
from gpuwatch.analytics.totals import data_span
from gpuwatch.cli.context import AppContext, RuntimeFailure, pass_app
from gpuwatch.domain.durations import parse_instant
from gpuwatch.report.inputs import RESOLUTIONS, Inputs, load_inputs, policy_from, price_book_from
from gpuwatch.report.summary import describe_totals, report_totals
from gpuwatch.report.weekly import iso_week_bounds, last_complete_week, render_csv, weekly_report

DEFAULT_RECOMMEND_WINDOW = "7d"
F = TypeVar("F", bound=Callable[..., Any])


def scope_options(command: F) -> F:
    """``--cluster``, ``--team`` and ``--namespace``: which rows to show (computed over all)."""
    for name in ("namespace", "team", "cluster"):
        command = click.option(
            f"--{name}",
            metavar=name.upper(),
            help=f"Only the rows of this {name} (figures are computed over the whole fleet).",
        )(command)
    return command


def _write(text: str, out: str | None) -> None:
    if out is None or out == "-":
        click.echo(text, nl=False)
        return
    try:
        Path(out).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise RuntimeFailure(f"cannot write {out}: {exc.strerror or exc}") from None
    click.echo(f"wrote {out}", err=True)


def _inputs(app: AppContext, start_ts: int, end_ts: int, resolution: str | None) -> Inputs:
    return load_inputs(
        app.engine(),
        start_ts,
        end_ts,
        resolution=resolution or app.settings.storage.resolution,
        idle_util_pct=app.settings.thresholds.idle_util_pct,
        health=True,
        unheld_per_day=True,
    )


@click.group()
def report() -> None:
    """Reports from the store."""


@report.command("weekly")
@click.option("--week", help="ISO week like 2026-W46 (default: the last complete week).")
@click.option("--out", metavar="FILE", help="Write the CSV here (default: standard output).")
@click.option(
    "--resolution",
    type=click.Choice(RESOLUTIONS),
    help="Read raw samples, hourly roll-ups, or auto (default: storage.resolution).",
)
@scope_options
@pass_app
def report_weekly(
    app: AppContext,
    week: str | None,
    out: str | None,
    resolution: str | None,
    cluster: str | None,
    team: str | None,
    namespace: str | None,
) -> None:
    """The weekly GPU waste report CSV: one row per workload and GPU model, plus unallocated
    capacity per node (namespace __idle__), sorted by idle cost.

    The week, its row count and totals go to standard error."""
    now_ts = int(datetime.now(UTC).timestamp())
    label = week or last_complete_week(now_ts)
    try:
        start_ts, end_ts = iso_week_bounds(label)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--week") from None
    data = _inputs(app, start_ts, end_ts, resolution)
    frame = weekly_report(
        data.samples,
        data.pods,
        data.gpus,
        price_book_from(app.settings),
        policy_from(app.settings),
        start_ts,
        nodes=data.nodes,
        detail=data.detail,
        health_sums=data.health_sums,
        scheduling=app.settings.scheduling.policy(),
    )
    scope = Scope(cluster=cluster, team=team, namespace=namespace)
    frame = in_scope(frame, scope)
    _write(render_csv(frame), out)
    shown = f", {scope.describe()}" if scope.terms() else ""
    click.echo(
        f"report weekly {label} ({instant_text(start_ts)} to {instant_text(end_ts)}{shown}): "
        f"{describe_totals(report_totals(frame))}",
        err=True,
    )


@click.command("recommend")
@click.option("--start", default=DEFAULT_RECOMMEND_WINDOW, show_default=True,
              help="Window start: RFC 3339 or a duration before now.")  # fmt: skip
@click.option("--end", help="Window end (exclusive; default: now).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
)
@click.option(
    "--resolution",
    type=click.Choice(RESOLUTIONS),
    help="Read raw samples, hourly roll-ups, or auto (default: storage.resolution).",
)
@scope_options
@pass_app
def recommend_command(
    app: AppContext,
    start: str,
    end: str | None,
    fmt: str,
    resolution: str | None,
    cluster: str | None,
    team: str | None,
    namespace: str | None,
) -> None:
    """Right-sizing suggestions with estimated monthly savings and confidence.

    Savings are per 730 hours, extrapolated from the hours of the window that have data; the
    total counts the largest suggestion per workload (a workload's are alternatives). The
    table ends with the window, counts and total; with csv or json they go to standard
    error."""
    now = datetime.now(UTC)
    try:
        start_ts = int(parse_instant(start, now).timestamp())
        end_ts = int(parse_instant(end, now).timestamp()) if end else int(now.timestamp())
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if end_ts <= start_ts:
        raise click.BadParameter("--end must be after --start")
    data = _inputs(app, start_ts, end_ts, resolution)
    # Monthly savings extrapolate the hours with data: the window clipped to the samples.
    span = data_span(data.samples, data.start_ts, data.end_ts)
    first, last = span or (data.start_ts, data.end_ts)
    frame = recommend(
        data.samples,
        data.pods,
        price_book_from(app.settings),
        policy_from(app.settings),
        first,
        last,
        gpus=data.gpus,
        nodes=data.nodes,
        detail=data.detail,
        health_sums=data.health_sums,
    )
    scope = Scope(cluster=cluster, team=team, namespace=namespace)
    frame = in_scope(frame, scope)
    window = (start_ts, end_ts)
    if fmt == "table":
        click.echo(render_table(frame, span, window, scope.describe()), nl=False)
        return
    renderers = {"csv": render_recommendations_csv, "json": render_json}
    click.echo(renderers[fmt](frame), nl=False)
    for line in table_footer(frame, span, window, scope.describe()):
        click.echo(f"recommend: {line}", err=True)
