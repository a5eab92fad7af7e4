"""Placement: how many nodes a multi-GPU workload's GPUs were spread over, and how many it
needed (docs/cost-model.md#scheduling, docs/recommendations.md, ``consolidate_placement``).

Pure: sample rows, the nodes frame and the health roll-up in, one :class:`PlacementMeasures`
per workload key out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuwatch.analytics.efficiency import EFFICIENCY_KEYS, key_of
from gpuwatch.analytics.health_sums import TRAFFIC
from gpuwatch.domain.durations import HOUR_S

#: Workload kinds whose pods run as one job (their GPUs talk to each other); pods of any other
#: kind count only when they belong to a gang (the pods frame's ``gang_kind``).
JOB_KINDS = frozenset({"Job", "CronJob", "JobSet", "Pod"})
#: The quantile over sample times of the number of nodes holding a workload's GPUs.
NODES_USED_QUANTILE = 0.95


@dataclass(frozen=True)
class PlacementMeasures:
    """A workload's spread over nodes (whole GPUs only)."""

    #: Most whole GPUs its pods held at one sample time.
    gpus: int
    #: p95 over its sample times of the distinct nodes holding its GPUs.
    nodes_used_p95: float
    #: The most GPUs of its model on one node of its cluster (nodes frame ``gpu_count``).
    gpus_per_node: int
    #: GPU-hours at sample times when its GPUs were on more nodes than they needed.
    spread_gpu_hours: float
    #: Mean PCIe and NVLink bytes per second of its GPUs (health roll-up), NaN without readings.
    pcie_bytes_per_s: float = math.nan
    nvlink_bytes_per_s: float = math.nan

    @property
    def nodes_needed(self) -> int:
        """⌈GPUs ÷ GPUs per node⌉."""
        return math.ceil(self.gpus / self.gpus_per_node)


def _node_sizes(nodes: pd.DataFrame) -> dict[tuple[str, str], int]:
    known = nodes.dropna(subset=["gpu_model"])
    known = known[known["gpu_count"] > 0]
    sizes = known.groupby(["cluster", "gpu_model"], as_index=False)["gpu_count"].max()
    return {(str(c), str(m)): int(n) for c, m, n in sizes.itertuples(index=False, name=None)}


_KEY_COLUMNS = ["cluster", "namespace", "workload_kind", "workload"]


def _key_index(frame: pd.DataFrame) -> pd.MultiIndex:
    """The workload keys of ``frame``'s rows as text (<NA> as ""), as :func:`key_of` gives."""
    text = frame[_KEY_COLUMNS].astype(object).astype("string").fillna("")
    return pd.MultiIndex.from_frame(text)


def _in_keys(rows: pd.DataFrame, keys: pd.MultiIndex) -> np.ndarray:
    """Whether each row's workload key is in ``keys``, looked up once per distinct key."""
    group = rows.groupby(_KEY_COLUMNS, dropna=False, observed=True, sort=False).ngroup()
    codes = group.to_numpy(dtype="int64")
    _, first = np.unique(codes, return_index=True)
    found: np.ndarray = _key_index(rows.iloc[first]).isin(keys)
    return found[codes]


def _whole_gpu_rows(samples: pd.DataFrame, pods: pd.DataFrame | None) -> pd.DataFrame:
    rows = samples[
        samples["pod_id"].notna()
        & samples["mig_profile"].isna()
        & samples["timeslice_replicas"].fillna(1).eq(1)
        & samples["node"].notna()
        & samples["node"].ne("")
    ]
    keep = np.array(rows["workload_kind"].isin(JOB_KINDS), dtype=bool)
    if pods is not None and not pods.empty and "gang_kind" in pods and len(rows):
        ganged = pods[pods["gang_kind"].notna()]
        keep = keep | _in_keys(rows, _key_index(ganged).unique())
    return pd.DataFrame(rows[keep])


def _traffic(sums: pd.DataFrame | None) -> dict[tuple[str, ...], tuple[float, float]]:
    """Mean PCIe and NVLink bytes per second of each workload's held hours (the mean of the
    hourly means that exist; NaN without one), from the health sums."""
    if sums is None or sums.empty:
        return {}
    held = sums[sums["pod_id"].notna()]
    names = [f"{name}_{part}" for name in TRAFFIC for part in ("sum", "hours")]
    totals = held.groupby(list(EFFICIENCY_KEYS), dropna=False, as_index=False)[names].sum()
    width = len(EFFICIENCY_KEYS)
    out = {}
    for row in totals.itertuples(index=False, name=None):
        pcie_sum, pcie_hours, nvlink_sum, nvlink_hours = (float(v) for v in row[width:])
        out[key_of(row[:width])] = (
            pcie_sum / pcie_hours if pcie_hours > 0 else math.nan,
            nvlink_sum / nvlink_hours if nvlink_hours > 0 else math.nan,
        )
    return out


def _per_instant(rows: pd.DataFrame) -> pd.DataFrame:
    """Per workload key and sample time: GPUs held, nodes holding them, GPU-hours."""
    rows = rows.assign(_gpu_hours=rows["step_s"] / HOUR_S)
    per = rows.groupby([*EFFICIENCY_KEYS, "ts"], dropna=False).agg(
        gpus=("gpu_id", "nunique"), nodes=("node", "nunique"), gpu_hours=("_gpu_hours", "sum")
    )
    return per.reset_index()


def workload_placement(
    samples: pd.DataFrame,
    nodes: pd.DataFrame | None,
    pods: pd.DataFrame | None = None,
    health_sums: pd.DataFrame | None = None,
) -> dict[tuple[str, ...], PlacementMeasures]:
    """:class:`PlacementMeasures` by workload key (:func:`key_of` of :data:`EFFICIENCY_KEYS`)
    of the jobs and gangs holding whole GPUs on nodes whose size the nodes frame gives."""
    if nodes is None or nodes.empty or samples.empty:
        return {}
    sizes = _node_sizes(nodes)
    rows = _whole_gpu_rows(samples, pods)
    if rows.empty:
        return {}
    traffic = _traffic(health_sums)
    per = _per_instant(rows)
    gid = per.groupby(list(EFFICIENCY_KEYS), dropna=False, sort=True).ngroup().to_numpy()
    order = np.argsort(gid, kind="stable")  # each key's rows together, in time order
    gid = gid[order]
    starts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
    ends = np.r_[starts[1:], len(per)]
    gpus, used = per["gpus"].to_numpy()[order], per["nodes"].to_numpy()[order]
    hours = per["gpu_hours"].to_numpy()[order]
    firsts = per[list(EFFICIENCY_KEYS)].iloc[order[starts]].itertuples(index=False, name=None)
    out: dict[tuple[str, ...], PlacementMeasures] = {}
    for lo, hi, key in zip(starts, ends, firsts, strict=True):
        k = key_of(tuple(key))
        size = sizes.get((k[0], k[4]))
        if size is None:
            continue
        spread = used[lo:hi] > np.ceil(gpus[lo:hi] / size)
        pcie, nvlink = traffic.get(k, (math.nan, math.nan))
        out[k] = PlacementMeasures(
            gpus=int(gpus[lo:hi].max()),
            nodes_used_p95=float(np.quantile(used[lo:hi], NODES_USED_QUANTILE)),
            gpus_per_node=size,
            spread_gpu_hours=float(hours[lo:hi][spread].sum()),
            pcie_bytes_per_s=pcie,
            nvlink_bytes_per_s=nvlink,
        )
    return out
