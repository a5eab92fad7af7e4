"""The pages' hourly rows and sums, built from the store's hourly roll-ups (docs/storage.md).

Pure: costed hourly rows (:func:`gpuwatch.store.repository.load_hourly_samples` through
:func:`gpuwatch.analytics.costing.prepare`) in, small frames out:

- :func:`compact`: the hourly rows themselves, one per (hour, GPU unit, pod), with only the
  columns the pages and recommendations read, in small dtypes;
- :func:`cost_sums`: per (day, GPU unit, pod) the cost model's sums
  (:func:`summary.sample_measures`, which honours the roll-ups' exact idle shares), so any
  window sums to exactly what the analytics compute for it (:mod:`gpuwatch.app.window_costs`
  sums the store's daily sums with it);
- :func:`hour_gaps`: the hours in which a unit has fewer samples than its step implies.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.summary import sample_measures
from gpuwatch.domain.allocation import DRA
from gpuwatch.domain.durations import HOUR_S
from gpuwatch.domain.frames import NO_POD

#: Summed columns of the per (window day, GPU unit, pod) roll-up.
COST_SUMS: tuple[str, ...] = (*c.SUM_COLUMNS, c.GPU_HOURS, c.SAMPLES)
#: What every row of GPU time carries, raw sample and hourly row alike: utilization, health
#: readings and cost.
READING_COLUMNS: tuple[str, ...] = (
    c.UTIL,
    c.IDLE_RATIO,
    "fb_used_mib",
    "fb_total_mib",
    "temp_c",
    "power_w",
    "xid",
    c.DATA_HOURS,
    c.GPU_HOURS,
    c.USD_PER_HOUR,
    c.ALLOCATED,
)
#: Columns of the hourly rows: what ``workload_stats`` reads, and one GPU's health.
HOURLY_COLUMNS: tuple[str, ...] = (
    "ts",
    "gpu_id",
    "pod_id",
    "step_s",
    c.SAMPLES,
    "cluster",
    "node",
    "gpu_model",
    "capacity_type",
    "mig_profile",
    "timeslice_replicas",
    "allocation",
    "namespace",
    "pod",
    "workload_kind",
    "workload",
    "team",
    "pod_gpu_count",
    "attribution",
    "util_signal",
    *READING_COLUMNS,
)
UNIT_TEXT = ("cluster", "node", "gpu_model", "capacity_type", "mig_profile")
POD_TEXT = ("namespace", "pod", "workload_kind", "workload", "team")
TEXT = (*UNIT_TEXT, *POD_TEXT, "attribution", "util_signal", "allocation")
_SMALL = {
    "gpu_id": "int32",
    "pod_id": "int32",
    "timeslice_replicas": "int16",
    "pod_gpu_count": "Int16",
    "step_s": "int32",
    c.SAMPLES: "int32",
    "temp_c": "float32",
    "power_w": "float32",
    "xid": "int32",
}
#: Per (UTC day, GPU unit) columns of the GPU rows (:mod:`gpuwatch.app.window_costs`).
GPU_SUMS = (c.SAMPLES, c.DATA_HOURS, "util_hours", "xid_hours", "prof_samples", "dev_samples")
GPU_PEAKS = ("fb_used_ratio_max", "temp_c_max", "power_w_max", "xid_last")


def compact(costed: pd.DataFrame) -> pd.DataFrame:
    """Costed hourly rows with :data:`HOURLY_COLUMNS` only, sorted by hour and unit.

    ``pod_id`` is :data:`NO_POD` where no pod held the unit; text columns are categoricals.
    """
    out = costed[list(HOURLY_COLUMNS)].copy()
    held = out[c.ALLOCATED].to_numpy(dtype=bool)
    ids = out["pod_id"].to_numpy(dtype="float64", na_value=np.nan)
    out["pod_id"] = np.where(held & ~np.isnan(ids), np.nan_to_num(ids, nan=NO_POD), NO_POD)
    out["xid"] = out["xid"].fillna(0)
    out = out.astype({**_SMALL, c.ALLOCATED: bool})
    for name in TEXT:
        if not isinstance(out[name].dtype, pd.CategoricalDtype):
            out[name] = out[name].astype(object).astype("category")
    return out.sort_values(["ts", "gpu_id", "pod_id"], kind="stable").reset_index(drop=True)


#: Columns derived again when rows are read (:func:`with_costs`), not kept in the cache.
DERIVED = (c.DATA_HOURS, c.GPU_HOURS, c.USD_PER_HOUR)
STORED_COLUMNS = tuple(name for name in HOURLY_COLUMNS if name not in DERIVED)


def stored(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows of :func:`compact` as the pages' cache keeps them: without :data:`DERIVED`, memory in
    float32 where that is exact (DCGM reports whole MiB)."""
    out = rows.drop(columns=list(DERIVED))
    for name in ("fb_used_mib", "fb_total_mib"):
        values = out[name].to_numpy(dtype="float64", na_value=np.nan)
        small = values.astype("float32")
        if np.array_equal(small.astype("float64"), values, equal_nan=True):
            out[name] = small
    return out


def with_costs(rows: pd.DataFrame, usd_per_hour: np.ndarray, share: np.ndarray) -> pd.DataFrame:
    """Stored rows with :data:`DERIVED` again, as costing computes them: data hours
    (``step_s`` is the seconds with a reading), GPU-equivalent hours (× the unit's ``share``
    of its GPU) and its GPU's price (``usd_per_hour`` and ``share`` are indexed by
    ``gpu_id``)."""
    data = rows["step_s"].to_numpy(dtype="float64") / HOUR_S
    ids = rows["gpu_id"].to_numpy(dtype="int64")
    return rows.assign(
        **{c.DATA_HOURS: data, c.GPU_HOURS: data * share[ids], c.USD_PER_HOUR: usd_per_hour[ids]}
    )


def concat_parts(parts: list[pd.DataFrame], empty: pd.DataFrame) -> pd.DataFrame:
    """Frames of the same columns as one, categorical columns as shared categoricals."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return empty
    text = [n for n in parts[0].columns if isinstance(parts[0][n].dtype, pd.CategoricalDtype)]
    out = pd.concat([p.drop(columns=text) for p in parts], ignore_index=True)
    for name in text:
        union = pd.api.types.union_categoricals([p[name] for p in parts], ignore_order=True)
        out[name] = pd.Categorical(union)
    return out[list(parts[0].columns)]


def empty_hourly() -> pd.DataFrame:
    """Stored hourly rows (:data:`STORED_COLUMNS`) of nothing."""
    frame = pd.DataFrame({name: pd.Series(dtype="float64") for name in STORED_COLUMNS})
    for name in ("ts", "gpu_id", "pod_id", "step_s", c.SAMPLES, "timeslice_replicas", "xid"):
        frame[name] = frame[name].astype("int64")
    frame["pod_gpu_count"] = frame["pod_gpu_count"].astype("Int64")
    frame[c.ALLOCATED] = frame[c.ALLOCATED].astype(bool)
    for name in TEXT:
        frame[name] = frame[name].astype(object).astype("category")
    return frame


def measures(rows: pd.DataFrame, idle_threshold_ratio: float) -> dict[str, np.ndarray]:
    """Per row, the cost model's summed quantities plus data hours and raw samples."""
    values = sample_measures(rows, idle_threshold_ratio)
    values[c.GPU_HOURS] = rows[c.GPU_HOURS].to_numpy(dtype="float64")
    values[c.SAMPLES] = rows[c.SAMPLES].to_numpy(dtype="float64")
    return values


def _labels(hourly: pd.DataFrame, key: str, names: tuple[str, ...]) -> pd.DataFrame:
    """The text facts of each ``key`` value (pod or unit) as the hourly rows carry them."""
    return hourly.drop_duplicates(key)[[key, *names]].reset_index(drop=True)


#: Text columns of the cost rows: the unit's, its allocation mode, the pod's.
COST_TEXT = ("cluster", "node", "gpu_model", "allocation", *POD_TEXT)


def cost_sums(rows: pd.DataFrame, days: np.ndarray, idle_threshold_ratio: float) -> pd.DataFrame:
    """Per (day ``day_ts``, GPU unit, pod) of compacted costed rows: the cost model's sums,
    labelled with unit and pod text; ``days`` gives each row's day."""
    frame = pd.DataFrame(measures(rows, idle_threshold_ratio))
    frame["day_ts"] = days
    frame["gpu_id"] = rows["gpu_id"].to_numpy(dtype="int64")
    frame["pod_id"] = rows["pod_id"].to_numpy(dtype="int64")
    out = frame.groupby(["day_ts", "gpu_id", "pod_id"], sort=True)[list(COST_SUMS)].sum()
    out = out.reset_index()
    out = out.merge(_labels(rows, "gpu_id", ("cluster", "node", "gpu_model")), how="left")
    pods = _labels(rows[rows["pod_id"] != NO_POD], "pod_id", POD_TEXT)
    out = out.merge(pods, on="pod_id", how="left")
    modes = rows.drop_duplicates(["gpu_id", "pod_id"])[["gpu_id", "pod_id", "allocation"]]
    out = out.merge(modes.astype({"allocation": object}), on=["gpu_id", "pod_id"], how="left")
    for name in COST_TEXT:
        if not isinstance(out[name].dtype, pd.CategoricalDtype):
            out[name] = out[name].astype(object).astype("category")
    return out


def empty_cost_rows() -> pd.DataFrame:
    """Cost rows (:func:`cost_sums` per UTC day ``day_ts``) of nothing."""
    frame = pd.DataFrame(
        {name: pd.Series(dtype="int64") for name in ("day_ts", "gpu_id", "pod_id")}
    )
    for name in COST_SUMS:
        frame[name] = pd.Series(dtype="float64")
    for name in COST_TEXT:
        frame[name] = pd.Series(dtype=object).astype("category")
    return frame


def empty_gpu_rows() -> pd.DataFrame:
    """GPU rows (per UTC day ``day_ts`` and unit: ``step_s``, :data:`GPU_SUMS`,
    :data:`GPU_PEAKS`) of nothing."""
    frame = pd.DataFrame({name: pd.Series(dtype="int64") for name in ("day_ts", "gpu_id")})
    frame["step_s"] = pd.Series(dtype="int64")
    for name in (*GPU_SUMS, *GPU_PEAKS):
        frame[name] = pd.Series(dtype="float64")
    return frame


def allocation_modes(units: pd.DataFrame, pods: pd.DataFrame) -> pd.Series:
    """How the units can be held: each unit's mode, and ``dra`` where a pod held one by claim
    (as :func:`~gpuwatch.store.repository.load_hourly_samples` labels its rows)."""
    modes = units["allocation"].astype(object)
    claimed = pods.loc[pods["allocation"].astype(object).eq(DRA), "allocation"].astype(object)
    return pd.concat([modes, claimed], ignore_index=True)


def unit_steps(hourly: pd.DataFrame) -> pd.Series:
    """Each unit's sampling step (s): the largest seconds-with-data per raw sample of an hour.

    An hour whose samples all have a reading gives the step exactly; a unit without any
    reading gets the largest step of the others.
    """
    samples = hourly[c.SAMPLES].to_numpy(dtype="float64")
    per_sample = hourly["step_s"].to_numpy(dtype="float64") / np.where(samples > 0, samples, 1)
    frame = pd.DataFrame({"gpu_id": hourly["gpu_id"].to_numpy(), "s": np.rint(per_sample)})
    steps = frame.groupby("gpu_id")["s"].max()
    fallback = float(steps.max()) if len(steps) and steps.max() > 0 else float(HOUR_S)
    return steps.where(steps > 0, fallback).astype("int64")


def _expected_hours(
    seen: pd.DataFrame, start_ts: int, end_ts: int
) -> tuple[np.ndarray, np.ndarray]:
    """Every (unit, hour) from a unit's first to its last sample, clipped to the span."""
    first = np.maximum(seen["first_seen_ts"].to_numpy(dtype="float64", na_value=np.nan), start_ts)
    last = np.minimum(seen["last_seen_ts"].to_numpy(dtype="float64", na_value=np.nan), end_ts - 1)
    valid = ~np.isnan(first) & ~np.isnan(last) & (last >= first)
    h0 = (first[valid].astype("int64") // HOUR_S) * HOUR_S
    n = (last[valid].astype("int64") // HOUR_S) * HOUR_S - h0
    n = n // HOUR_S + 1
    unit = np.repeat(np.flatnonzero(valid), n)
    offset = np.arange(int(n.sum()), dtype="int64") - np.repeat(np.cumsum(n) - n, n)
    return unit, np.repeat(h0, n) + offset * HOUR_S


def _samples_at(
    hourly: pd.DataFrame, ids: np.ndarray, hour: np.ndarray, start_ts: int
) -> np.ndarray:
    """Raw samples of each (unit, hour) pair asked for (0 where the unit has no row)."""

    def key(gpu: np.ndarray, ts: np.ndarray) -> np.ndarray:
        hour = (np.asarray(ts, dtype="int64") - start_ts) // HOUR_S
        out: np.ndarray = np.asarray(gpu, dtype="int64") * 2**24 + hour
        return out

    keys, inverse = np.unique(
        key(hourly["gpu_id"].to_numpy(), hourly["ts"].to_numpy()), return_inverse=True
    )
    totals = np.bincount(inverse, hourly[c.SAMPLES].to_numpy(dtype="float64"), len(keys))
    wanted = key(ids, hour)
    pos = np.clip(np.searchsorted(keys, wanted), 0, max(len(keys) - 1, 0))
    found = (pos < len(keys)) & (keys[pos] == wanted) if len(keys) else np.zeros(len(wanted), bool)
    return np.where(found, totals[pos] if len(keys) else 0.0, 0.0)


def hour_gaps(
    hourly: pd.DataFrame, units: pd.DataFrame, steps: pd.Series, start_ts: int, end_ts: int
) -> pd.DataFrame:
    """Hours in ``[start_ts, end_ts)`` in which a unit has fewer samples than its step implies.

    A unit is expected on its step's grid from its first to its last sample
    (``first_seen_ts``, ``last_seen_ts``); an hour without any row counts in full. Returns
    ``gpu_id``, ``hour_ts`` and ``missing_s`` (missing samples × step).
    """
    seen = units[units["gpu_id"].isin(steps.index)].reset_index(drop=True)
    unit, hour = _expected_hours(seen, start_ts, end_ts)
    ids = seen["gpu_id"].to_numpy(dtype="int64")[unit]
    step = steps.reindex(ids).to_numpy(dtype="float64")
    first = seen["first_seen_ts"].to_numpy(dtype="float64", na_value=np.nan)[unit]
    last = seen["last_seen_ts"].to_numpy(dtype="float64", na_value=np.nan)[unit]
    low = np.maximum(hour, first)
    high = np.minimum(hour + HOUR_S, last + 1)
    expected = np.clip(np.ceil(high / step) - np.ceil(low / step), 0, None)
    got = _samples_at(hourly, ids, hour, start_ts)
    missing = np.clip(expected - got, 0, None) * step
    gap = missing > 0
    return pd.DataFrame(
        {"gpu_id": ids[gap], "hour_ts": hour[gap], "missing_s": missing[gap].astype("int64")}
    )


def gap_runs(gaps: pd.DataFrame) -> pd.DataFrame:
    """Consecutive incomplete hours of a unit as one gap: ``gpu_id``, ``gap_s`` per gap."""
    if gaps.empty:
        return pd.DataFrame({"gpu_id": [], "gap_s": []}, dtype="int64")
    ordered = gaps.sort_values(["gpu_id", "hour_ts"], kind="stable")
    ids = ordered["gpu_id"].to_numpy()
    hours = ordered["hour_ts"].to_numpy()
    new = np.r_[True, (ids[1:] != ids[:-1]) | (hours[1:] != hours[:-1] + HOUR_S)]
    run = np.cumsum(new) - 1
    gap_s = np.bincount(run, ordered["missing_s"].to_numpy(dtype="float64"))
    return pd.DataFrame({"gpu_id": ids[new], "gap_s": gap_s.astype("int64")})


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
