"""``gpuwatch collect``: DCGM samples (Prometheus) and GPU pods (Kubernetes) into the store."""

from __future__ import annotations

import signal
import sys
import threading
from datetime import UTC, datetime
from types import FrameType

import click

from gpuwatch.cli.commands_db import compact_store, describe_compaction
from gpuwatch.cli.context import AppContext, RuntimeFailure, pass_app
from gpuwatch.collectors.collect import (
    SOURCE_PROMETHEUS,
    CollectStats,
    Window,
    collect,
    plan_window,
)
from gpuwatch.collectors.kube import KubeError, KubeSource
from gpuwatch.collectors.prometheus import PrometheusError, PrometheusSource
from gpuwatch.collectors.promql import Catalogue
from gpuwatch.config import Settings
from gpuwatch.domain.durations import HOUR_S, parse_duration, parse_instant
from gpuwatch.store import writer

#: ``--follow`` applies the storage retention (``db compact``) at most this often.
COMPACT_EVERY_S = HOUR_S


def _now_ts() -> int:
    return int(datetime.now(UTC).timestamp())


def _instant(value: str | None, flag: str, now: datetime) -> int | None:
    if value is None:
        return None
    try:
        return int(parse_instant(value, now).timestamp())
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=flag) from None


def prometheus_source(settings: Settings) -> PrometheusSource:
    prom = settings.prometheus
    catalogue = Catalogue(tuple(prom.matchers), prom.cluster_label, settings.cluster)
    headers = {k: v.get_secret_value() for k, v in prom.headers.items()}
    return PrometheusSource(
        prom.url,
        catalogue,
        headers,
        prom.timeout.total_seconds(),
        prom.retries,
        max_series=prom.max_series,
        max_samples=prom.max_samples_per_request,
    )


def _progress_printer(window: Window) -> object:
    interactive = sys.stderr.isatty()
    pages = len(window.pages())

    def show(done: int, total: int, samples: int) -> None:
        if interactive:
            filled = int(30 * done / max(total, 1))
            bar = "#" * filled + "-" * (30 - filled)
            click.echo(
                f"\rcollect [{bar}] page {done}/{total}, {samples:,} samples",
                err=True,
                nl=done == total,
            )
        elif pages > 1 and (done == total or done % 10 == 0):
            click.echo(f"collect: page {done}/{total}, {samples:,} samples", err=True)

    return show


def run_once(
    app: AppContext, start: int | None, end: int | None, stop: threading.Event, with_kube: bool
) -> CollectStats:
    settings = app.settings
    engine = app.engine()
    now_ts = _now_ts()
    with engine.connect() as conn:
        cluster_id = writer.ensure_cluster(conn, settings.cluster)
        conn.commit()
        watermark = writer.read_watermark(conn, cluster_id, SOURCE_PROMETHEUS)
    window = plan_window(
        start_ts=start,
        end_ts=end,
        watermark_ts=watermark,
        lookback_s=int(settings.prometheus.lookback.total_seconds()),
        now_ts=now_ts,
        step_s=int(settings.prometheus.step.total_seconds()),
        page_s=int(settings.prometheus.page.total_seconds()),
    )
    try:
        return collect(
            engine,
            settings.cluster,
            window,
            prometheus_source(settings),
            KubeSource.from_settings(settings) if with_kube else None,
            settings.prometheus.labels.variants(),
            now_ts,
            progress=_progress_printer(window),  # type: ignore[arg-type]
            should_stop=stop.is_set,
        )
    except (PrometheusError, KubeError) as exc:
        raise RuntimeFailure(f"{exc} (nothing of the unfinished page was written)") from None


def _report(stats: CollectStats) -> None:
    def when(ts: int) -> str:
        return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    click.echo(
        f"collected {stats.samples:,} samples of {stats.gpu_units:,} GPU units and "
        f"{stats.pods:,} pods "
        f"from {when(stats.start_ts)} to {when(stats.end_ts)} ({stats.pages} pages)"
    )
    for line in stats.issues.lines():
        click.echo(f"gpuwatch: warning: {line}", err=True)


@click.command("collect")
@click.option("--start", help="Window start: RFC 3339 or a duration before now (7d, 36h).")
@click.option("--end", help="Window end (exclusive): RFC 3339 or a duration before now.")
@click.option("--follow", is_flag=True, help="Keep collecting every --interval until stopped.")
@click.option("--interval", default="60s", show_default=True, help="Pause between --follow rounds.")
@click.option(
    "--no-kubernetes", is_flag=True, help="Read only Prometheus (no pod owners or teams)."
)
@pass_app
def collect_command(
    app: AppContext,
    start: str | None,
    end: str | None,
    follow: bool,
    interval: str,
    no_kubernetes: bool,
) -> None:
    """Collect DCGM samples and GPU pods into the store (idempotent; resumes where it stopped)."""
    now = datetime.now(UTC)
    start_ts, end_ts = _instant(start, "--start", now), _instant(end, "--end", now)
    try:
        pause_s = parse_duration(interval).total_seconds()
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--interval") from None
    if follow and end_ts is not None:
        raise click.UsageError("--follow collects up to now: it takes no --end")
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    _report(run_once(app, start_ts, end_ts, stop, not no_kubernetes))
    compacted_ts = 0
    while follow and not stop.wait(pause_s):
        _report(run_once(app, None, None, stop, not no_kubernetes))
        if _now_ts() - compacted_ts >= COMPACT_EVERY_S:
            compacted_ts = _now_ts()
            click.echo(describe_compaction(compact_store(app, compacted_ts)))
