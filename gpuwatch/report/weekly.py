"""The weekly waste report CSV (contract section 4).

:func:`weekly_report` builds the rows as a DataFrame (numbers already rounded, rows sorted);
:func:`render_csv` writes them exactly as the contract says. Both are pure.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.costing import prepare
from gpuwatch.analytics.efficiency import efficiency_of_sums
from gpuwatch.analytics.gangs import workload_stalls
from gpuwatch.analytics.grouping import group_sum
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.analytics.recommend import (
    build_context,
    data_span_hours,
    recommend_from_stats,
    window_placement,
)
from gpuwatch.analytics.render import neutralise
from gpuwatch.analytics.summary import as_text, sample_measures
from gpuwatch.analytics.workloads import workload_stats
from gpuwatch.domain.pricing import PriceBook
from gpuwatch.domain.scheduling import SchedulingPolicy
from gpuwatch.domain.series import StoredDetail

WEEK_S = 7 * 86400
IDLE_NAMESPACE = "__idle__"
UNALLOCATED_KIND = "Unallocated"
#: Contract section 7's columns, appended after section 4's in this order.
SECTION_7: tuple[str, ...] = (
    "allocation",
    "queue",
    "stalled_gpu_hours",
    "stalled_cost_usd",
    "throttled_gpu_hours",
    "failing_gpu_hours",
    "failing_cost_usd",
    "sm_active_pct",
    "tensor_active_pct",
    "unallocated_gpu_hours",
    "unallocated_cost_usd",
)
HEADER: tuple[str, ...] = (
    "week_start",
    "cluster",
    "team",
    "namespace",
    "workload_kind",
    "workload",
    "gpu_model",
    "gpus_requested",
    "allocated_gpu_hours",
    "used_gpu_hours",
    "efficiency_pct",
    "idle_gpu_hours",
    "allocated_cost_usd",
    "idle_cost_usd",
    "unused_cost_usd",
    "recommendation",
    "est_monthly_savings_usd",
    *SECTION_7,
)
TEXT_COLUMNS = frozenset(
    {"week_start", "cluster", "team", "namespace", "workload_kind", "workload", "gpu_model",
     "recommendation", "allocation", "queue"}
)  # fmt: skip
TWO_DECIMALS = frozenset(
    {"allocated_gpu_hours", "used_gpu_hours", "idle_gpu_hours", "allocated_cost_usd",
     "idle_cost_usd", "unused_cost_usd", "est_monthly_savings_usd", "unallocated_gpu_hours",
     "unallocated_cost_usd"}
)  # fmt: skip
#: Section 7's stalled-gang figures (:func:`workload_stalls`): 0 for a workload that never
#: stalled, empty on ``__idle__`` rows (no workload).
STALL_FIGURES = ("stalled_gpu_hours", "stalled_cost_usd")
#: Percent columns of section 7 that stay empty where the exporter provides no profiling fields.
OPTIONAL_PCT = ("sm_active_pct", "tensor_active_pct")
#: Section 7's columns from the health roll-up (:func:`efficiency_of_sums`); empty where not
#: measured (no health readings; ``throttled_gpu_hours`` without clock-event readings).
HEALTH_FIGURES = ("throttled_gpu_hours", "failing_gpu_hours", "failing_cost_usd", *OPTIONAL_PCT)
#: After every saving kind, the kinds a workload's cell may name, in this order.
_NO_SAVING_ORDER = ("memory_risk", "investigate_efficiency", "consolidate_placement")
_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")
_SORT_KEYS = ["cluster", "namespace", "workload_kind", "workload", "gpu_model"]


def iso_week_bounds(week: str) -> tuple[int, int]:
    """``[start_ts, end_ts)`` of an ISO week like ``2026-W46``: Monday 00:00 UTC, 7 days."""
    match = _WEEK.match(week.strip())
    if match is None:
        raise ValueError(f"invalid week {week!r}: use the ISO form YYYY-Www, e.g. 2026-W46")
    try:
        start = datetime.fromisocalendar(int(match.group(1)), int(match.group(2)), 1)
    except ValueError:
        raise ValueError(f"invalid week {week!r}: year {match.group(1)} has no such week") from None
    start_ts = int(start.replace(tzinfo=UTC).timestamp())
    return start_ts, start_ts + WEEK_S


def week_label(ts: int) -> str:
    """The ISO week containing ``ts``, as ``YYYY-Www``."""
    year, week, _ = datetime.fromtimestamp(ts, tz=UTC).isocalendar()
    return f"{year}-W{week:02d}"


def last_complete_week(now_ts: int) -> str:
    """The last ISO week that ended at or before ``now_ts``."""
    return week_label(now_ts - WEEK_S)


def _check_week_start(week_start_ts: int) -> str:
    start = datetime.fromtimestamp(week_start_ts, tz=UTC)
    if start.weekday() != 0 or start != start.replace(hour=0, minute=0, second=0, microsecond=0):
        raise ValueError(f"week start {start.isoformat()} is not a Monday 00:00 UTC")
    return start.date().isoformat()


def _summed(rows: pd.DataFrame, keys: list[str], threshold: float) -> pd.DataFrame:
    """The cost model's sums per group: held samples add to the allocated, used, idle and
    unused columns, unheld ones to the unallocated columns only."""
    values = sample_measures(rows, threshold)
    names = list(c.SUM_COLUMNS)
    out = group_sum(rows[keys].reset_index(drop=True), {n: values[n] for n in names})
    return as_text(out, keys)


def allocation_modes(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per group of ``keys``: how its GPUs were held (the samples' ``allocation``: contract
    section 7), distinct modes ``+``-joined and sorted. Workload rows take theirs from
    :func:`~gpuwatch.analytics.workloads.workload_stats`; this serves the ``__idle__`` rows."""
    frame = as_text(rows[keys].reset_index(drop=True), keys)
    frame["allocation"] = rows["allocation"].astype(object).to_numpy()
    frame = frame.drop_duplicates().sort_values([*keys, "allocation"], kind="stable")
    joined = frame.groupby(keys, sort=False, dropna=False)["allocation"].agg("+".join)
    return joined.reset_index()


def _best_recommendation(recs: pd.DataFrame) -> pd.DataFrame:
    """Per workload: the largest-saving kind, else ``memory_risk``, else
    ``investigate_efficiency``, else ``consolidate_placement``, with its savings."""
    saving = recs[recs["est_monthly_savings_usd"] > 0]
    others = [recs[recs["kind"].eq(kind)] for kind in _NO_SAVING_ORDER]
    best = pd.concat([saving, *others]).drop_duplicates(_SORT_KEYS, keep="first")
    best = best[[*_SORT_KEYS, "kind", "est_monthly_savings_usd"]]
    return best.rename(columns={"kind": "recommendation"})


def _workload_rows(
    costed: pd.DataFrame,
    pods: pd.DataFrame | None,
    price_book: PriceBook,
    policy: AnalyticsPolicy,
    context: dict[str, Any],
) -> pd.DataFrame:
    held = costed[costed[c.ALLOCATED] & (costed[c.GPU_HOURS] > 0)]
    if held.empty:
        return pd.DataFrame()
    sums = _summed(held, _SORT_KEYS, policy.idle_threshold_ratio)
    stats = workload_stats(held, policy, price_book, context["gpus"], context.get("detail"))
    ctx = build_context(policy, price_book, context["nodes"], pods)
    efficiency = context.get("efficiency")
    recs = recommend_from_stats(
        stats, ctx, context["data_hours"], efficiency, context.get("placement")
    )
    best = _best_recommendation(recs)
    facts = stats[[*_SORT_KEYS, "team", "gpus_requested", "allocation"]]
    out = sums.merge(facts, on=_SORT_KEYS, how="left").merge(best, on=_SORT_KEYS, how="left")
    out = _with_health(out, efficiency)
    out = _with_stalls(out, held, pods, context)
    out["recommendation"] = out["recommendation"].fillna("")
    out["est_monthly_savings_usd"] = out["est_monthly_savings_usd"].fillna(0.0)
    return out


def _with_health(rows: pd.DataFrame, efficiency: pd.DataFrame | None) -> pd.DataFrame:
    """Workload rows with the health figures of their efficiency row; without a health frame
    they stay empty (not measured), without a row of their own failing is 0, the rest empty."""
    if efficiency is None:
        return rows
    figures = efficiency[[*_SORT_KEYS, *HEALTH_FIGURES]].copy()
    rows = rows.copy()
    for name in _SORT_KEYS:
        figures[name] = figures[name].astype("string")
        rows[name] = rows[name].astype("string")
    out = rows.merge(figures, on=_SORT_KEYS, how="left")
    for name in ("failing_gpu_hours", "failing_cost_usd"):
        out[name] = out[name].astype("float64").fillna(0.0)
    return out


def _with_stalls(
    rows: pd.DataFrame, held: pd.DataFrame, pods: pd.DataFrame | None, context: dict[str, Any]
) -> pd.DataFrame:
    """Workload rows with their queue and stalled figures (:func:`workload_stalls`)."""
    rows = rows.copy()
    if pods is None or "queue" not in pods:  # no pods, no gangs: not measured
        rows["queue"] = ""
        for name in STALL_FIGURES:
            rows[name] = np.nan
        return rows
    start_ts, end_ts = context["window"]
    stalls = workload_stalls(held, pods, context["scheduling"], start_ts, end_ts)
    for name in _SORT_KEYS:
        stalls[name] = stalls[name].astype("string")
        rows[name] = rows[name].astype("string")
    out = rows.merge(stalls, on=_SORT_KEYS, how="left")
    out["queue"] = out["queue"].astype(object).where(out["queue"].notna(), "")
    for name in STALL_FIGURES:
        out[name] = out[name].astype("float64").fillna(0.0)
    return out


def _idle_rows(costed: pd.DataFrame, threshold: float) -> pd.DataFrame:
    free = costed[~costed[c.ALLOCATED] & (costed[c.GPU_HOURS] > 0)]
    if free.empty:
        return pd.DataFrame()
    keys = ["cluster", "node", "gpu_model"]
    out = _summed(free, keys, threshold)
    out = out.merge(allocation_modes(free, keys), on=keys, how="left")
    out = out.rename(columns={"node": "workload"})
    out["namespace"] = IDLE_NAMESPACE
    out["workload_kind"] = UNALLOCATED_KIND
    out["team"] = ""
    out["gpus_requested"] = 0
    out["recommendation"] = ""
    out["est_monthly_savings_usd"] = 0.0
    out["queue"] = ""  # no workload: no queue, no gang
    for name in STALL_FIGURES:
        out[name] = np.nan
    # Allocated figures only: an unheld GPU is throttled or failing for no workload.
    for name in ("throttled_gpu_hours", "failing_gpu_hours", "failing_cost_usd"):
        out[name] = 0.0
    return out


def _finish(frame: pd.DataFrame, week_start: str, measured: bool) -> pd.DataFrame:
    frame = frame.copy()
    frame["week_start"] = week_start
    alloc = frame["allocated_gpu_hours"].to_numpy(dtype="float64")
    used = frame["used_gpu_hours"].to_numpy(dtype="float64")
    efficiency = 100.0 * used / np.where(alloc > 0, alloc, 1.0)
    frame["efficiency_pct"] = np.where(alloc > 0, efficiency, 0.0).round(1) + 0.0
    for name in TWO_DECIMALS:
        frame[name] = frame[name].astype("float64").round(2) + 0.0
    frame["gpus_requested"] = frame["gpus_requested"].fillna(0).astype("int64")
    for name in STALL_FIGURES:
        values = frame[name].astype("float64").round(2) + 0.0
        frame[name] = values.astype(object).where(values.notna(), None)
    for name in HEALTH_FIGURES:
        if not measured or name not in frame:
            frame[name] = None
            continue
        values = frame[name].astype("float64")
        frame[name] = values.round(1 if name in OPTIONAL_PCT else 2) + 0.0
    for name in TEXT_COLUMNS:
        frame[name] = frame[name].astype(object).where(frame[name].notna(), "").astype(str)
    frame = frame.sort_values(_SORT_KEYS, kind="stable")
    frame = frame.sort_values("idle_cost_usd", ascending=False, kind="stable")
    return frame[list(HEADER)].reset_index(drop=True)


def weekly_report(
    samples: pd.DataFrame,
    pods: pd.DataFrame | None,
    gpus: pd.DataFrame | None,
    price_book: PriceBook,
    policy: AnalyticsPolicy,
    week_start_ts: int,
    *,
    nodes: pd.DataFrame | None = None,
    detail: StoredDetail | None = None,
    health_sums: pd.DataFrame | None = None,
    scheduling: SchedulingPolicy | None = None,
) -> pd.DataFrame:
    """The report's rows for the ISO week starting at ``week_start_ts`` (a Monday 00:00 UTC).

    Columns are :data:`HEADER`; hours and dollars are rounded to 2 decimals, percents to 1;
    rows are sorted by ``idle_cost_usd`` descending, then by their key columns.
    ``health_sums``: the week's health roll-up summed per (unit, pod) (HEALTH_SUM_COLUMNS,
    :func:`~gpuwatch.analytics.health_sums.health_sums`) for the health columns,
    ``investigate_efficiency`` and the traffic of ``consolidate_placement``; without it those
    columns are empty. ``scheduling``: when a
    gang counts as stalled (default :class:`SchedulingPolicy`).
    """
    week_start = _check_week_start(week_start_ts)
    end_ts = week_start_ts + WEEK_S
    week = samples[(samples["ts"] >= week_start_ts) & (samples["ts"] < end_ts)]
    costed = prepare(week, pods, price_book)
    context = {
        "gpus": gpus,
        "nodes": nodes,
        "detail": detail,
        "data_hours": data_span_hours(week, week_start_ts, end_ts),
        "efficiency": _week_efficiency(health_sums, price_book),
        "placement": window_placement(week, nodes, pods, health_sums),
        "scheduling": scheduling or SchedulingPolicy(),
        "window": (week_start_ts, end_ts),
    }
    parts = [
        _workload_rows(costed, pods, price_book, policy, context),
        _idle_rows(costed, policy.idle_threshold_ratio),
    ]
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame({name: pd.Series(dtype=object) for name in HEADER})
    measured = context["efficiency"] is not None
    return _finish(pd.concat(parts, ignore_index=True), week_start, measured)


def _week_efficiency(
    health_sums: pd.DataFrame | None, price_book: PriceBook
) -> pd.DataFrame | None:
    """The week's efficiency rows; None (the health columns not measured) without a health
    roll-up for the week, as in a store collected before it existed."""
    if health_sums is None or health_sums.empty:
        return None
    return efficiency_of_sums(health_sums, price_book)


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))


def _cell(name: str, value: Any) -> str:
    if (name in STALL_FIGURES or name in HEALTH_FIGURES) and _missing(value):
        return ""
    if name in TEXT_COLUMNS:
        return neutralise("" if value is None or value is pd.NA else str(value))
    if name == "gpus_requested":
        return str(int(value))
    if name == "efficiency_pct" or name in OPTIONAL_PCT:
        return f"{float(value):.1f}"
    return f"{float(value):.2f}"


def render_csv(frame: pd.DataFrame) -> str:
    """The report as CSV: the contract's header, ``\\n`` line endings, header alone if empty."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(HEADER)
    for row in frame[list(HEADER)].itertuples(index=False, name=None):
        writer.writerow([_cell(name, value) for name, value in zip(HEADER, row, strict=True)])
    return buffer.getvalue()
