"""Per-workload statistics behind the weekly report and the recommendations.

A workload is (cluster, namespace, workload kind, workload, GPU model). Populations follow the
contract: GPU counts are per pod; the busy-GPU count is taken per pod at each sample time and
its quantile over time is the pod's ``k`` (the workload's ``k`` is its pods' max); utilization and
memory quantiles pool every allocated sample of the workload.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.attribution import NODE_ATTRIBUTION
from gpuwatch.analytics.grouping import group_ids, pair_ids, top_label
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.analytics.summary import as_text, idle_fraction
from gpuwatch.domain.mig import parse_profile
from gpuwatch.domain.pricing import PriceBook, is_spot

KEYS = list(c.WORKLOAD_KEYS)
POD_KEYS = [*KEYS, "pod"]  # a pod, within one workload row (one GPU model)


def discrete_quantile(
    values: np.ndarray, groups: np.ndarray, n_groups: int, q: float
) -> np.ndarray:
    """Per group, the smallest observed value with at least ``q`` of the values at or below it."""
    order = np.lexsort((values, groups))
    counts = np.bincount(groups, minlength=n_groups)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pos = np.maximum(np.ceil(counts * q).astype("int64") - 1, 0)
    result = np.full(n_groups, np.nan)
    present = counts > 0
    result[present] = values[order][starts[present] + pos[present]]
    return result


def _linear_quantile(values: pd.Series, ids: np.ndarray, n: int, q: float) -> np.ndarray:
    frame = pd.DataFrame({"g": ids, "v": values.to_numpy(dtype="float64", na_value=np.nan)})
    quantiles = frame.dropna().groupby("g")["v"].quantile(q)
    return quantiles.reindex(range(n)).to_numpy(dtype="float64")


def _ts_codes(rows: pd.DataFrame) -> tuple[np.ndarray, int]:
    """Dense codes of the sample instants (the grid is regular: cheap arithmetic, no hashing)."""
    ts = rows["ts"].to_numpy(dtype="int64")
    step = int(np.gcd.reduce(np.unique(rows["step_s"].to_numpy(dtype="int64")))) or 1
    start = int(ts.min())
    codes = (ts - start) // step
    if not np.array_equal(codes * step + start, ts):  # off the grid: hash instead
        codes, uniques = pd.factorize(ts)
        return codes.astype("int64"), len(uniques)
    return codes, int(codes.max()) + 1


def _group_max(groups: np.ndarray, n: int, values: np.ndarray) -> np.ndarray:
    out = np.zeros(n)
    np.maximum.at(out, groups, values)
    return out


def _pod_stats(
    rows: pd.DataFrame, wid: np.ndarray, pid: np.ndarray, threshold: float, q: float
) -> pd.DataFrame:
    """Per pod: its workload, GPUs (limits else most units held at once) and busy quantile k."""
    pod_first = np.flatnonzero(np.diff(np.maximum.accumulate(pid), prepend=-1) > 0)
    n_pods = len(pod_first)
    ts_codes, ts_size = _ts_codes(rows)
    pair, first = pair_ids(pid, ts_codes, ts_size)
    # A raw sample is busy at or above the threshold; an hourly row when any of it was.
    busy_flags = (idle_fraction(rows, threshold) < 1.0).astype("float64")
    busy = np.bincount(pair, busy_flags, len(first))
    held = np.bincount(pair, minlength=len(first)).astype("float64")
    pod_of = pid[first]
    k = discrete_quantile(busy, pod_of, n_pods, q)
    held_max = _group_max(pod_of, n_pods, held)
    limits = rows["pod_gpu_count"].to_numpy(dtype="float64", na_value=np.nan)[pod_first]
    gpus = np.where(np.isnan(limits) | (limits <= 0), held_max, limits)
    return pd.DataFrame({"wid": wid[pod_first], "gpus": gpus, "k": k})


def _gpus_requested(
    rows: pd.DataFrame, wid: np.ndarray, pid: np.ndarray, pods: pd.DataFrame, n: int
) -> np.ndarray:
    """Per workload: the most GPUs its pods held at once (pod limits, else units attributed).

    On hourly roll-ups a pod counts for the share of the hour it held its units (pods that
    follow each other within an hour do not add up), and the result is rounded.
    """
    ts, ts_size = _ts_codes(rows)
    pair, first = pair_ids(pid, ts, ts_size)  # one row per (pod, sample time)
    gpus = pods["gpus"].to_numpy(dtype="float64")[pid[first]]
    if c.SAMPLES in rows.columns:
        held_s = _group_max(pair, len(first), rows["step_s"].to_numpy(dtype="float64"))
        gpus = gpus * np.minimum(held_s / 3600.0, 1.0)
    at_ts, at_first = pair_ids(wid[first], ts[first], ts_size)
    per_ts = np.bincount(at_ts, gpus, len(at_first))
    most = _group_max(wid[first][at_first], n, per_ts)
    return np.round(most) if c.SAMPLES in rows.columns else most


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
    pair, first = pair_ids(wid, *_ts_codes(rows))
    step_h = _group_max(pair, len(first), rows["step_s"].to_numpy(dtype="float64") / 3600.0)
    out["observed_hours"] = np.bincount(wid[first], step_h, n)


def _add_quantiles(
    out: pd.DataFrame,
    rows: pd.DataFrame,
    wid: np.ndarray,
    memory: pd.Series,
    policy: AnalyticsPolicy,
) -> None:
    n = len(out)
    out["p_util"] = _linear_quantile(rows[c.UTIL], wid, n, policy.util_quantile)
    out["p_memory_mib"] = _linear_quantile(rows["fb_used_mib"], wid, n, policy.memory_quantile)
    out["gpu_memory_mib"] = _linear_quantile(memory, wid, n, 0.5)


def _add_pod_columns(
    out: pd.DataFrame, rows: pd.DataFrame, wid: np.ndarray, policy: AnalyticsPolicy
) -> None:
    n = len(out)
    pid, _ = group_ids(rows[POD_KEYS])
    pods = _pod_stats(rows, wid, pid, policy.idle_threshold_ratio, policy.busy_quantile)
    per_w = pods.groupby("wid").agg(
        gpus=("gpus", "max"), min_gpus=("gpus", "min"), k=("k", "max"), pods=("k", "size")
    )
    out["pod_gpus"] = _reindexed(per_w["gpus"], n)
    out["one_gpu_pods"] = _reindexed(per_w["gpus"].eq(1) & per_w["min_gpus"].eq(1), n)
    out["busy_k"] = _reindexed(per_w["k"], n)
    out["gpus_requested"] = _gpus_requested(rows, wid, pid, pods, n)
    out["pods"] = _reindexed(per_w["pods"], n)


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


def workload_stats(
    costed: pd.DataFrame,
    policy: AnalyticsPolicy,
    price_book: PriceBook,
    gpus: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per workload of the allocated samples with data: keys, then STAT_COLUMNS."""
    rows = costed[costed[c.ALLOCATED] & (costed[c.GPU_HOURS] > 0)].reset_index(drop=True)
    if rows.empty:
        return pd.DataFrame(columns=[*KEYS, *STAT_COLUMNS])
    wid, first = group_ids(rows[KEYS])
    out = as_text(rows.loc[first, KEYS].reset_index(drop=True), KEYS)
    _add_sums(out, rows, wid, policy.idle_threshold_ratio)
    _add_quantiles(out, rows, wid, _memory_total(rows, gpus, price_book), policy)
    _add_pod_columns(out, rows, wid, policy)
    _add_facts(out, rows, wid, first)
    return out[[*KEYS, *STAT_COLUMNS]]


STAT_COLUMNS = (
    "allocated_gpu_hours",
    "idle_gpu_hours",
    "allocated_cost_usd",
    "observed_hours",
    "p_util",
    "p_memory_mib",
    "gpu_memory_mib",
    "pod_gpus",
    "one_gpu_pods",
    "busy_k",
    "gpus_requested",
    "pods",
    "whole_gpus",
    "node_attribution",
    "spot",
    "team",
    "nodes",
    "mig_profile",
)
