"""What the GPU health page shows: the hourly health roll-up of the window, scoped to the
filters, through the health analytics (:mod:`gpuwatch.analytics.health`).

The page and a workload's efficiency read the hourly rows of the GPUs they can show, not the
fleet's (:func:`health_view`, :func:`workload_health_rows`); the GPUs in scope come from the
health roll-up summed per (unit, pod) in the store. Each result is memoized in the snapshot,
keyed by window and filters: new data is a new snapshot, so a cached result never outlives the
data it came from. Every figure is the analytics'; this module only picks rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.costing import drop_gpuless_pods
from gpuwatch.analytics.efficiency import efficiency_timeline, workload_efficiency
from gpuwatch.analytics.health import (
    drain_candidates,
    failing_since,
    gpu_health,
    health_timeline,
)
from gpuwatch.analytics.health_rows import GPU_KEY
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.views import equals, filter_mask, hourly_rows, window_bounds
from gpuwatch.app.views_gpu import WorkloadKey
from gpuwatch.app.window_health import health_sums_window, health_window
from gpuwatch.domain.frames import HEALTH_SUM_PROFILING, HEALTH_SUM_READINGS
from gpuwatch.domain.health import HealthPolicy
from gpuwatch.domain.pricing import PriceBook
from gpuwatch.store import repository

#: Above this many GPUs the timeline shows only those that were not always healthy, and the
#: page reads only the hourly rows of the GPUs that can be other than healthy.
MAX_TIMELINE_GPUS = 200
#: Filter → column of the health rows, for the facts of a GPU unit.
UNIT_FILTERS = (("cluster", "cluster"), ("model", "gpu_model"), ("allocation", "allocation"))
#: Filter → column, for the facts of the pod holding the unit.
POD_FILTERS = (("team", "team"), ("namespace", "namespace"))
#: Error counts, stored only where the counter rose (NULL otherwise).
ERROR_COUNTS = ("ecc_sbe", "ecc_dbe", "pcie_replays", "nvlink_errors", "row_remap_failure")


def gpu_keys(frame: pd.DataFrame) -> pd.MultiIndex:
    """Each row's physical GPU, (cluster, gpu_uuid)."""
    return pd.MultiIndex.from_arrays([frame[k].astype(str).to_numpy() for k in GPU_KEY])


def scope(frame: pd.DataFrame, f: Filters) -> pd.DataFrame:
    """The rows of the GPUs in scope: units of the cluster, GPU model and allocation mode; with
    a team or namespace, the physical GPUs its pods (those requesting GPUs) held in the window,
    with all their hours (a GPU's health is the GPU's, whoever held it)."""
    rows = frame[filter_mask(frame, f, UNIT_FILTERS)]
    if f.team is None and f.namespace is None:
        return rows
    pods = drop_gpuless_pods(rows, None)  # the exporter's own pod holds no GPU
    held = pods[filter_mask(pods, f, POD_FILTERS)]
    keep = gpu_keys(rows).isin(gpu_keys(held))
    return rows[np.asarray(keep, dtype=bool)]


@dataclass(frozen=True)
class Readings:
    """Which kinds of reading the rows in scope carry (none of them: the exporter sends none)."""

    rows: bool
    clock_events: bool
    profiling: bool
    error_counts: bool

    @classmethod
    def of(cls, rows: pd.DataFrame) -> Readings:
        def seconds(name: str) -> bool:
            values = rows[name].to_numpy(dtype="float64", na_value=np.nan)
            return bool(np.nansum(values) > 0)

        return cls(
            rows=len(rows) > 0,
            clock_events=seconds("clock_data_s"),
            profiling=any(seconds(name) for name in HEALTH_SUM_PROFILING),
            error_counts=any(bool(rows[name].notna().any()) for name in ERROR_COUNTS),
        )

    @classmethod
    def of_sums(cls, sums: pd.DataFrame, error_counts: bool) -> Readings:
        """The readings of the rows summed per (unit, pod) in ``sums``
        (:data:`~gpuwatch.domain.frames.HEALTH_SUM_COLUMNS`); the sums keep no error count."""

        def hours(name: str) -> bool:
            return bool(sums[name].to_numpy(dtype="float64").sum() > 0)

        profiling = [
            p for p, (_, data) in HEALTH_SUM_READINGS.items() if data in HEALTH_SUM_PROFILING
        ]
        return cls(
            rows=len(sums) > 0,
            clock_events=hours("clock_data_s"),
            profiling=any(hours(f"{prefix}_hours") for prefix in profiling),
            error_counts=error_counts,
        )


@dataclass(frozen=True)
class HealthView:
    """The page's frames: ``entries`` (:func:`~gpuwatch.analytics.health.gpu_health`),
    ``drain`` (its drain candidates), ``timeline`` (per hour and GPU), the physical GPUs in
    scope and which readings they have."""

    entries: pd.DataFrame
    drain: pd.DataFrame
    timeline: pd.DataFrame
    gpus: int
    readings: Readings


def health_view_of(
    rows: pd.DataFrame, price_book: PriceBook, policy: HealthPolicy, end_ts: int
) -> HealthView:
    """The analytics of the rows in scope."""
    entries = gpu_health(rows, price_book, policy, end_ts)
    return HealthView(
        entries=entries,
        drain=drain_candidates(entries),
        timeline=health_timeline(rows, policy),
        gpus=len(gpu_keys(rows).unique()),
        readings=Readings.of(rows),
    )


def health_view(snap: Snapshot, f: Filters, policy: HealthPolicy) -> HealthView:
    """The GPU health of the filters' window and scope: what :func:`health_view_of` gives for
    every row in scope, from the rows of fewer GPUs. The GPUs in scope and the readings they
    carry come from the health sums; the hourly rows read are those of every GPU in scope when
    the timeline shows them all (up to ``MAX_TIMELINE_GPUS``), else those of the GPUs with any
    evidence of not being healthy (the others have no entry and no run to draw)."""

    def compute() -> HealthView:
        start, end = window_bounds(snap, f)
        if snap.engine is None or snap.empty:
            return health_view_of(scope(health_window(snap, f.window), f), snap.price_book,
                                  policy, end)  # fmt: skip
        sums = scope(health_sums_window(snap, f.window), f)
        gpus = len(gpu_keys(sums).unique())
        if gpus <= MAX_TIMELINE_GPUS:
            units = np.unique(sums["gpu_id"].to_numpy(dtype="int64")).tolist()
        else:
            units = repository.units_with_health_events(snap.engine, start, end)
        rows = scope(repository.load_health_hourly(snap.engine, start, end, units, snap.pods), f)
        view = health_view_of(rows, snap.price_book, policy, end)
        readings = Readings.of_sums(sums, view.readings.error_counts)
        return replace(view, gpus=gpus, readings=readings)

    return snap.memo(("health_view", f, policy), compute, share=True)


def unit_ids(units: pd.DataFrame) -> dict[tuple[str, str], int]:
    """The store id of each physical GPU's first unit (its page), by (cluster, gpu_uuid)."""
    first = units.sort_values("gpu_id").drop_duplicates(list(GPU_KEY))
    return {
        (str(cluster), str(uuid)): int(gpu_id)
        for cluster, uuid, gpu_id in first[[*GPU_KEY, "gpu_id"]].itertuples(index=False)
    }


def workload_mask(frame: pd.DataFrame, key: WorkloadKey) -> np.ndarray:
    """Rows of the workload's pods (a pod without a workload is its own ``Pod``)."""
    pod = frame["pod"].astype(object)
    bare = frame["workload"].isna() & pod.notna()
    kind = frame["workload_kind"].astype(object).mask(bare, "Pod")
    name = frame["workload"].astype(object).mask(bare, pod)
    mask = equals(frame["cluster"], key.cluster) & equals(frame["namespace"], key.namespace)
    same = kind.eq(key.kind).fillna(False) & name.eq(key.name).fillna(False)
    return np.asarray(mask & same.to_numpy(dtype=bool), dtype=bool)


@dataclass(frozen=True)
class EfficiencyView:
    """A workload's efficiency over the window: per GPU model
    (:func:`~gpuwatch.analytics.efficiency.workload_efficiency`), per hour
    (:func:`~gpuwatch.analytics.efficiency.efficiency_timeline`), and the utilization signals
    of its hourly rows (``prof_gr_engine_active``, ``dev_gpu_util``)."""

    efficiency: pd.DataFrame
    timeline: pd.DataFrame
    signals: frozenset[str]


def efficiency_view_of(
    health: pd.DataFrame, price_book: PriceBook, key: WorkloadKey, signals: frozenset[str]
) -> EfficiencyView:
    """The analytics of the workload's rows of ``health`` (the window's rows); a GPU fails
    from its first failing event in the window, whoever held it then."""
    rows = health[workload_mask(health, key)]
    return EfficiencyView(
        efficiency=workload_efficiency(rows, price_book, failing_since(health)),
        timeline=efficiency_timeline(rows),
        signals=signals,
    )


def utilization_signals(snap: Snapshot, window: str, key: WorkloadKey) -> frozenset[str]:
    """The utilization signals of the workload's hourly rows in the window."""
    hourly = hourly_rows(snap, Filters(window=window))
    held = hourly[hourly[c.ALLOCATED].to_numpy(dtype=bool) & key.matches(hourly)]
    return frozenset(str(s) for s in held["util_signal"].dropna().unique())


def efficiency_view(snap: Snapshot, window: str, key: WorkloadKey) -> EfficiencyView:
    """The workload's efficiency in the window (other filters do not apply)."""

    def compute() -> EfficiencyView:
        signals = utilization_signals(snap, window, key)
        rows = workload_health_rows(snap, window, key)
        return efficiency_view_of(rows, snap.price_book, key, signals)

    return snap.memo(("efficiency_view", window, key), compute)


def workload_health_rows(snap: Snapshot, window: str, key: WorkloadKey) -> pd.DataFrame:
    """The window's health rows of the physical GPUs the workload's pods held, every unit and
    pod of them: what :func:`efficiency_view_of` needs (the workload's rows, and its GPUs'
    first failing events whoever held them then), not the whole fleet's."""
    if snap.engine is None or snap.empty:
        return health_window(snap, window)
    start, end = window_bounds(snap, Filters(window=window))
    pods = snap.pods
    pod_ids = pods.loc[workload_mask(pods, key), "pod_id"].to_numpy(dtype="int64").tolist()
    units = repository.units_held_by(snap.engine, start, end, pod_ids)
    return repository.load_health_hourly(snap.engine, start, end, units, snap.pods)
