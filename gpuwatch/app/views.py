"""What the fleet pages show, as plain frames: pure functions of a snapshot and the filters.

Every function memoizes its result in the snapshot under (name, filters), so a filter change
recomputes only what changed, and new data (a new snapshot) starts from an empty cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.grouping import group_ids, joined_per_group, top_label
from gpuwatch.analytics.recommend import (
    build_context,
    empty_recommendations,
    recommend_from_stats,
    window_efficiency,
    window_placement,
)
from gpuwatch.analytics.summary import add_ratios, unit_coverage
from gpuwatch.analytics.totals import best_per_workload, potential_savings_usd
from gpuwatch.analytics.workloads import workload_stats
from gpuwatch.app import windows
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.rollup import COST_SUMS, allocation_modes, pending_series
from gpuwatch.app.window_costs import span_cost_rows, span_sums
from gpuwatch.app.window_health import health_sums_window
from gpuwatch.app.window_hourly import window_hourly
from gpuwatch.domain.durations import DAY_S, HOUR_S
from gpuwatch.domain.frames import NO_POD
from gpuwatch.store.repository_detail import load_window_detail
from gpuwatch.store.repository_span import hourly_span

WORKLOAD = ["cluster", "namespace", "workload_kind", "workload"]
_FILTER_COLUMNS = (("cluster", "cluster"), ("model", "gpu_model"), ("allocation", "allocation"))
_POD_FILTERS = (("team", "team"), ("namespace", "namespace"))
#: (filter, column) of every filter a row of cost can be narrowed by.
ROW_FILTERS = _FILTER_COLUMNS + _POD_FILTERS


def window_bounds(snap: Snapshot, f: Filters) -> tuple[int, int]:
    """``[start_ts, end_ts)`` of the filter's window (:func:`gpuwatch.app.windows.bounds`:
    presets end at the hour after the last sample)."""
    return windows.bounds(f.window, snap.end_ts)


def equals(column: pd.Series, value: str) -> np.ndarray:
    """Rows whose ``column`` is ``value`` (categorical columns compare codes: fast)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        categories = column.cat.categories
        if value not in categories:
            return np.zeros(len(column), dtype=bool)
        return np.asarray(column.cat.codes.to_numpy() == categories.get_loc(value), dtype=bool)
    return column.astype(object).eq(value).to_numpy(dtype=bool)


def filter_mask(frame: pd.DataFrame, f: Filters, pairs: tuple[tuple[str, str], ...]) -> np.ndarray:
    """Rows whose ``column`` equals each set filter ``attr`` of ``pairs`` ((attr, column))."""
    mask = np.ones(len(frame), dtype=bool)
    for attr, column in pairs:
        value = getattr(f, attr)
        if value is not None:
            mask &= equals(frame[column], value)
    return mask


def window_days(snap: Snapshot, f: Filters) -> float:
    start, end = window_bounds(snap, f)
    return (end - start) / DAY_S


def cost_rows(snap: Snapshot, f: Filters, skip_s: int = 0) -> pd.DataFrame:
    """The per (UTC day, GPU unit, pod) cost rows of the window and filters; with ``skip_s``,
    of the window as long that ends that many seconds earlier."""

    def compute() -> pd.DataFrame:
        start, end = window_bounds(snap, f)
        rows = span_cost_rows(snap, start - skip_s, end - skip_s)
        return pd.DataFrame(rows[filter_mask(rows, f, ROW_FILTERS)])

    return snap.memo(("cost_rows", f, skip_s), compute)


def unit_ids(snap: Snapshot, f: Filters) -> np.ndarray:
    """GPU units in scope: of the cluster and model; with a team or namespace, those it held."""

    def compute() -> np.ndarray:
        units = snap.units[filter_mask(snap.units, f, _FILTER_COLUMNS)]
        ids = units["gpu_id"].to_numpy(dtype="int64")
        if f.team is not None or f.namespace is not None:
            held = cost_rows(snap, f)
            ids = np.intersect1d(ids, held.loc[held["pod_id"] != NO_POD, "gpu_id"].unique())
        return ids

    return snap.memo(("unit_ids", f), compute)


def gpu_rows(snap: Snapshot, f: Filters) -> pd.DataFrame:
    """The per (UTC day, GPU unit) rows of the window, for the units in scope."""

    def compute() -> pd.DataFrame:
        rows = span_sums(snap, *window_bounds(snap, f)).gpu
        return pd.DataFrame(rows[rows["gpu_id"].isin(unit_ids(snap, f)).to_numpy()])

    return snap.memo(("gpu_rows", f), compute)


def hourly_rows(snap: Snapshot, f: Filters) -> pd.DataFrame:
    """The hourly rows of the window, with data hours and unit prices (never modify them)."""
    return window_hourly(snap, *window_bounds(snap, f))


def data_window(snap: Snapshot, window: str) -> tuple[int, int] | None:
    """The part of the window the fleet's data covers (the hours with roll-ups, as
    :func:`~gpuwatch.analytics.totals.data_span` finds them in the hourly rows and ``gpuwatch
    recommend`` clips its window); None without."""

    def compute() -> tuple[int, int] | None:
        if snap.engine is None or snap.empty:
            return None
        return hourly_span(snap.engine, *window_bounds(snap, Filters(window=window)))

    return snap.memo(("data_window", window), compute, pin=True)


def data_hours(snap: Snapshot, window: str) -> float:
    """Hours of the window with data: what monthly figures are extrapolated from."""
    span = data_window(snap, window)
    return 0.0 if span is None else (span[1] - span[0]) / 3600.0


def sums(rows: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Summed cost-model quantities per group (one row when ``by`` is empty), with ratios."""
    names = list(COST_SUMS)
    if not by:
        frame = (
            pd.DataFrame([rows[names].sum()])
            if len(rows)
            else pd.DataFrame([dict.fromkeys(names, 0.0)])
        )
    else:
        grouped = rows.groupby(by, observed=True, dropna=True, sort=True)
        frame = grouped[names].sum().reset_index()
        for name in by:
            if isinstance(frame[name].dtype, pd.CategoricalDtype):
                frame[name] = frame[name].astype(object)
    return add_ratios(frame)


@dataclass(frozen=True)
class Headline:
    gpu_units: int
    capacity_gpu_hours: float
    allocated_gpu_hours: float
    allocated_pct: float
    efficiency_pct: float
    total_cost_usd: float
    allocated_cost_usd: float
    idle_cost_usd: float
    unused_cost_usd: float
    unallocated_cost_usd: float
    monthly_savings_usd: float
    recommendations: int
    data_hours: float
    coverage_ratio: float
    window_start_ts: int
    window_end_ts: int


def coverage(snap: Snapshot, f: Filters) -> pd.DataFrame:
    """Per unit in scope: hours it existed in the window, hours with data, coverage."""

    def compute() -> pd.DataFrame:
        start, end = window_bounds(snap, f)
        units = snap.units[snap.units["gpu_id"].isin(unit_ids(snap, f))]
        return unit_coverage(gpu_rows(snap, f), units, start, end)

    return snap.memo(("coverage", f), compute)


def pct_of(a: float, b: float) -> float:
    """``a`` as a percentage of ``b`` (NaN where ``b`` is not positive)."""
    return 100.0 * a / b if b > 0 else math.nan


def headline(snap: Snapshot, f: Filters) -> Headline:
    """The overview's headline figures for the window and filters."""

    def compute() -> Headline:
        rows = cost_rows(snap, f)
        total = sums(rows, []).iloc[0]
        cov = coverage(snap, f)
        observed = float(cov[c.OBSERVED_HOURS].sum())
        recs = recommendations(snap, f)
        start, end = window_bounds(snap, f)
        return Headline(
            gpu_units=int(rows.loc[rows[c.GPU_HOURS] > 0, "gpu_id"].nunique()),
            capacity_gpu_hours=float(total[c.CAPACITY_GPU_HOURS]),
            allocated_gpu_hours=float(total[c.ALLOCATED_GPU_HOURS]),
            allocated_pct=pct_of(total[c.ALLOCATED_GPU_HOURS], total[c.CAPACITY_GPU_HOURS]),
            efficiency_pct=pct_of(total[c.USED_GPU_HOURS], total[c.ALLOCATED_GPU_HOURS]),
            total_cost_usd=float(total[c.CAPACITY_COST_USD]),
            allocated_cost_usd=float(total[c.ALLOCATED_COST_USD]),
            idle_cost_usd=float(total[c.IDLE_COST_USD]),
            unused_cost_usd=float(total[c.UNUSED_COST_USD]),
            unallocated_cost_usd=float(total[c.UNALLOCATED_COST_USD]),
            monthly_savings_usd=potential_savings_usd(recs),
            recommendations=len(recs),
            data_hours=data_hours(snap, f.window),
            coverage_ratio=float(cov[c.DATA_HOURS].sum()) / observed if observed > 0 else math.nan,
            window_start_ts=start,
            window_end_ts=end,
        )

    return snap.memo(("headline", f), compute)


def window_recommendations(snap: Snapshot, window: str) -> pd.DataFrame:
    """Every recommendation for a window, as ``gpuwatch recommend`` over the same window: from
    the roll-ups and their stored detail, the health sums (efficiency, placement traffic),
    savings per 730 h from the window's hours with data."""

    def compute() -> pd.DataFrame:
        f = Filters(window=window)
        rows = hourly_rows(snap, f)
        if rows.empty or data_window(snap, window) is None:
            return empty_recommendations()
        start, end = window_bounds(snap, f)
        detail = None if snap.engine is None else load_window_detail(snap.engine, start, end)
        stats = workload_stats(rows, snap.policy, snap.price_book, snap.units, detail)
        ctx = build_context(snap.policy, snap.price_book, snap.nodes, snap.pods)
        sums = health_sums_window(snap, window)
        efficiency = window_efficiency(sums, snap.price_book)
        placement = window_placement(rows, snap.nodes, snap.pods, sums)
        return recommend_from_stats(stats, ctx, data_hours(snap, window), efficiency, placement)

    return snap.memo(recommendations_key(window), compute, pin=True, share=True)


#: The kind of a window's recommendations among the snapshot's pinned results.
RECOMMENDATIONS = "recommendations"


def recommendations_key(window: str) -> tuple[str, str]:
    return (RECOMMENDATIONS, window)


def recommendations(snap: Snapshot, f: Filters) -> pd.DataFrame:
    """The window's recommendations for the filters' cluster, team, namespace and model."""

    def compute() -> pd.DataFrame:
        recs = window_recommendations(snap, f.window)
        return recs[filter_mask(recs, f, ROW_FILTERS)].reset_index(drop=True)

    return snap.memo(("recommendations_for", f), compute)


def _savings_by(recs: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    best = best_per_workload(recs)
    if best.empty:
        return pd.DataFrame(columns=[*by, "est_monthly_savings_usd"])
    best = best.astype({name: object for name in by})
    return best.groupby(by, sort=False)["est_monthly_savings_usd"].sum().reset_index()


def breakdown(snap: Snapshot, f: Filters, by: tuple[str, ...]) -> pd.DataFrame:
    """Sums per group of ``by`` (allocated rows only for pod-side keys), with monthly savings."""

    def compute() -> pd.DataFrame:
        rows = cost_rows(snap, f)
        if set(by) & {"team", "namespace", "workload", "workload_kind"}:
            rows = rows[rows["pod_id"] != NO_POD]
        out = sums(rows, list(by))
        savings = _savings_by(recommendations(snap, f), list(by))
        out = out.merge(savings, on=list(by), how="left")
        out["est_monthly_savings_usd"] = out["est_monthly_savings_usd"].astype(float).fillna(0.0)
        return out.sort_values(c.IDLE_COST_USD, ascending=False, kind="stable").reset_index(
            drop=True
        )

    return snap.memo(("breakdown", f, by), compute)


def workloads(snap: Snapshot, f: Filters) -> pd.DataFrame:
    """Per workload: sums, savings, its team (most GPU-hours) and GPU models."""

    def compute() -> pd.DataFrame:
        out = breakdown(snap, f, tuple(WORKLOAD))
        rows = cost_rows(snap, f)
        rows = rows[rows["pod_id"] != NO_POD].reset_index(drop=True)
        if rows.empty:
            return out.assign(team=pd.Series(dtype=object), gpu_models=pd.Series(dtype=object))
        wid, first = group_ids(rows[WORKLOAD])
        hours = rows[c.ALLOCATED_GPU_HOURS].to_numpy(dtype="float64")
        facts = rows.loc[first, WORKLOAD].astype(object).reset_index(drop=True)
        facts["team"] = top_label(wid, len(first), rows["team"], hours)
        pairs = pd.DataFrame({"w": wid, "m": rows["gpu_model"].astype(object)}).drop_duplicates()
        models = pairs.dropna().groupby("w")["m"].agg(lambda s: ", ".join(sorted(map(str, s))))
        facts["gpu_models"] = models.reindex(range(len(first))).to_numpy()
        facts["allocation"] = _joined(wid, rows["allocation"], len(first))
        return out.merge(facts, on=WORKLOAD, how="left")

    return snap.memo(("workloads", f), compute)


def _joined(wid: np.ndarray, modes: pd.Series, n: int) -> np.ndarray:
    """Per group id: its distinct allocation modes, ``+``-joined (contract section 7); NaN
    where it has none."""
    found = joined_per_group(wid, modes, n)
    return np.array([m if m else np.nan for m in found], dtype=object)


def _bucket_hours(snap: Snapshot, buckets: np.ndarray, bucket_s: int) -> np.ndarray:
    """Hours each bucket stands for: the last one only up to the end of the last sample."""
    last_end = (snap.marker.last_ts or 0) + snap.step_s
    hours = np.clip(np.minimum(buckets + bucket_s, last_end) - buckets, 1, None) / HOUR_S
    return np.asarray(hours, dtype="float64")


def _hour_sums(rows: pd.DataFrame, mask: np.ndarray, buckets: np.ndarray) -> dict[str, np.ndarray]:
    """Per hour of ``buckets``: GPU-hours with data, held by pods, and utilized (``mask``:
    the rows in scope)."""
    if len(buckets) == 0:
        return {name: np.zeros(0) for name in (c.CAPACITY_GPUS, c.ALLOCATED_GPUS, c.USED_GPUS)}
    at = (rows["ts"].to_numpy(dtype="int64")[mask] - int(buckets[0])) // HOUR_S
    data = rows[c.GPU_HOURS].to_numpy(dtype="float64")[mask]
    held = np.where(rows[c.ALLOCATED].to_numpy(dtype=bool)[mask], data, 0.0)
    used = held * rows[c.UTIL].to_numpy(dtype="float64")[mask]
    n = len(buckets)
    return {
        c.CAPACITY_GPUS: np.bincount(at, data, n),
        c.ALLOCATED_GPUS: np.bincount(at, held, n),
        c.USED_GPUS: np.bincount(at, used, n),
    }


def capacity_series(snap: Snapshot, f: Filters) -> pd.DataFrame:
    """Per hour: mean GPU units with data, held by pods and busy (util-weighted), and pending."""

    def compute() -> pd.DataFrame:
        rows = hourly_rows(snap, f)
        mask = filter_mask(rows, f, ROW_FILTERS)
        start, end = window_bounds(snap, f)
        buckets = np.arange(max(start, snap.span_start_ts), end, HOUR_S, dtype="int64")
        hours = _bucket_hours(snap, buckets, HOUR_S)
        out = pd.DataFrame({c.BUCKET_TS: buckets})
        for name, total in _hour_sums(rows, mask, buckets).items():
            out[name] = total / hours
        pods = snap.pods[filter_mask(snap.pods, f, (("cluster", "cluster"), *_POD_FILTERS))]
        pending = pending_series(pods, buckets)
        out[c.PENDING_GPUS] = pending[c.PENDING_GPUS].to_numpy()
        out[c.PENDING_PODS] = pending[c.PENDING_PODS].to_numpy()
        return out

    return snap.memo(("capacity_series", f), compute)


@dataclass(frozen=True)
class Options:
    clusters: list[str]
    teams: list[str]
    namespaces: list[str]
    models: list[str]
    allocations: list[str]


def _sorted_text(values: pd.Series) -> list[str]:
    return sorted({str(v) for v in pd.unique(values.dropna().to_numpy(dtype=object))})


def options(snap: Snapshot, f: Filters) -> Options:
    """Choices for the filter bar; namespaces narrow to the chosen cluster and team."""

    def compute() -> Options:
        pods = snap.pods[snap.pods["gpu_count"].gt(0)]
        narrowed = pods[filter_mask(pods, f, (("cluster", "cluster"), ("team", "team")))]
        return Options(
            clusters=_sorted_text(snap.units["cluster"]),
            teams=_sorted_text(pods["team"]),
            namespaces=_sorted_text(narrowed["namespace"]),
            models=_sorted_text(snap.units["gpu_model"]),
            allocations=_sorted_text(allocation_modes(snap.units, snap.pods)),
        )

    return snap.memo(("options", f.cluster, f.team), compute)
