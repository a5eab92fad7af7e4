"""Views that read the store directly with narrow queries: one GPU's history, the weekly
report of one week, the last hours behind the alert conditions. Memoized per snapshot."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.costing import prepare
from gpuwatch.analytics.totals import hours_with_data
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.app.rollup import HOUR_S, READING_COLUMNS
from gpuwatch.app.views import hourly_rows, window_bounds
from gpuwatch.report.inputs import load_inputs
from gpuwatch.report.weekly import (
    WEEK_S,
    iso_week_bounds,
    last_complete_week,
    render_csv,
    week_label,
    weekly_report,
)
from gpuwatch.store import repository

RECENT_S = 6 * 3600
IDLE_S = 3600
SILENT_S = 600


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
        )
        return WeeklyView(frame, hours_with_data(inputs.samples, start_ts, end_ts))

    return snap.memo(("weekly", week), compute, pin=True)


def weekly(data: DashboardData, snap: Snapshot, week: str) -> pd.DataFrame:
    """The weekly waste report rows of ``week``, exactly as ``gpuwatch report weekly``."""
    return weekly_view(data, snap, week).frame


def weekly_csv(data: DashboardData, snap: Snapshot, week: str) -> str:
    return render_csv(weekly(data, snap, week))


@dataclass(frozen=True)
class Condition:
    """One alert's condition and the subjects that meet it in the stored data now."""

    alert: str
    condition: str
    subjects: pd.DataFrame


def recent(data: DashboardData, snap: Snapshot) -> pd.DataFrame:
    """The last six hours of samples, costed."""

    def compute() -> pd.DataFrame:
        last = snap.marker.last_ts
        if last is None:
            return pd.DataFrame()
        samples = repository.load_samples(data.engine, last - RECENT_S + 1, last + 1)
        return prepare(samples, snap.pods, snap.price_book)

    return snap.memo(("recent",), compute, pin=True)


def _latest(frame: pd.DataFrame) -> pd.DataFrame:
    ordered = frame.sort_values(["gpu_id", "ts"], kind="stable")
    return ordered.drop_duplicates("gpu_id", keep="last")


def _gpu_subjects(frame: pd.DataFrame, value: pd.Series, name: str) -> pd.DataFrame:
    out = frame[["cluster", "node", "gpu_id", "gpu_model", "namespace", "pod"]].copy()
    out[name] = value.to_numpy()
    return out.astype({"cluster": object, "node": object, "gpu_model": object}).reset_index(
        drop=True
    )


def _idle_held(costed: pd.DataFrame, last: int, threshold: float) -> pd.DataFrame:
    hour = costed[costed["ts"] > last - IDLE_S]
    grid = hour.groupby("gpu_id").agg(
        n=("ts", "size"),
        held=(c.ALLOCATED, "sum"),
        max_util=(c.UTIL, "max"),
        pods=("pod", "nunique"),
    )
    steps = max(int(IDLE_S // max(int(hour["step_s"].max()), 1)), 1) if len(hour) else 1
    ids = grid.index[
        (grid["n"] >= steps) & (grid["held"] == grid["n"]) & (grid["max_util"] < threshold)
    ]
    latest = _latest(hour[hour["gpu_id"].isin(ids)])
    return _gpu_subjects(latest, 100.0 * latest["gpu_id"].map(grid["max_util"]), "max_util_pct")


def _low_efficiency(costed: pd.DataFrame, pct: float, excluded: list[str]) -> pd.DataFrame:
    held = costed[costed[c.ALLOCATED] & (costed[c.GPU_HOURS] > 0)]
    held = held[~held["namespace"].astype(object).isin(excluded)]
    g = held.groupby(["cluster", "namespace"], observed=True)
    out = (100.0 * g[c.UTIL].mean()).rename("mean_util_pct").reset_index()
    out["gpu_units"] = g["gpu_id"].nunique().to_numpy()
    out = out[out["mean_util_pct"] < pct]
    return out.astype({"cluster": object, "namespace": object}).reset_index(drop=True)


def _silent_nodes(costed: pd.DataFrame, last: int) -> pd.DataFrame:
    per_node = costed.groupby(["cluster", "node"], observed=True)["ts"].max().reset_index()
    per_node = per_node[per_node["ts"] < last - SILENT_S]
    return per_node.rename(columns={"ts": "last_sample_ts"}).astype(
        {"cluster": object, "node": object}
    )


def alert_conditions(data: DashboardData, snap: Snapshot) -> list[Condition]:
    """Which alert conditions the stored data meets at its last sample."""

    def compute() -> list[Condition]:
        costed = recent(data, snap)
        last = snap.marker.last_ts
        if costed.empty or last is None:
            return []
        thresholds = data.settings.thresholds
        latest = _latest(costed[costed["ts"] > last - SILENT_S])
        fb = latest["fb_used_mib"] / latest["fb_total_mib"].where(latest["fb_total_mib"] > 0)
        mem = latest[(100.0 * fb).ge(thresholds.memory_full_pct).to_numpy(dtype=bool)]
        hot = latest[latest["temp_c"].ge(thresholds.temperature_c).to_numpy(dtype=bool)]
        xid = latest[latest["xid"].fillna(0).ne(0).to_numpy(dtype=bool)]
        idle_pct, low_pct = thresholds.idle_util_pct, thresholds.low_efficiency_pct
        mem_pct = 100.0 * mem["fb_used_mib"] / mem["fb_total_mib"]
        return [
            Condition(
                "GPUAllocatedIdle",
                f"held by a pod and below {idle_pct:g}% utilization for the last hour",
                _idle_held(costed, last, idle_pct / 100.0),
            ),
            Condition(
                "GPUNamespaceLowEfficiency",
                f"namespace's allocated GPUs average below {low_pct:g}% over the last 6 hours",
                _low_efficiency(costed, low_pct, list(data.settings.alerts.exporter_namespaces)),
            ),
            Condition(
                "GPUMemoryNearFull",
                f"framebuffer used ≥ {thresholds.memory_full_pct:g}% of total at the last sample",
                _gpu_subjects(mem, mem_pct, "memory_used_pct"),
            ),
            Condition(
                "GPUHighTemperature",
                f"temperature ≥ {thresholds.temperature_c:g} °C at the last sample",
                _gpu_subjects(hot, hot["temp_c"], "temp_c"),
            ),
            Condition(
                "GPUXidError",
                "a non-zero XID error code at the last sample",
                _gpu_subjects(xid, xid["xid"].astype("float64"), "xid"),
            ),
            Condition(
                "GPUExporterDown",
                "a node that reported in the last 6 hours and has been silent for 10 minutes",
                _silent_nodes(costed, last),
            ),
        ]

    return snap.memo(("alert_conditions",), compute, pin=True)
