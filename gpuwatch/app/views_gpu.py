"""What the GPU, node and workload pages show: pure functions of a snapshot and the filters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.claims import claim_checks
from gpuwatch.analytics.explain import WorkloadDistributions
from gpuwatch.analytics.explain import workload_distributions as distributions
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.rollup import gap_runs, measures
from gpuwatch.app.views import (
    WORKLOAD,
    cost_rows,
    coverage,
    equals,
    gpu_rows,
    hourly_rows,
    unit_ids,
    window_bounds,
    window_recommendations,
)
from gpuwatch.app.window_hourly import window_gaps
from gpuwatch.domain.frames import NO_POD
from gpuwatch.store.repository_detail import load_pod_detail


def unit_label(uuid: object, mig_profile: object, slot: object, replicas: object) -> str:
    """A short name for a GPU unit: its UUID's start, MIG profile and time-slice slot."""
    text = str(uuid)[:12] if isinstance(uuid, str) and uuid else "GPU"
    if isinstance(mig_profile, str) and mig_profile:
        text += f" MIG {mig_profile}"
    if isinstance(replicas, int | np.integer) and int(replicas) > 1:
        text += f" slot {slot}"
    return text


def scoped_units(snap: Snapshot, f: Filters, node: tuple[str, str] | None) -> pd.DataFrame:
    """The GPU units in the filters' scope (of one node), in node order, labelled (``unit``)."""
    units = snap.units[snap.units["gpu_id"].isin(unit_ids(snap, f))]
    if node is not None:
        units = units[units["cluster"].eq(node[0]) & units["node"].eq(node[1])]
    order = ["cluster", "node", "gpu_uuid", "mig_profile", "slot"]
    units = units.sort_values(order, kind="stable", na_position="first").reset_index(drop=True)
    labels = [
        unit_label(u, m, s, r)
        for u, m, s, r in units[["gpu_uuid", "mig_profile", "slot", "timeslice_replicas"]]
        .astype(object)
        .itertuples(index=False)
    ]
    return units.assign(unit=labels)


def gpu_table(
    snap: Snapshot, f: Filters, temperature_c: float, node: tuple[str, str] | None = None
) -> pd.DataFrame:
    """Per GPU unit in scope: utilization, allocation, health and coverage over the window."""

    def compute() -> pd.DataFrame:
        units = scoped_units(snap, f, node)
        rows = gpu_rows(snap, f)
        g = rows.groupby("gpu_id")
        stats = g[["samples", c.DATA_HOURS, "util_hours", "xid_hours"]].sum()
        peaks = ["temp_c_max", "power_w_max", "fb_used_ratio_max", "xid_last"]
        stats[peaks] = g[peaks].max()
        held = cost_rows(snap, f)
        stats["held_gpu_hours"] = held.groupby("gpu_id")[c.ALLOCATED_GPU_HOURS].sum()
        cov = coverage(snap, f).set_index("gpu_id")[c.COVERAGE_RATIO]
        out = units.merge(stats.reset_index(), on="gpu_id", how="left")
        hours = out[c.DATA_HOURS].fillna(0.0)
        out["util_pct"] = (100.0 * out["util_hours"] / hours).where(hours > 0)
        out["held_gpu_hours"] = out["held_gpu_hours"].fillna(0.0)
        out["memory_peak_pct"] = 100.0 * out["fb_used_ratio_max"]
        out["coverage_ratio"] = out["gpu_id"].map(cov)
        out["hot"] = out["temp_c_max"].ge(temperature_c).fillna(False)
        out["memory_full"] = out["memory_peak_pct"].ge(snap.policy.memory_full_pct).fillna(False)
        out["xid_hours"] = out["xid_hours"].fillna(0.0)
        return out

    return snap.memo(("gpu_table", f, node, temperature_c), compute)


def node_table(snap: Snapshot, f: Filters) -> pd.DataFrame:
    """Per node in scope: units, utilization, held hours and costs over the window."""

    def compute() -> pd.DataFrame:
        rows = cost_rows(snap, f)
        summed = rows.groupby(["cluster", "node"], observed=True)[
            [
                c.GPU_HOURS,
                c.ALLOCATED_GPU_HOURS,
                c.USED_GPU_HOURS,
                c.IDLE_COST_USD,
                c.UNALLOCATED_COST_USD,
                c.ALLOCATED_COST_USD,
            ]
        ].sum()
        summed = summed.reset_index().astype({"cluster": object, "node": object})
        units = snap.units[snap.units["gpu_id"].isin(unit_ids(snap, f))]
        counts = units.groupby(["cluster", "node"]).size().rename("gpu_units").reset_index()
        nodes = snap.nodes.astype({"cluster": object, "node": object})
        out = counts.astype({"cluster": object, "node": object}).merge(
            nodes, on=["cluster", "node"], how="left"
        )
        out = out.merge(summed, on=["cluster", "node"], how="left").fillna(
            {c.GPU_HOURS: 0.0, c.ALLOCATED_GPU_HOURS: 0.0, c.USED_GPU_HOURS: 0.0}
        )
        hours = out[c.GPU_HOURS]
        out["allocated_pct"] = (100.0 * out[c.ALLOCATED_GPU_HOURS] / hours).where(hours > 0)
        alloc = out[c.ALLOCATED_GPU_HOURS]
        out[c.EFFICIENCY_PCT] = (100.0 * out[c.USED_GPU_HOURS] / alloc).where(alloc > 0)
        return out.sort_values(["cluster", "node"], kind="stable").reset_index(drop=True)

    return snap.memo(("node_table", f), compute)


class HeldBy(Protocol):
    """Who held GPUs (a workload, a pod): hashable, and picks its rows of a frame."""

    def matches(self, frame: pd.DataFrame) -> np.ndarray: ...


@dataclass(frozen=True)
class WorkloadKey:
    cluster: str
    namespace: str
    kind: str
    name: str

    def matches(self, frame: pd.DataFrame) -> np.ndarray:
        values = (self.cluster, self.namespace, self.kind, self.name)
        mask = np.ones(len(frame), dtype=bool)
        for column, value in zip(WORKLOAD, values, strict=True):
            mask &= equals(frame[column], value)
        return mask


def workload_rows(snap: Snapshot, f: Filters, key: HeldBy) -> pd.DataFrame:
    """The workload's hourly rows in the window with their sums (other filters do not apply).

    Columns: ``bucket_ts`` (the hour), ``gpu_id``, ``pod_id``, ``gpu_model``,
    ``fb_used_mib_max`` (the hour's peak), ``fb_total_mib`` (the unit's memory) and the cost
    model's sums (:data:`~gpuwatch.app.rollup.COST_SUMS`).
    """

    def compute() -> pd.DataFrame:
        rows = hourly_rows(snap, Filters(window=f.window))
        rows = rows[rows[c.ALLOCATED].to_numpy(dtype=bool) & key.matches(rows)]
        values = measures(rows, snap.policy.idle_threshold_ratio)
        out = pd.DataFrame(
            {
                "bucket_ts": rows["ts"].to_numpy(dtype="int64"),
                "gpu_id": rows["gpu_id"].to_numpy(dtype="int64"),
                "pod_id": rows["pod_id"].to_numpy(dtype="int64"),
                "gpu_model": rows["gpu_model"].astype(object).to_numpy(),
                "fb_used_mib_max": rows["fb_used_mib"].to_numpy(dtype="float64", na_value=np.nan),
                "fb_total_mib": rows["fb_total_mib"].to_numpy(dtype="float64", na_value=np.nan),
            }
        )
        for name, column in values.items():
            out[name] = column
        return out

    return snap.memo(("workload_rows", f.window, key), compute)


def workload_series(snap: Snapshot, f: Filters, key: HeldBy) -> pd.DataFrame:
    """Per hour and GPU unit the workload held: its utilization % and peak memory (MiB)."""
    rows = workload_rows(snap, f, key)
    g = rows.groupby(["bucket_ts", "gpu_id"])
    out = g[[c.ALLOCATED_GPU_HOURS, c.USED_GPU_HOURS]].sum()
    out["fb_used_mib_max"] = g["fb_used_mib_max"].max()
    alloc = out[c.ALLOCATED_GPU_HOURS]
    out["util_pct"] = (100.0 * out[c.USED_GPU_HOURS] / alloc).where(alloc > 0)
    out = out.reset_index()
    labels = scoped_units(snap, Filters(window=f.window), None).set_index("gpu_id")
    out["unit"] = out["gpu_id"].map(labels["node"].astype(str) + " · " + labels["unit"])
    return out


def workload_hourly(snap: Snapshot, f: Filters, key: WorkloadKey) -> pd.DataFrame:
    """Per hour and GPU model: GPUs the workload held (allocated GPU-hours in the hour) and
    kept busy (used GPU-hours in the hour), as ``bucket_ts, gpu_model, held_gpus, busy_gpus``."""
    rows = workload_rows(snap, f, key)
    g = rows.groupby(["bucket_ts", "gpu_model"], dropna=False, sort=True)
    out = g[[c.ALLOCATED_GPU_HOURS, c.USED_GPU_HOURS]].sum().reset_index()
    names = {c.ALLOCATED_GPU_HOURS: "held_gpus", c.USED_GPU_HOURS: "busy_gpus"}
    return out.rename(columns=names)


def workload_gpu_memory_mib(snap: Snapshot, f: Filters, key: WorkloadKey) -> float:
    """The memory of the GPUs (or MIG instances) the workload held, MiB: the median of the
    units' reported totals over its hourly rows, else of their inventory totals."""
    rows = workload_rows(snap, f, key)
    totals = rows["fb_total_mib"]
    if totals.isna().all():
        inventory = snap.units.drop_duplicates("gpu_id").set_index("gpu_id")["memory_total_mib"]
        totals = rows["gpu_id"].map(inventory).astype("float64")
    return float(totals.median()) if totals.notna().any() else float("nan")


def workload_distributions(
    snap: Snapshot, f: Filters, key: WorkloadKey
) -> WorkloadDistributions | None:
    """The utilization and memory distributions of the workload's samples in the window, from
    its pods' stored detail; ``None`` without a store or GPU hours to read."""

    def compute() -> WorkloadDistributions | None:
        rows = workload_rows(snap, f, key)
        if snap.engine is None or rows.empty:
            return None
        hours = rows["bucket_ts"].to_numpy(dtype="int64")
        pods = rows["pod_id"].to_numpy(dtype="int64")
        detail = load_pod_detail(snap.engine, hours.tolist(), pods.tolist())
        policy = snap.policy
        return distributions(detail, pods, policy.util_quantile, policy.memory_quantile)

    return snap.memo(("workload_distributions", f.window, key), compute)


def workload_gpus(snap: Snapshot, f: Filters, key: HeldBy) -> pd.DataFrame:
    """The GPU units the workload held in the window, with its hours and use of each."""
    rows = workload_rows(snap, f, key)
    g = rows.groupby("gpu_id")
    out = g[[c.ALLOCATED_GPU_HOURS, c.USED_GPU_HOURS, c.IDLE_GPU_HOURS, c.ALLOCATED_COST_USD]].sum()
    out["fb_used_mib_max"] = g["fb_used_mib_max"].max()
    out["last_bucket_ts"] = g["bucket_ts"].max()
    out = out.reset_index()
    alloc = out[c.ALLOCATED_GPU_HOURS]
    out["util_pct"] = (100.0 * out[c.USED_GPU_HOURS] / alloc).where(alloc > 0)
    units = scoped_units(snap, Filters(window=f.window), None)
    out = out.merge(units, on="gpu_id", how="left")
    return out.sort_values(["node", "unit"], kind="stable").reset_index(drop=True)


def workload_pods(snap: Snapshot, key: WorkloadKey) -> pd.DataFrame:
    """The workload's pods as last seen in the API (newest first)."""
    pods = snap.pods[key.matches(snap.pods)]
    return pods.sort_values("created_ts", ascending=False, kind="stable").reset_index(drop=True)


def workload_recommendations(snap: Snapshot, f: Filters, key: WorkloadKey) -> pd.DataFrame:
    recs = window_recommendations(snap, f.window)
    return recs[key.matches(recs)].reset_index(drop=True)


def health_by_node(snap: Snapshot, f: Filters) -> pd.DataFrame:
    """Per node: units, coverage, utilization signal, units never attributed, gaps, last sample."""

    def compute() -> pd.DataFrame:
        units = snap.units[snap.units["gpu_id"].isin(unit_ids(snap, f))]
        cov = coverage(snap, f)
        rows = gpu_rows(snap, f)
        rows = rows[rows["samples"] > 0]
        per_unit = rows.groupby("gpu_id")[["prof_samples", "dev_samples"]].sum()
        last_seen = units.set_index("gpu_id")["last_seen_ts"]
        per_unit["last_ts"] = last_seen.reindex(per_unit.index).to_numpy()
        held = cost_rows(snap, f)
        attributed = set(held.loc[held["pod_id"] != NO_POD, "gpu_id"].unique().tolist())
        gaps = gap_runs(window_gaps(snap, *window_bounds(snap, f)))
        frame = units[["cluster", "node", "gpu_id"]].merge(per_unit.reset_index(), how="left")
        frame = frame.merge(cov[["gpu_id", c.OBSERVED_HOURS, c.DATA_HOURS]], how="left")
        frame["unattributed"] = ~frame["gpu_id"].isin(attributed)
        by_gap = gaps.groupby("gpu_id")["gap_s"].agg(["count", "sum", "max"])
        frame = frame.merge(by_gap.reset_index(), on="gpu_id", how="left")
        return _health_per_node(frame)

    return snap.memo(("health_by_node", f), compute)


def _signal(prof: float, dev: float) -> str:
    if prof > 0 and dev > 0:
        return "mixed"
    if prof > 0:
        return "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    return "DCGM_FI_DEV_GPU_UTIL / 100" if dev > 0 else "none"


def _health_per_node(frame: pd.DataFrame) -> pd.DataFrame:
    grouped = frame.groupby(["cluster", "node"], dropna=False, sort=True)
    out = grouped.agg(
        gpu_units=("gpu_id", "size"),
        prof=("prof_samples", "sum"),
        dev=("dev_samples", "sum"),
        observed=(c.OBSERVED_HOURS, "sum"),
        data=(c.DATA_HOURS, "sum"),
        unattributed=("unattributed", "sum"),
        gaps=("count", "sum"),
        gap_s=("sum", "sum"),
        longest_gap_s=("max", "max"),
        last_ts=("last_ts", "max"),
    ).reset_index()
    out[c.COVERAGE_RATIO] = (out["data"] / out["observed"]).where(out["observed"] > 0)
    out["util_signal"] = [_signal(p, d) for p, d in zip(out["prof"], out["dev"], strict=True)]
    return out.drop(columns=["prof", "dev", "data", "observed"])


def claim_problems(snap: Snapshot, f: Filters) -> pd.DataFrame:
    """Claimed DRA devices of the cluster(s) in scope whose GPU time is not attributed to the
    claim (:func:`~gpuwatch.analytics.claims.claim_checks`) over the window."""

    def compute() -> pd.DataFrame:
        rows = cost_rows(snap, f)
        held_ids = rows.loc[rows["pod_id"] != NO_POD, "gpu_id"].unique()
        held = snap.units[snap.units["gpu_id"].isin(held_ids)][["cluster", "gpu_uuid"]]
        held_uuids = frozenset((str(a), str(b)) for a, b in held.astype(object).values)
        devices = snap.dra
        if f.cluster is not None and len(devices):
            devices = devices[devices["cluster"].astype(object).eq(f.cluster)]
        return claim_checks(devices, snap.units, held_uuids)

    return snap.memo(("claim_problems", f), compute)
