"""Hourly roll-ups of costed samples: what the pages aggregate instead of raw samples.

Pure: a costed frame (from :func:`gpuwatch.analytics.costing.prepare`) in, small frames out.
The sums are the cost model's own per-sample measures (:func:`summary.sample_measures`), summed
per hour, so any window of whole hours sums to exactly what the analytics compute for it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.summary import sample_measures

HOUR_S = 3600
NO_POD = -1
#: Summed columns of the per (hour, GPU unit, pod) roll-up.
COST_SUMS: tuple[str, ...] = (*c.SUM_COLUMNS, c.GPU_HOURS, "samples")
#: Columns of the costed frame kept for recommendations (what ``workload_stats`` reads).
HELD_COLUMNS: tuple[str, ...] = (
    "cluster",
    "node",
    "gpu_id",
    "gpu_model",
    "capacity_type",
    "mig_profile",
    "timeslice_replicas",
    "ts",
    "step_s",
    "pod_id",
    "namespace",
    "pod",
    "workload_kind",
    "workload",
    "team",
    "pod_gpu_count",
    "attribution",
    c.UTIL,
    "fb_used_mib",
    "fb_total_mib",
    c.GPU_HOURS,
    c.USD_PER_HOUR,
    c.ALLOCATED,
)
HELD_TEXT = (
    "cluster",
    "node",
    "gpu_model",
    "capacity_type",
    "mig_profile",
    "namespace",
    "pod",
    "workload_kind",
    "workload",
    "team",
    "attribution",
)


def _pod_codes(costed: pd.DataFrame) -> np.ndarray:
    held = costed[c.ALLOCATED].to_numpy(dtype=bool)
    ids = costed["pod_id"].to_numpy(dtype="float64", na_value=np.nan)
    return np.where(held & ~np.isnan(ids), np.nan_to_num(ids, nan=NO_POD), NO_POD).astype("int64")


def cost_hourly(costed: pd.DataFrame, idle_threshold_ratio: float) -> pd.DataFrame:
    """Per (hour, GPU unit, pod): the cost model's sums, data hours, samples and peak memory.

    ``pod_id`` is :data:`NO_POD` for unallocated samples.
    """
    values = sample_measures(costed, idle_threshold_ratio)
    values[c.GPU_HOURS] = costed[c.GPU_HOURS].to_numpy(dtype="float64")
    values["samples"] = np.ones(len(costed))
    frame = pd.DataFrame(values)
    frame["bucket_ts"] = costed["ts"].to_numpy(dtype="int64") // HOUR_S * HOUR_S
    frame["gpu_id"] = costed["gpu_id"].to_numpy(dtype="int64")
    frame["pod_id"] = _pod_codes(costed)
    frame["fb_used_mib_max"] = costed["fb_used_mib"].to_numpy(dtype="float64", na_value=np.nan)
    frame["step_s"] = costed["step_s"].to_numpy(dtype="int64")
    grouped = frame.groupby(["bucket_ts", "gpu_id", "pod_id"], sort=True)
    sums = grouped[list(COST_SUMS)].sum()
    sums["fb_used_mib_max"] = grouped["fb_used_mib_max"].max()
    sums["step_s"] = grouped["step_s"].max()
    return sums.reset_index()


def gpu_hourly(costed: pd.DataFrame) -> pd.DataFrame:
    """Per (hour, GPU unit): utilization, memory, temperature, power, XID and signal facts."""
    hours = costed[c.GPU_HOURS].to_numpy(dtype="float64")
    fb_used = costed["fb_used_mib"].to_numpy(dtype="float64", na_value=np.nan)
    fb_total = costed["fb_total_mib"].to_numpy(dtype="float64", na_value=np.nan)
    xid = costed["xid"].to_numpy(dtype="float64", na_value=0.0)
    signal = costed["util_signal"].astype(object)
    frame = pd.DataFrame(
        {
            "bucket_ts": costed["ts"].to_numpy(dtype="int64") // HOUR_S * HOUR_S,
            "gpu_id": costed["gpu_id"].to_numpy(dtype="int64"),
            "samples": 1.0,
            c.GPU_HOURS: hours,
            "util_hours": hours * costed[c.UTIL].to_numpy(dtype="float64"),
            "fb_used_mib_max": fb_used,
            "fb_used_ratio_max": fb_used / np.where(fb_total > 0, fb_total, np.nan),
            "temp_c_max": costed["temp_c"].to_numpy(dtype="float64", na_value=np.nan),
            "power_w_max": costed["power_w"].to_numpy(dtype="float64", na_value=np.nan),
            "xid_samples": (xid != 0).astype("float64"),
            "xid_last": xid,
            "prof_samples": signal.eq("prof_gr_engine_active").to_numpy(dtype="float64"),
            "dev_samples": signal.eq("dev_gpu_util").to_numpy(dtype="float64"),
            "step_s": costed["step_s"].to_numpy(dtype="int64"),
            "last_ts": costed["ts"].to_numpy(dtype="int64"),
        }
    )
    grouped = frame.groupby(["bucket_ts", "gpu_id"], sort=True)
    summed = ["samples", c.GPU_HOURS, "util_hours", "xid_samples", "prof_samples", "dev_samples"]
    maxed = [
        "fb_used_mib_max",
        "fb_used_ratio_max",
        "temp_c_max",
        "power_w_max",
        "xid_last",
        "step_s",
        "last_ts",
    ]
    out = grouped[summed].sum()
    out[maxed] = grouped[maxed].max()
    return out.reset_index()


def held_rows(costed: pd.DataFrame) -> pd.DataFrame:
    """The allocated samples with data, only the columns recommendations read."""
    rows = costed[costed[c.ALLOCATED] & (costed[c.GPU_HOURS] > 0)]
    out = rows[list(HELD_COLUMNS)].reset_index(drop=True)
    for name in HELD_TEXT:
        if not isinstance(out[name].dtype, pd.CategoricalDtype):
            out[name] = out[name].astype("category")
    return out


def concat_held(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Chunks of :func:`held_rows` as one frame, text columns as shared categoricals."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame({name: pd.Series(dtype="float64") for name in HELD_COLUMNS})
    out = pd.concat([p.drop(columns=list(HELD_TEXT)) for p in parts], ignore_index=True)
    for name in HELD_TEXT:
        union = pd.api.types.union_categoricals([p[name] for p in parts], ignore_order=True)
        out[name] = pd.Categorical(union)
    out[c.ALLOCATED] = out[c.ALLOCATED].astype(bool)
    return out[list(HELD_COLUMNS)]


def sample_gaps(costed: pd.DataFrame, previous_ts: dict[int, int]) -> pd.DataFrame:
    """Stretches without samples inside each unit's series: ``gap_start_ts`` to ``gap_end_ts``.

    ``previous_ts`` maps a unit to its last sample before this chunk (updated in place), so
    gaps across chunk boundaries are found too.
    """
    frame = costed[["gpu_id", "ts", "step_s"]].sort_values(["gpu_id", "ts"], kind="stable")
    ids = frame["gpu_id"].to_numpy(dtype="int64")
    ts = frame["ts"].to_numpy(dtype="int64")
    step = frame["step_s"].to_numpy(dtype="int64")
    before = np.empty_like(ts)
    if len(ts):
        before[1:] = ts[:-1]
        first = np.r_[True, ids[1:] != ids[:-1]]
        before[first] = [previous_ts.get(int(g), -1) for g in ids[first]]
        last = np.r_[ids[1:] != ids[:-1], True]
        previous_ts.update(zip(ids[last].tolist(), ts[last].tolist(), strict=True))
    gap = (before >= 0) & (ts - before > step)
    return pd.DataFrame(
        {"gpu_id": ids[gap], "gap_start_ts": before[gap] + step[gap], "gap_end_ts": ts[gap]}
    )


def pending_series(pods: pd.DataFrame, instants: np.ndarray) -> pd.DataFrame:
    """GPUs and pods waiting at each instant (created, not started, not finished).

    The same waiting rule as :func:`gpuwatch.analytics.demand.pending_gpu_timeseries`, counted
    with sorted event times instead of one pass per instant.
    """
    created = pods["created_ts"].to_numpy(dtype="float64", na_value=-np.inf)
    started = pods["started_ts"].to_numpy(dtype="float64", na_value=np.inf)
    finished = pods["finished_ts"].to_numpy(dtype="float64", na_value=np.inf)
    gpus = pods["gpu_count"].to_numpy(dtype="float64")
    end = np.minimum(started, finished)
    valid = (gpus > 0) & (end > created)
    created, end, gpus = created[valid], end[valid], gpus[valid]
    at = np.asarray(instants, dtype="float64")
    order_c, order_e = np.argsort(created, kind="stable"), np.argsort(end, kind="stable")
    n_created = np.searchsorted(created[order_c], at, side="right")
    n_ended = np.searchsorted(end[order_e], at, side="right")
    gpus_c = np.r_[0.0, np.cumsum(gpus[order_c])]
    gpus_e = np.r_[0.0, np.cumsum(gpus[order_e])]
    return pd.DataFrame(
        {
            c.BUCKET_TS: np.asarray(instants, dtype="int64"),
            c.PENDING_PODS: (n_created - n_ended).astype("int64"),
            c.PENDING_GPUS: np.rint(gpus_c[n_created] - gpus_e[n_ended]).astype("int64"),
        }
    )
