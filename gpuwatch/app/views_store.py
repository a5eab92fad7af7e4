"""Views that read the store directly with narrow queries: one GPU's history, the weekly
report of one week, the alerts (the last hours of samples, or Prometheus' own alerts).
Memoized per snapshot."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuwatch.alerts.definitions import AlertDefinition, alert_table
from gpuwatch.alerts.evaluate import Evaluation, evaluate_core, samples_span_s
from gpuwatch.alerts.live import LiveAlerts, LiveAlertsError, fetch_rules, parse_rules
from gpuwatch.alerts.params import rule_params_from_settings
from gpuwatch.analytics.costing import drop_gpuless_pods, prepare
from gpuwatch.analytics.totals import hours_with_data
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.app.rollup import READING_COLUMNS
from gpuwatch.app.views import hourly_rows, window_bounds
from gpuwatch.config.http import http_options
from gpuwatch.domain.durations import HOUR_S, WEEK_S
from gpuwatch.report.inputs import load_inputs
from gpuwatch.report.weekly import (
    iso_week_bounds,
    last_complete_week,
    render_csv,
    week_label,
    weekly_report,
)
from gpuwatch.store import repository

#: Columns of one GPU's history (raw samples and hourly rows alike).
HISTORY_COLUMNS = (
    "ts",
    "step_s",
    "span_s",
    "cluster",
    "namespace",
    "workload_kind",
    "workload",
    "pod",
    *READING_COLUMNS,
)


def _as_text(frame: pd.DataFrame) -> pd.DataFrame:
    names = ("cluster", "namespace", "workload_kind", "workload", "pod")
    return frame.astype(dict.fromkeys(names, object))


def gpu_history(data: DashboardData, snap: Snapshot, gpu_id: int, f: Filters) -> pd.DataFrame:
    """One GPU unit's history over the window, costed: its raw samples where the store still
    keeps them, its hourly roll-ups before that (``span_s``: 3600 on those rows, the step on
    raw samples; ``idle_ratio`` set on hourly rows only)."""

    def compute() -> pd.DataFrame:
        start, end = window_bounds(snap, f)
        raw_from = max(start, snap.raw_from_ts)
        parts = []
        if raw_from > start:
            hourly = hourly_rows(snap, f)
            hourly = hourly[(hourly["gpu_id"].to_numpy() == gpu_id) & (hourly["ts"] < raw_from)]
            hourly = hourly.assign(span_s=HOUR_S)
            parts.append(_as_text(hourly[list(HISTORY_COLUMNS)]))
        samples = repository.load_gpu_samples(data.engine, gpu_id, raw_from, end)
        if len(samples):
            costed = prepare(samples, snap.pods, snap.price_book)
            costed = costed.assign(span_s=costed["step_s"], idle_ratio=np.nan)
            parts.append(_as_text(costed[list(HISTORY_COLUMNS)]))
        parts = [p for p in parts if len(p)]
        if not parts:
            return pd.DataFrame(columns=list(HISTORY_COLUMNS))
        return pd.concat(parts, ignore_index=True)

    return snap.memo(("gpu_history", gpu_id, f.window), compute)


def report_weeks(snap: Snapshot) -> list[str]:
    """ISO weeks with data, newest first."""
    if snap.first_ts is None or snap.marker.last_ts is None:
        return []
    first_start, _ = iso_week_bounds(week_label(snap.first_ts))
    weeks = [week_label(ts) for ts in range(first_start, snap.marker.last_ts + 1, WEEK_S)]
    return sorted(set(weeks), reverse=True)


def default_week(snap: Snapshot) -> str | None:
    """The last complete week of the data, else the newest week with data."""
    weeks = report_weeks(snap)
    if not weeks or snap.marker.last_ts is None:
        return None
    complete = last_complete_week(snap.marker.last_ts + snap.step_s)
    return complete if complete in weeks else weeks[0]


@dataclass(frozen=True)
class WeeklyView:
    """The weekly report's rows, and the week's hours with data (its savings' basis)."""

    frame: pd.DataFrame
    data_hours: float


def weekly_view(data: DashboardData, snap: Snapshot, week: str) -> WeeklyView:
    """The weekly waste report of ``week``, exactly as ``gpuwatch report weekly``."""

    def compute() -> WeeklyView:
        start_ts, end_ts = iso_week_bounds(week)
        inputs = load_inputs(
            data.engine,
            start_ts,
            end_ts,
            resolution="auto",
            idle_util_pct=data.settings.thresholds.idle_util_pct,
            health=True,
            unheld_per_day=True,
        )
        frame = weekly_report(
            inputs.samples,
            inputs.pods,
            inputs.gpus,
            data.price_book,
            data.policy,
            start_ts,
            nodes=inputs.nodes,
            detail=inputs.detail,
            health_sums=inputs.health_sums,
        )
        return WeeklyView(frame, hours_with_data(inputs.samples, start_ts, end_ts))

    return snap.memo(weekly_key(week), compute, pin=True, share=True)


WEEKLY = "weekly"


def weekly_key(week: str) -> tuple[str, str]:
    return (WEEKLY, week)


def asked_weeks(snap: Snapshot) -> list[str]:
    """The weeks whose report a page asked for lately (carried over from the last snapshot)."""
    return [str(week) for week in snap.asked_of(WEEKLY)]


def weekly(data: DashboardData, snap: Snapshot, week: str) -> pd.DataFrame:
    """The weekly waste report rows of ``week``, exactly as ``gpuwatch report weekly``."""
    return weekly_view(data, snap, week).frame


def weekly_csv(data: DashboardData, snap: Snapshot, week: str) -> str:
    return render_csv(weekly(data, snap, week))


#: Seconds a Prometheus answer about its alerts is reused.
LIVE_TTL_S = 30
#: Longest wait for that answer (a page waits on it).
LIVE_TIMEOUT_S = 5.0


def stored_alerts(data: DashboardData, snap: Snapshot) -> list[Evaluation]:
    """The core alerts evaluated over the stored samples at the last one, from the same
    definitions as the rendered rules (:mod:`gpuwatch.alerts.evaluate`)."""

    def compute() -> list[Evaluation]:
        last = snap.marker.last_ts
        if last is None:
            return []
        params = rule_params_from_settings(data.settings)
        table = alert_table(params)
        samples = repository.load_samples(data.engine, last - samples_span_s(table), last + 1)
        samples = drop_gpuless_pods(samples, snap.pods)
        return evaluate_core(samples, table, last, params.exporter_namespaces)

    return snap.memo(("stored_alerts",), compute, pin=True, share=True)


@dataclass(frozen=True)
class AlertStates:
    """What the Alerts page shows: Prometheus' own alerts when it has gpuwatch's rules loaded
    (``live``), else the store's evaluation (``stored``); ``note`` says which, and why;
    ``definitions`` are every alert's, with the configured thresholds."""

    note: str
    definitions: tuple[AlertDefinition, ...]
    live: LiveAlerts | None = None
    stored: tuple[Evaluation, ...] = ()


def _live(data: DashboardData, names: frozenset[str]) -> LiveAlerts | str:
    prometheus = data.settings.prometheus
    timeout = min(LIVE_TIMEOUT_S, prometheus.timeout.total_seconds())
    try:
        with http_options(prometheus).session() as session:
            return parse_rules(fetch_rules(prometheus.url, session, timeout), names)
    except (LiveAlertsError, OSError) as exc:
        return str(exc)


def alert_states(data: DashboardData, snap: Snapshot, now_s: float) -> AlertStates:
    """Prometheus' alerts where ``prometheus.url`` is configured and has gpuwatch's rules, else
    the store's evaluation; the Prometheus answer is reused for :data:`LIVE_TTL_S`."""
    table = alert_table(rule_params_from_settings(data.settings))
    url = data.settings.prometheus.url
    reason = "no prometheus.url is configured"
    if data.settings.prometheus.url_is_set:
        names = frozenset(d.name for d in table.all())
        live = snap.memo(("live_alerts", int(now_s // LIVE_TTL_S)), lambda: _live(data, names))
        if isinstance(live, LiveAlerts) and live.loaded:
            note = f"As Prometheus at {url} evaluates gpuwatch's rules now."
            return AlertStates(note, table.all(), live)
        reason = live if isinstance(live, str) else f"{url} has not loaded gpuwatch's rules"
    stored = tuple(stored_alerts(data, snap))
    return AlertStates(f"Evaluated from the stored samples ({reason}).", table.all(), stored=stored)
