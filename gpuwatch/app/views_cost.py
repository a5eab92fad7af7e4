"""Cost over time, grouped by team, namespace, workload, GPU model, node pool, cluster or a pod
label: the window's costed hourly roll-ups per hour, or the store's cost rows per UTC day
(:mod:`gpuwatch.analytics.timeline` stacks them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.summary import sample_measures
from gpuwatch.analytics.timeline import COST_USD, UNALLOCATED, stack
from gpuwatch.app.components import records_of
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.links import workload_href
from gpuwatch.app.views import ROW_FILTERS, cost_rows, filter_mask, hourly_rows, window_days
from gpuwatch.domain.durations import DAY_S, HOUR_S
from gpuwatch.domain.frames import NO_POD
from gpuwatch.store.repository_labels import load_node_pools, load_pod_label

#: ``by`` → what the selector calls it. Pod labels add ``label:<key>`` (dashboard.pod_labels).
AGGREGATES: dict[str, str] = {
    "team": "Team",
    "namespace": "Namespace",
    "workload": "Workload",
    "gpu_model": "GPU model",
    "node_pool": "Node pool",
    "cluster": "Cluster",
}
LABEL_PREFIX = "label:"
#: Windows up to this many days are drawn hour by hour; longer ones day by day.
HOURLY_UP_TO_DAYS = 3
NO_POOL = "(no pool label)"


def aggregate_choices(pod_labels: list[str]) -> dict[str, str]:
    """Every ``by`` the page offers, with its name."""
    return AGGREGATES | {f"{LABEL_PREFIX}{k}": f"Pod label {k}" for k in pod_labels}


@dataclass(frozen=True)
class CostTimeline:
    """The stacked series (:func:`~gpuwatch.analytics.timeline.stack`), each group's link
    (``None``: nowhere to go), and the seconds each bucket spans."""

    series: pd.DataFrame
    hrefs: dict[str, str | None]
    bucket_s: int


def bucket_s(snap: Snapshot, f: Filters) -> int:
    return HOUR_S if window_days(snap, f) <= HOURLY_UP_TO_DAYS else DAY_S


def _qualified(name: pd.Series, cluster: pd.Series) -> pd.Series:
    """``name``, with `` · cluster`` where the rows span several clusters."""
    if cluster.astype(object).nunique() <= 1:
        return name.astype(object).astype(str)
    return name.astype(object).astype(str) + " · " + cluster.astype(object).astype(str)


def _labels(snap: Snapshot, rows: pd.DataFrame, by: str, pools: list[str]) -> pd.Series:
    """Each row's group under ``by`` (held rows only are named by pod-side keys)."""
    if by in ("team", "gpu_model", "cluster"):
        return rows[by].astype(object).astype(str)
    if by == "namespace":
        return _qualified(rows["namespace"], rows["cluster"])
    if by == "workload":
        name = rows["namespace"].astype(object).astype(str) + "/" + rows["workload"].astype(str)
        return _qualified(name, rows["cluster"])
    if by == "node_pool":
        table = snap.memo(("node_pools", tuple(pools)), lambda: _node_pools(snap, pools), pin=True)
        keys = pd.MultiIndex.from_frame(rows[["cluster", "node"]].astype(object))
        return pd.Series(table.reindex(keys).to_numpy(), index=rows.index).fillna(NO_POOL)
    key = by.removeprefix(LABEL_PREFIX)
    values = snap.memo(("pod_label", key), lambda: _pod_label(snap, key), pin=True)
    found = rows["pod_id"].map(values)
    return found.where(found.notna(), f"(no {key})").astype(object)


def _node_pools(snap: Snapshot, keys: list[str]) -> pd.Series:
    if snap.engine is None:
        return pd.Series(dtype=object)
    table = load_node_pools(snap.engine, keys)
    return table.set_index(["cluster", "node"])["node_pool"]


def _pod_label(snap: Snapshot, key: str) -> pd.Series:
    return pd.Series(dtype=object) if snap.engine is None else load_pod_label(snap.engine, key)


def _href(f: Filters, by: str, row: Mapping[str, Any]) -> str | None:
    if by == "team":
        return f.with_(team=row["team"]).href("/teams")
    if by == "namespace":
        return f.with_(cluster=row["cluster"], namespace=row["namespace"]).href("/workloads")
    if by == "workload":
        return workload_href(f, row)
    if by == "gpu_model":
        return f.with_(model=row["gpu_model"]).href("/gpus")
    if by == "cluster":
        return f.with_(cluster=row["cluster"]).href("/")
    return None


def _costed(snap: Snapshot, f: Filters, size: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The window's rows in the filters' scope, each row's bucket and its cost (allocated plus
    unallocated): per hour from the hourly rows, or per UTC day from the store's cost rows
    (the first and last day hold the part of them in the window)."""
    if size == HOUR_S:
        rows = hourly_rows(snap, f)
        rows = rows[filter_mask(rows, f, ROW_FILTERS)]
        m = sample_measures(rows, snap.policy.idle_threshold_ratio)
        buckets = rows["ts"].to_numpy(dtype="int64")
        return rows, buckets, m[c.ALLOCATED_COST_USD] + m[c.UNALLOCATED_COST_USD]
    rows = cost_rows(snap, f)
    cost = rows[c.ALLOCATED_COST_USD].to_numpy() + rows[c.UNALLOCATED_COST_USD].to_numpy()
    return rows, rows["day_ts"].to_numpy(dtype="int64"), cost


def cost_timeline(snap: Snapshot, f: Filters, by: str, pools: list[str]) -> CostTimeline:
    """The window's cost per bucket and group of ``by``, in the filters' scope."""

    def compute() -> CostTimeline:
        size = bucket_s(snap, f)
        rows, buckets, cost = _costed(snap, f, size)
        held = rows["pod_id"].to_numpy() != NO_POD
        names = _labels(snap, rows, by, pools).where(held, UNALLOCATED)
        costs = pd.DataFrame(
            {"bucket_ts": buckets, "group": names.to_numpy(dtype=object), COST_USD: cost}
        )
        firsts = rows.assign(group=names.to_numpy(dtype=object)).drop_duplicates("group")
        hrefs = {str(r["group"]): _href(f, by, r) for r in records_of(firsts)}
        hrefs[UNALLOCATED] = None
        return CostTimeline(stack(costs), hrefs, size)

    return snap.memo(("cost_timeline", f, by, tuple(pools)), compute)
