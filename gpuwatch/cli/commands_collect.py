"""``gpuwatch collect``: DCGM samples (Prometheus) and GPU pods (Kubernetes) into the store."""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from types import FrameType

import click

from gpuwatch.cli.commands_db import compact_store, describe_compaction
from gpuwatch.cli.context import AppContext, RuntimeFailure, pass_app
from gpuwatch.cli.lease_guard import Leadership, LeaseStop, lead_or_refuse, leadership
from gpuwatch.collectors.collect import (
    SOURCE_PROMETHEUS,
    CollectStats,
    Window,
    collect,
    plan_window,
)
from gpuwatch.collectors.growth import NewUnitLimit, UnitGrowthError, page_for_budget
from gpuwatch.collectors.kube import KubeError, KubeSource
from gpuwatch.collectors.prometheus import PrometheusError, PrometheusSource
from gpuwatch.collectors.promql import Catalogue
from gpuwatch.collectors.stop import NEVER, Interrupted, Stop
from gpuwatch.config import Settings
from gpuwatch.config.http import http_options
from gpuwatch.domain.durations import (
    HOUR_S,
    format_duration,
    parse_duration,
    parse_instant,
    rfc3339,
)
from gpuwatch.domain.redact import mask_url
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


def _bounds(start: str | None, end: str | None, now: datetime) -> tuple[int | None, int | None]:
    """``--start`` and ``--end`` as epoch seconds: a start in the future is a usage error, an end
    in the future is clamped to now (and said so)."""
    start_ts, end_ts = _instant(start, "--start", now), _instant(end, "--end", now)
    now_ts = int(now.timestamp())
    if start_ts is not None and start_ts > now_ts:
        raise click.BadParameter(f"{rfc3339(start_ts)} is in the future", param_hint="--start")
    if end_ts is not None and end_ts > now_ts:
        click.echo(
            f"collect: --end {rfc3339(end_ts)} is in the future: collecting up to now "
            f"({rfc3339(now_ts)})",
            err=True,
        )
        end_ts = now_ts
    if start_ts is not None and end_ts is not None and start_ts >= end_ts:
        raise click.BadParameter(f"{rfc3339(start_ts)} is not before --end", param_hint="--start")
    return start_ts, end_ts


def prometheus_source(settings: Settings, stop: Stop = NEVER) -> PrometheusSource:
    prom = settings.prometheus
    catalogue = Catalogue(tuple(prom.matchers), prom.cluster_label, settings.cluster)
    return PrometheusSource(
        prom.url,
        catalogue,
        timeout_s=prom.timeout.total_seconds(),
        retries=prom.retries,
        max_series=prom.max_series,
        max_samples=prom.max_samples_per_request,
        page_timeout_s=prom.page_timeout.total_seconds(),
        stop=stop,
        http=http_options(settings.prometheus),
        node_labels=tuple(prom.labels.hostname),
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


@dataclass(frozen=True)
class Round:
    """One collection: its window, and what was written (None: stopped before any write)."""

    window: Window
    stats: CollectStats | None


def _resume_point(app: AppContext, now_ts: int) -> int | None:
    """The stored resume point; one in the future (left by an older version) is repaired."""
    with app.engine().begin() as conn:
        cluster_id = writer.ensure_cluster(conn, app.settings.cluster)
        repaired = writer.clamp_watermark(conn, cluster_id, SOURCE_PROMETHEUS, now_ts)
        watermark = writer.read_watermark(conn, cluster_id, SOURCE_PROMETHEUS)
    if repaired is not None:
        old, new = repaired
        resume = (
            f"resuming after the last stored sample, at {rfc3339(new)}"
            if new is not None
            else "no sample is stored: starting from prometheus.lookback"
        )
        click.echo(
            f"collect: the stored resume point {rfc3339(old)} is in the future; {resume}", err=True
        )
    return watermark


def _known_units(app: AppContext, start_ts: int) -> int:
    """The GPU units the store saw over the lookback before ``start_ts``."""
    with app.engine().connect() as conn:
        cluster_id = writer.ensure_cluster(conn, app.settings.cluster)
        conn.commit()
        since_ts = start_ts - int(app.settings.prometheus.lookback.total_seconds())
        return writer.recent_units(conn, cluster_id, since_ts)


def _sized(app: AppContext, window: Window, source: PrometheusSource) -> Window:
    """``window`` with ``prometheus.page`` shortened so that GPU units × steps of a page stay
    within ``prometheus.max_samples_per_page``: the units the store knows, else (a first
    collection) the series Prometheus has over the first page, counted in one attempt (a
    Prometheus that fails it fails the first page anyway, after the Kubernetes API is read)."""
    prom = app.settings.prometheus
    units = _known_units(app, window.start_ts)
    if units == 0 and window.end_ts > window.start_ts:
        first_end = min(window.end_ts, window.start_ts + window.page_s)
        try:
            units = source.series_count(window.start_ts, first_end, window.step_s, retry=False)
        except PrometheusError:
            units = 0
    page_s = page_for_budget(window.page_s, window.step_s, units, prom.max_samples_per_page)
    window = replace(window, page_s=page_s)
    pages = len(window.pages())
    if pages > prom.max_pages:
        raise click.UsageError(
            f"the window from {rfc3339(window.start_ts)} to {rfc3339(window.end_ts)} is {pages} "
            f"pages of {format_duration(timedelta(seconds=window.page_s))}, more than "
            f"prometheus.max_pages ({prom.max_pages}): collect it in parts with --start/--end, "
            "or raise the limit"
        )
    return window


def _plan(app: AppContext, start: int | None, end: int | None, now_ts: int) -> Window:
    prom = app.settings.prometheus
    window = plan_window(
        start_ts=start,
        end_ts=end,
        watermark_ts=None if start is not None else _resume_point(app, now_ts),
        lookback_s=int(prom.lookback.total_seconds()),
        now_ts=now_ts,
        step_s=int(prom.step.total_seconds()),
        page_s=int(prom.page.total_seconds()),
    )
    return window


def run_once(
    app: AppContext,
    start: int | None,
    end: int | None,
    stop: Stop,
    with_kube: bool,
    accept_new_units: bool = False,
) -> Round:
    settings = app.settings
    now_ts = _now_ts()
    window = _plan(app, start, end, now_ts)
    source = prometheus_source(settings, stop)
    try:
        window = _sized(app, window, source)
        stats = collect(
            app.engine(),
            settings.cluster,
            window,
            source,
            KubeSource.from_settings(settings, stop) if with_kube else None,
            settings.prometheus.labels.variants(),
            now_ts,
            progress=_progress_printer(window),  # type: ignore[arg-type]
            stop=stop,
            new_units=None if accept_new_units else _new_unit_limit(settings),
        )
        if stats.pages and not stats.samples and not stop.is_set():
            _explain_nothing_stored(source, stats, window.step_s)
    except Interrupted:
        return Round(window, None)
    except (PrometheusError, KubeError, UnitGrowthError) as exc:
        raise RuntimeFailure(f"{exc} (nothing of the unfinished page was written)") from None
    return Round(window, stats)


def _new_unit_limit(settings: Settings) -> NewUnitLimit:
    prom = settings.prometheus
    return NewUnitLimit(prom.max_new_units_ratio, prom.max_new_units_floor)


def _explain_nothing_stored(source: PrometheusSource, stats: CollectStats, step_s: int) -> None:
    """A window that stored no sample: fine where Prometheus has no DCGM series in it (said on
    stderr), a failure where it has some."""
    span = f"from {rfc3339(stats.start_ts)} to {rfc3339(stats.end_ts)}"
    if source.has_series(stats.start_ts, stats.end_ts, step_s):
        raise RuntimeFailure(
            f"Prometheus at {mask_url(source.url)} has DCGM series {span} but none was stored: "
            "check prometheus.labels.uuid and prometheus.matchers"
        )
    click.echo(f"collect: no DCGM series in Prometheus at {mask_url(source.url)} {span}", err=True)


def _written(app: AppContext, done: Round) -> str:
    """What a stopped round wrote, and where the next collection resumes."""
    stats = done.stats
    if stats is None or not stats.pages:
        return "nothing was written"
    with app.engine().connect() as conn:
        cluster_id = writer.ensure_cluster(conn, app.settings.cluster)
        mark = writer.read_watermark(conn, cluster_id, SOURCE_PROMETHEUS)
    resume = f"; the next collect resumes at {rfc3339(mark)}" if mark is not None else ""
    return (
        f"{stats.pages} of {len(done.window.pages())} pages written ({stats.samples:,} "
        f"samples from {rfc3339(stats.start_ts)} to {rfc3339(stats.end_ts)}){resume}"
    )


def _signal_name(stop: Stop) -> str:
    return signal.Signals(stop.signum).name if stop.signum else "a stop request"


def _report(stats: CollectStats) -> None:
    click.echo(
        f"collected {stats.samples:,} samples of {stats.gpu_units:,} GPU units and "
        f"{stats.pods:,} pods "
        f"from {rfc3339(stats.start_ts)} to {rfc3339(stats.end_ts)} ({stats.pages} pages)"
    )
    if stats.dra is not None:
        click.echo(stats.dra)
    if stats.queues is not None:
        click.echo(stats.queues)
    for line in stats.issues.lines():
        click.echo(f"gpuwatch: warning: {line}", err=True)
    if stats.partial is not None:
        click.echo(f"gpuwatch: warning: {stats.partial.describe()}", err=True)


@click.command("collect")
@click.option("--start", help="Window start: RFC 3339 or a duration before now (7d, 36h).")
@click.option("--end", help="Window end (exclusive): RFC 3339 or a duration before now.")
@click.option("--follow", is_flag=True, help="Keep collecting every --interval until stopped.")
@click.option("--interval", default="60s", show_default=True, help="Pause between --follow rounds.")
@click.option(
    "--no-kubernetes", is_flag=True, help="Read only Prometheus (no pod owners or teams)."
)
@click.option(
    "--accept-new-units",
    is_flag=True,
    help="Store pages naming more new GPU units than prometheus.max_new_units_ratio allows "
    "(a fleet that really grew).",
)
@click.option(
    "--ignore-lease",
    is_flag=True,
    help="Collect once even while another replica holds the collector lease (a backfill of an "
    "old window with --start/--end); not with --follow.",
)
@pass_app
def collect_command(
    app: AppContext,
    start: str | None,
    end: str | None,
    follow: bool,
    interval: str,
    no_kubernetes: bool,
    accept_new_units: bool,
    ignore_lease: bool,
) -> None:
    """Collect DCGM samples and GPU pods into the store (idempotent; resumes where it stopped).
    Of several replicas for the same cluster, the one holding the lease collects."""
    start_ts, end_ts = _bounds(start, end, datetime.now(UTC))
    try:
        pause_s = parse_duration(interval).total_seconds()
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--interval") from None
    if follow and end_ts is not None:
        raise click.UsageError("--follow collects up to now: it takes no --end")
    if follow and ignore_lease:
        raise click.UsageError("--follow always takes the lease: --ignore-lease is for one run")
    stop = _stop_on_signals()
    lead = None if ignore_lease else leadership(app.settings, app.engine(), _now_ts)
    if lead is not None and not lead_or_refuse(lead, stop, follow):
        return
    try:
        done = run_once(app, start_ts, end_ts, stop, not no_kubernetes, accept_new_units)
        _end_first_round(app, done, stop, follow)
        if follow:
            _follow(app, stop, pause_s, not no_kubernetes, accept_new_units, lead)
        elif lead is not None and lead.lost:
            raise RuntimeFailure(f"the lease was lost during the collection: {_written(app, done)}")
    finally:
        if lead is not None:
            lead.release()


def _stop_on_signals() -> LeaseStop:
    """A stop request that SIGTERM and SIGINT set (and a lost lease, once a lease is taken)."""
    stop = LeaseStop()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set_from_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    return stop


def _end_first_round(app: AppContext, done: Round, stop: Stop, follow: bool) -> None:
    """Report the first round; a one-shot collection stopped by a signal exits 128 + signal,
    one left with a partial page exits 1 (``--follow`` retries it in the next round)."""
    if not follow and stop.is_set():
        click.echo(
            f"gpuwatch: interrupted by {_signal_name(stop)}: {_written(app, done)}", err=True
        )
        raise click.exceptions.Exit(128 + (stop.signum or signal.SIGINT))
    _end_round(app, done, stop)
    if not follow and done.stats is not None and done.stats.partial is not None:
        raise click.exceptions.Exit(1)  # a gap a one-shot backfill must not pass over silently
    if not follow and done.stats is not None and not done.stats.pages:
        click.echo(
            f"collect: nothing new to collect: the window ends where it starts, at "
            f"{rfc3339(done.window.start_ts)}",
            err=True,
        )


def _follow(
    app: AppContext,
    stop: Stop,
    pause_s: float,
    with_kube: bool,
    accept_new_units: bool,
    lead: Leadership | None = None,
) -> None:
    """Further rounds every ``pause_s`` until a signal; each ends after its current write. With
    a lease, the pause renews it, and a replica that lost it waits for it before its next round."""
    compacted_ts = 0
    while not (lead.pause(stop, pause_s) if lead is not None else stop.wait(pause_s)):
        if lead is not None and not (lead.keep() or lead.wait(stop)):
            break
        _end_round(app, run_once(app, None, None, stop, with_kube, accept_new_units), stop)
        if stop.is_set():
            break
        if _now_ts() - compacted_ts >= COMPACT_EVERY_S:
            compacted_ts = _now_ts()
            click.echo(describe_compaction(compact_store(app, compacted_ts)))


def _end_round(app: AppContext, done: Round, stop: Stop) -> None:
    """Report a round; a --follow round cut short by a signal also says what it wrote."""
    if done.stats is not None:
        _report(done.stats)
    if stop.is_set() and (done.stats is None or done.stats.end_ts < done.window.end_ts):
        click.echo(
            f"collect: stopped by {_signal_name(stop)} during a round: {_written(app, done)}",
            err=True,
        )
