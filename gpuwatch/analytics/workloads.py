"""Per-workload statistics behind the weekly report and the recommendations.

A workload is (cluster, namespace, workload kind, workload, GPU model). Populations follow the
contract: GPU counts are per pod; the busy-GPU count is taken per pod at each sample time and
its quantile over time is the pod's ``k`` (the workload's ``k`` is its pods' max); utilization and
memory quantiles pool every allocated sample of the workload. Quantiles and counts come from
:mod:`gpuwatch.analytics.measures`, the same at every storage resolution.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.attribution import NODE_ATTRIBUTION
from gpuwatch.analytics.grouping import group_ids, joined_per_group, top_label
from gpuwatch.analytics.measures import (
    MEASURE_COLUMNS,
    LoadDetail,
    PodDetail,
    detail_from_rows,
    detail_from_store,
    merge_loads,
    merge_pods,
    workload_measures,
)
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.analytics.summary import as_text, idle_fraction
from gpuwatch.domain.mig import parse_profile
from gpuwatch.domain.pricing import PriceBook, is_spot
from gpuwatch.domain.series import StoredDetail

KEYS = list(c.WORKLOAD_KEYS)
POD_KEYS = [*KEYS, "pod"]  # a pod, within one workload row (one GPU model)


def _linear_quantile(values: pd.Series, ids: np.ndarray, n: int, q: float) -> np.ndarray:
    frame = pd.DataFrame({"g": ids, "v": values.to_numpy(dtype="float64", na_value=np.nan)})
    quantiles = frame.dropna().groupby("g")["v"].quantile(q)
    return quantiles.reindex(range(n)).to_numpy(dtype="float64")


def _memory_total(
    rows: pd.DataFrame, gpus: pd.DataFrame | None, price_book: PriceBook
) -> pd.Series:
    """Memory of each sample's unit, MiB: reported total, else inventory, profile, model size."""
    total = rows["fb_total_mib"].astype("float64").copy()
    if gpus is not None and len(gpus):
        inventory = gpus.drop_duplicates("gpu_id").set_index("gpu_id")["memory_total_mib"]
        total = total.fillna(rows["gpu_id"].map(inventory).astype("float64"))
    missing = total.isna()
    if bool(missing.any()):
        facts = rows.loc[missing, ["gpu_model", "mig_profile"]].astype(object)
        nominal = [_nominal_memory(m, p, price_book) for m, p in facts.itertuples(False)]
        total = total.mask(missing, pd.Series(nominal, index=facts.index, dtype="float64"))
    return total


def _nominal_memory(model: object, profile: object, price_book: PriceBook) -> float:
    if isinstance(profile, str) and profile:
        return float(parse_profile(profile)[1] * 1000)
    entry = price_book.lookup(model if isinstance(model, str) else None)
    return float(entry.memory_mib) if entry and entry.memory_mib else math.nan


def _top_share(rows: pd.DataFrame, wid: np.ndarray, n: int, column: str) -> np.ndarray:
    """Per workload, the value of ``column`` with the most GPU-hours (ties: smallest value)."""
    hours = rows[c.GPU_HOURS].to_numpy(dtype="float64")
    return np.array(top_label(wid, n, rows[column], hours), dtype=object)


def _reindexed(values: pd.Series, n: int) -> np.ndarray:
    return values.reindex(range(n)).to_numpy()


def _add_sums(out: pd.DataFrame, rows: pd.DataFrame, wid: np.ndarray, threshold: float) -> None:
    n = len(out)
    hours = rows[c.GPU_HOURS].to_numpy(dtype="float64")
    idle = hours * idle_fraction(rows, threshold)
    price = rows[c.USD_PER_HOUR].to_numpy(dtype="float64")
    out["allocated_gpu_hours"] = np.bincount(wid, hours, n)
    out["idle_gpu_hours"] = np.bincount(wid, idle, n)
    out["allocated_cost_usd"] = np.bincount(wid, hours * price, n)


def _detail(
    rows: pd.DataFrame,
    out: pd.DataFrame,
    wid: np.ndarray,
    threshold: float,
    stored: StoredDetail | None,
) -> tuple[PodDetail, LoadDetail]:
    """The workloads' detail: stored where the roll-ups have it, else from the rows."""
    pid, _ = group_ids(rows[POD_KEYS])
    if stored is None:
        return detail_from_rows(rows, wid, pid, threshold)
    keys = {tuple(map(str, k)): i for i, k in enumerate(out[KEYS].itertuples(index=False))}
    pods = rows[["pod_id", "pod_gpu_count"]].assign(wid=wid).dropna(subset=["pod_id"])
    pods = pods.drop_duplicates("pod_id")
    pod_wid = dict(zip(pods["pod_id"].astype(int), pods["wid"].astype(int), strict=True))
    asks = pods["pod_gpu_count"].astype("float64").fillna(0.0)
    pod_requested = dict(zip(pods["pod_id"].astype(int), asks, strict=True))
    from_store = detail_from_store(stored, keys, pod_wid, pod_requested)
    covered = np.zeros(len(out), dtype=bool)
    covered[from_store[1].wid] = True
    rest = ~covered[wid]
    from_rows = detail_from_rows(rows[rest], wid[rest], pid[rest], threshold)
    return merge_pods(from_store[0], from_rows[0]), merge_loads(from_store[1], from_rows[1])


def _add_measures(
    out: pd.DataFrame,
    rows: pd.DataFrame,
    wid: np.ndarray,
    policy: AnalyticsPolicy,
    stored: StoredDetail | None,
) -> None:
    pods, loads = _detail(rows, out, wid, policy.idle_threshold_ratio, stored)
    measures = workload_measures(pods, loads, len(out), policy)
    for name in MEASURE_COLUMNS:
        out[name] = measures[name].to_numpy()


def _add_facts(out: pd.DataFrame, rows: pd.DataFrame, wid: np.ndarray, first: np.ndarray) -> None:
    n = len(out)
    whole = rows["mig_profile"].isna().to_numpy() & rows["timeslice_replicas"].le(1).to_numpy()
    out["whole_gpus"] = np.bincount(wid, ~whole, n) == 0
    node_level = rows["attribution"].astype(object).eq(NODE_ATTRIBUTION).to_numpy()
    out["node_attribution"] = np.bincount(wid, node_level, n) > 0
    capacity = _top_share(rows, wid, n, "capacity_type")
    out["spot"] = [is_spot(v if isinstance(v, str) else None) for v in capacity]
    team_id, team_first = group_ids(rows[KEYS[:-1]])
    teams = _top_share(rows, team_id, len(team_first), "team")
    out["team"] = pd.array(teams[team_id[first]], dtype="string")
    placed = pd.DataFrame({"wid": wid, "node": rows["node"].astype(object)}).drop_duplicates()
    placed = placed.dropna().sort_values(["wid", "node"])
    nodes: dict[int, tuple[str, ...]] = {}
    for w, node in placed.itertuples(index=False):
        nodes[int(w)] = (*nodes.get(int(w), ()), str(node))
    out["nodes"] = [nodes.get(i, ()) for i in range(n)]
    out["mig_profile"] = _top_share(rows, wid, n, "mig_profile")
    out["allocation"] = _modes(rows, wid, n)


def _modes(rows: pd.DataFrame, wid: np.ndarray, n: int) -> list[str]:
    """Per workload: how its GPUs were held, modes ``+``-joined (contract section 7)."""
    return joined_per_group(wid, rows["allocation"], n)


def workload_stats(
    costed: pd.DataFrame,
    policy: AnalyticsPolicy,
    price_book: PriceBook,
    gpus: pd.DataFrame | None = None,
    detail: StoredDetail | None = None,
) -> pd.DataFrame:
    """One row per workload of the allocated samples with data: keys, then STAT_COLUMNS.

    ``detail``: the stored detail of the window when ``costed`` holds hourly roll-ups; the
    quantiles and counts are then read from it (rows it lacks fall back to the roll-ups).
    """
    rows = costed[costed[c.ALLOCATED] & (costed[c.GPU_HOURS] > 0)].reset_index(drop=True)
    if rows.empty:
        return pd.DataFrame(columns=[*KEYS, *STAT_COLUMNS])
    wid, first = group_ids(rows[KEYS])
    out = as_text(rows.loc[first, KEYS].reset_index(drop=True), KEYS)
    _add_sums(out, rows, wid, policy.idle_threshold_ratio)
    memory = _memory_total(rows, gpus, price_book)
    out["gpu_memory_mib"] = _linear_quantile(memory, wid, len(out), 0.5)
    _add_measures(out, rows, wid, policy, detail if c.SAMPLES in rows.columns else None)
    _add_facts(out, rows, wid, first)
    return out[[*KEYS, *STAT_COLUMNS]]


STAT_COLUMNS = (
    "allocated_gpu_hours",
    "idle_gpu_hours",
    "allocated_cost_usd",
    *MEASURE_COLUMNS,
    "gpu_memory_mib",
    "whole_gpus",
    "node_attribution",
    "spot",
    "team",
    "nodes",
    "mig_profile",
    "allocation",
)
