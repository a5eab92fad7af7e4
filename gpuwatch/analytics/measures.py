"""Per-workload quantiles and counts behind the recommendations, from mergeable detail.

Raw samples and stored hours go through the same arithmetic (:mod:`gpuwatch.domain.series`):
raw rows are turned into the detail the roll-ups store, stored detail is read as it is, and both
are merged per workload here. So p95 utilization, p99 memory, busy GPUs, GPUs held at once and
summed utilization are the same at every storage resolution (docs/recommendations.md#quantiles).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.domain import series, sketch
from gpuwatch.domain.series import Histograms

#: Quantiles of the hourly summed utilization (autoscaling range and swing test).
HOURLY_LOW_Q, HOURLY_HIGH_Q, HOURLY_TOP_Q = 0.05, 0.95, 0.99


@dataclass(frozen=True)
class PodDetail:
    """Pod-hour rows: workload row ``wid``, a pod key, and the pod's histograms."""

    wid: np.ndarray
    pod: np.ndarray
    data_s: np.ndarray
    held_max: np.ndarray
    requested: np.ndarray  # GPUs the pod's spec asks for, 0 when unknown
    busy: Histograms
    util: Histograms
    fb_used: Histograms


@dataclass(frozen=True)
class LoadDetail:
    """Workload-hour rows: workload row ``wid``, the hour and its histograms."""

    wid: np.ndarray
    hour_ts: np.ndarray
    data_s: np.ndarray
    util_sum_bin_s: np.ndarray
    held: Histograms
    util_sum: Histograms


def detail_from_rows(
    rows: pd.DataFrame, wid: np.ndarray, pid: np.ndarray, threshold: float
) -> tuple[PodDetail, LoadDetail]:
    """The detail of allocated sample rows with data (``wid``/``pid``: workload and pod ids)."""
    ts = rows["ts"].to_numpy(dtype=np.int64)
    step = rows["step_s"].to_numpy(dtype=np.int64)
    util = rows["util_ratio"].to_numpy(dtype=np.float64)
    fb = rows["fb_used_mib"].to_numpy(dtype=np.float64, na_value=np.nan)
    limits = rows["pod_gpu_count"].to_numpy(dtype=np.float64, na_value=np.nan)
    pod_keys, pod = np.unique(pid, return_inverse=True)
    first = np.unique(pod, return_index=True)[1]
    requested = np.nan_to_num(limits[first], nan=0.0)
    pods = series.pod_hours(pod, ts, step, util, fb, threshold)
    loads = series.workload_hours(wid, pod, ts, step, util, requested)
    pod_wid = wid[first]
    return (
        PodDetail(
            pod_wid[pods.pod],
            pod_keys[pods.pod],
            pods.data_s,
            pods.held_max,
            requested[pods.pod],
            pods.busy,
            pods.util,
            pods.fb_used,
        ),
        LoadDetail(
            loads.workload,
            loads.hour_ts,
            loads.data_s,
            loads.util_sum_bin_s,
            loads.held,
            loads.util_sum,
        ),
    )


def _kept(hist: Histograms, keep: np.ndarray) -> Histograms:
    return hist if bool(keep.all()) else hist.take(keep)


def _pod_lookup(pod_column: pd.Series, mapping: Mapping[int, float]) -> tuple[np.ndarray, ...]:
    """Per row of ``pod_column``: whether ``mapping`` has its pod, and the mapped value (0
    where not)."""
    pods = pod_column.to_numpy(dtype=np.int64)
    if not mapping:
        return np.zeros(len(pods), dtype=bool), np.zeros(len(pods))
    keys = np.fromiter(mapping.keys(), dtype=np.int64, count=len(mapping))
    values = np.fromiter(mapping.values(), dtype=np.float64, count=len(mapping))
    at = pd.Index(keys).get_indexer(pd.Index(pods))
    found = at >= 0
    return found, np.where(found, values[at], 0.0)


def _workload_rows(
    loads: pd.DataFrame, keys: list[str], workload_ids: Mapping[tuple[str, ...], int]
) -> np.ndarray:
    """Per row of ``loads``: the workload id of its ``keys`` (as text), -1 where not named."""
    if not len(loads):
        return np.zeros(0, dtype=np.int64)
    codes, uniques = [], []
    for name in keys:
        code, unique = pd.factorize(loads[name].to_numpy(dtype=object), use_na_sentinel=False)
        codes.append(code.astype(np.int64))
        uniques.append([str(value) for value in unique])
    combos, row_combo = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
    ids = [
        workload_ids.get(tuple(uniques[n][code] for n, code in enumerate(combo)), -1)
        for combo in combos.tolist()
    ]
    return np.asarray(ids, dtype=np.int64)[row_combo.reshape(-1)]


def detail_from_store(
    stored: series.StoredDetail,
    workload_ids: Mapping[tuple[str, ...], int],
    pod_ids: Mapping[int, int],
    pod_requested: Mapping[int, float],
) -> tuple[PodDetail, LoadDetail]:
    """Stored detail of the workloads named in ``workload_ids`` (keys of WORKLOAD_KEYS → wid)
    and pods in ``pod_ids`` (pod id → wid); rows of other workloads and pods are left out."""
    pods = stored.pods
    keep, wid = _pod_lookup(pods["pod_id"], {p: float(w) for p, w in pod_ids.items()})
    requested = _pod_lookup(pods["pod_id"], pod_requested)[1]
    pod_wid = np.where(keep, wid, -1).astype(np.int64)
    pod_detail = PodDetail(
        pod_wid[keep], pods["pod_id"].to_numpy(np.int64)[keep],
        pods["data_s"].to_numpy(np.int64)[keep], pods["held_max"].to_numpy(np.int64)[keep],
        np.nan_to_num(requested[keep]), _kept(stored.pod_busy, keep),
        _kept(stored.pod_util, keep), _kept(stored.pod_fb_used, keep),
    )  # fmt: skip
    loads = stored.workloads
    keys = ["cluster", "namespace", "workload_kind", "workload", "gpu_model"]
    load_wid = _workload_rows(loads, keys, workload_ids)
    kept = load_wid >= 0
    load_detail = LoadDetail(
        load_wid[kept], loads["hour_ts"].to_numpy(np.int64)[kept],
        loads["data_s"].to_numpy(np.int64)[kept],
        loads["util_sum_bin_s"].to_numpy(np.int64)[kept],
        _kept(stored.held, kept), _kept(stored.util_sum, kept),
    )  # fmt: skip
    return pod_detail, load_detail


def merge_pods(a: PodDetail, b: PodDetail) -> PodDetail:
    """Rows of ``a`` then ``b`` (pod keys of ``b`` shifted clear of ``a``'s)."""
    na, nb = len(a.wid), len(b.wid)
    if not nb:
        return a
    shift = int(a.pod.max()) + 1 if na else 0
    return PodDetail(
        np.concatenate([a.wid, b.wid]), np.concatenate([a.pod, b.pod + shift]),
        np.concatenate([a.data_s, b.data_s]), np.concatenate([a.held_max, b.held_max]),
        np.concatenate([a.requested, b.requested]),
        Histograms.concat([(a.busy, na), (b.busy, nb)]),
        Histograms.concat([(a.util, na), (b.util, nb)]),
        Histograms.concat([(a.fb_used, na), (b.fb_used, nb)]),
    )  # fmt: skip


def merge_loads(a: LoadDetail, b: LoadDetail) -> LoadDetail:
    na, nb = len(a.wid), len(b.wid)
    if not nb:
        return a
    return LoadDetail(
        np.concatenate([a.wid, b.wid]),
        np.concatenate([a.hour_ts, b.hour_ts]),
        np.concatenate([a.data_s, b.data_s]),
        np.concatenate([a.util_sum_bin_s, b.util_sum_bin_s]),
        Histograms.concat([(a.held, na), (b.held, nb)]),
        Histograms.concat([(a.util_sum, na), (b.util_sum, nb)]),
    )


def _quantile(hist: Histograms, row_group: np.ndarray, n: int, q: float) -> np.ndarray:
    """Per group, the ``q`` quantile of the histograms of its rows."""
    return sketch.grouped_quantile(row_group[hist.rows], hist.bins, hist.counts, n, q)


def _value_quantile(values: np.ndarray, groups: np.ndarray, n: int, q: float) -> np.ndarray:
    """Nearest-rank quantile of plain values per group (NaN for an empty group)."""
    out = np.full(n, np.nan)
    if not len(values):
        return out
    order = np.lexsort((values, groups))
    counts = np.bincount(groups, minlength=n)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.maximum(np.ceil(counts * q - 1e-9), 1).astype(np.int64) - 1
    present = counts > 0
    out[present] = values[order][starts[present] + rank[present]]
    return out


def _pod_measures(pods: PodDetail, n: int, policy: AnalyticsPolicy) -> pd.DataFrame:
    """Per workload: GPUs per pod (max, min), busy GPUs k (its pods' max) and pods."""
    if not len(pods.wid):
        return pd.DataFrame(
            {"pod_gpus": np.nan, "min_gpus": np.nan, "busy_k": np.nan, "pods": 0}, index=range(n)
        )
    pair, first = np.unique(pods.wid * (int(pods.pod.max()) + 1) + pods.pod, return_inverse=True)
    n_pairs = len(pair)
    pair_wid = np.zeros(n_pairs, np.int64)
    pair_wid[first] = pods.wid
    held = np.zeros(n_pairs)
    np.maximum.at(held, first, pods.held_max)
    asks = np.zeros(n_pairs)
    np.maximum.at(asks, first, pods.requested)
    gpus = np.where(asks > 0, asks, held)
    k = _quantile(pods.busy, first, n_pairs, policy.busy_quantile)
    frame = pd.DataFrame({"wid": pair_wid, "gpus": gpus, "k": np.nan_to_num(k)})
    per = frame.groupby("wid").agg(
        pod_gpus=("gpus", "max"), min_gpus=("gpus", "min"), busy_k=("k", "max"), pods=("k", "size")
    )
    return per.reindex(range(n))


def _load_measures(loads: LoadDetail, n: int, policy: AnalyticsPolicy) -> dict[str, np.ndarray]:
    """Per workload: data hours, most GPUs held at once, replica and summed-use quantiles."""
    held_max = np.zeros(n)
    if len(loads.held.rows):
        np.maximum.at(held_max, loads.wid[loads.held.rows], loads.held.bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        hourly = np.where(loads.data_s > 0, loads.util_sum_bin_s / loads.data_s, np.nan)
    hourly = hourly / sketch.UTIL_BINS_PER_RATIO
    ok = ~np.isnan(hourly)
    q = policy.util_quantile
    return {
        # clock hours with at least one of its samples (one workload-hour row each)
        "observed_hours": np.bincount(loads.wid, minlength=n).astype(np.float64),
        "gpus_requested": held_max,
        "held_p95": _quantile(loads.held, loads.wid, n, q),
        "util_sum_p95": sketch.util_value(_quantile(loads.util_sum, loads.wid, n, q)),
        "hourly_util_sum_p05": _value_quantile(hourly[ok], loads.wid[ok], n, HOURLY_LOW_Q),
        "hourly_util_sum_p95": _value_quantile(hourly[ok], loads.wid[ok], n, HOURLY_HIGH_Q),
        "hourly_util_sum_p99": _value_quantile(hourly[ok], loads.wid[ok], n, HOURLY_TOP_Q),
    }


def workload_measures(
    pods: PodDetail, loads: LoadDetail, n: int, policy: AnalyticsPolicy
) -> pd.DataFrame:
    """One row per workload ``0..n-1``: the columns of :data:`MEASURE_COLUMNS`."""
    out = _pod_measures(pods, n, policy).reset_index(drop=True)
    util = _quantile(pods.util, pods.wid, n, policy.util_quantile)
    memory = _quantile(pods.fb_used, pods.wid, n, policy.memory_quantile)
    out["p_util"] = sketch.util_value(util)
    out["p_memory_mib"] = np.where(np.isnan(memory), np.nan, sketch.fb_value(np.nan_to_num(memory)))
    out["one_gpu_pods"] = out["pod_gpus"].eq(1) & out["min_gpus"].eq(1)
    for name, values in _load_measures(loads, n, policy).items():
        out[name] = values
    return out[list(MEASURE_COLUMNS)]


MEASURE_COLUMNS = (
    "observed_hours",
    "p_util",
    "p_memory_mib",
    "pod_gpus",
    "one_gpu_pods",
    "busy_k",
    "gpus_requested",
    "pods",
    "held_p95",
    "util_sum_p95",
    "hourly_util_sum_p05",
    "hourly_util_sum_p95",
    "hourly_util_sum_p99",
)
