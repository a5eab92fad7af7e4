"""Aggregations of costed samples: GPU-hours, dollars, efficiency and coverage by any grouping.

Every function takes the frame from :func:`gpuwatch.analytics.costing.prepare` and is
vectorised: per-sample measures are computed once as columns, then summed with one groupby.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.grouping import group_sum
from gpuwatch.domain.durations import HOUR_S


def idle_fraction(costed: pd.DataFrame, idle_threshold_ratio: float) -> np.ndarray:
    """Per row, the share of its data hours that were idle.

    A raw sample is idle or not (``util < threshold``); an hourly roll-up row carries the exact
    share in ``idle_ratio`` (docs/storage.md), counted at the threshold it was built with.
    """
    util = costed[c.UTIL].to_numpy(dtype="float64")
    derived = (util < idle_threshold_ratio).astype("float64")
    if c.IDLE_RATIO not in costed.columns:
        return derived
    given = costed[c.IDLE_RATIO].to_numpy(dtype="float64", na_value=np.nan)
    return np.where(np.isnan(given), derived, given)


def sample_measures(costed: pd.DataFrame, idle_threshold_ratio: float) -> dict[str, np.ndarray]:
    """The summed quantities of docs/cost-model.md for each sample, as arrays in row order.

    An unallocated sample adds to the unallocated columns only, never to the idle ones.
    """
    hours = costed[c.GPU_HOURS].to_numpy(dtype="float64")
    util = costed[c.UTIL].to_numpy(dtype="float64")
    price = costed[c.USD_PER_HOUR].to_numpy(dtype="float64")
    held = costed[c.ALLOCATED].to_numpy(dtype=bool)
    alloc_h = np.where(held, hours, 0.0)
    free_h = hours - alloc_h
    idle_h = alloc_h * idle_fraction(costed, idle_threshold_ratio)
    alloc_cost = alloc_h * price
    return {
        c.ALLOCATED_GPU_HOURS: alloc_h,
        c.USED_GPU_HOURS: alloc_h * util,
        c.IDLE_GPU_HOURS: idle_h,
        c.ALLOCATED_COST_USD: alloc_cost,
        c.IDLE_COST_USD: idle_h * price,
        c.UNUSED_COST_USD: alloc_cost - alloc_cost * util,
        c.UNALLOCATED_GPU_HOURS: free_h,
        c.UNALLOCATED_COST_USD: free_h * price,
    }


def expected_hours_per_sample(costed: pd.DataFrame) -> np.ndarray:
    """Each sample's share of its unit's expected hours.

    A unit is expected from its first to its last sample plus one step; each of its samples
    (with a reading or not) carries an equal share, so a group's share of a unit's expected
    hours is its share of the unit's samples (an hourly roll-up row counts its ``samples``).
    """
    ids = costed["gpu_id"].to_numpy()
    ts = costed["ts"].to_numpy()
    weight = (
        costed[c.SAMPLES].to_numpy(dtype="float64")
        if c.SAMPLES in costed.columns
        else np.ones(len(costed))
    )
    by_unit = pd.DataFrame(
        {"id": ids, "ts": ts, "end": ts + costed["step_s"].to_numpy(), "n": weight}
    )
    spans = by_unit.groupby("id", sort=False).agg(
        first=("ts", "min"), last=("end", "max"), n=("n", "sum")
    )
    share = (spans["last"] - spans["first"]) / HOUR_S / spans["n"]
    per_unit: np.ndarray = share.reindex(ids).to_numpy(dtype="float64")
    result: np.ndarray = per_unit * weight
    return result


def add_ratios(frame: pd.DataFrame) -> pd.DataFrame:
    """Add efficiency and capacity columns to a frame of summed quantities."""
    alloc = frame[c.ALLOCATED_GPU_HOURS]
    frame[c.EFFICIENCY_PCT] = (100.0 * frame[c.USED_GPU_HOURS] / alloc).where(alloc > 0)
    frame[c.CAPACITY_GPU_HOURS] = alloc + frame[c.UNALLOCATED_GPU_HOURS]
    frame[c.CAPACITY_COST_USD] = frame[c.ALLOCATED_COST_USD] + frame[c.UNALLOCATED_COST_USD]
    return frame


def summarize(costed: pd.DataFrame, by: Sequence[str], idle_threshold_ratio: float) -> pd.DataFrame:
    """GPU-hours, dollars, efficiency and coverage per group of ``by`` columns.

    ``by`` lists sample columns (see :data:`gpuwatch.analytics.columns.GROUPINGS` for the named
    groupings); an empty ``by`` gives one total row. Unallocated samples fall in the group of
    their key values (``<NA>`` for pod-side keys), so each column's sum is the total.
    Columns: the ``by`` columns, then :data:`gpuwatch.analytics.columns.SUMMARY_COLUMNS`.
    """
    values = sample_measures(costed, idle_threshold_ratio)
    values[c.OBSERVED_HOURS] = expected_hours_per_sample(costed)
    values[c.DATA_HOURS] = costed[c.DATA_HOURS].to_numpy(dtype="float64")
    keys = costed[list(by)] if by else pd.DataFrame(index=costed.index)
    sums = group_sum(keys.reset_index(drop=True), values)
    if not by and sums.empty:
        sums = pd.DataFrame({name: [0.0] for name in values})
    observed = sums[c.OBSERVED_HOURS]
    sums[c.COVERAGE_RATIO] = (sums[c.DATA_HOURS] / observed).where(observed > 0)
    out = add_ratios(sums)[[*by, *c.SUMMARY_COLUMNS]]
    return as_text(out, by)


def as_text(frame: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """Categorical key columns of a (small) result frame back to the ``string`` dtype."""
    for name in names:
        if isinstance(frame[name].dtype, pd.CategoricalDtype):
            frame[name] = frame[name].astype("string")
    return frame


def unit_coverage(
    costed: pd.DataFrame, gpus: pd.DataFrame, start_ts: int, end_ts: int
) -> pd.DataFrame:
    """Per GPU unit of ``gpus``: hours it existed in ``[start_ts, end_ts)``, hours with data.

    A unit exists from ``first_seen_ts`` to ``last_seen_ts`` plus one step (the step of its
    samples, else 0). Missing samples lower ``coverage_ratio``; they are never idle.
    """
    data = costed.groupby("gpu_id")[c.DATA_HOURS].sum()
    step = costed.groupby("gpu_id")["step_s"].max()
    units = gpus[["cluster", "node", "gpu_id", "gpu_model", "first_seen_ts", "last_seen_ts"]]
    unit_step = units["gpu_id"].map(step).fillna(0).to_numpy(dtype="float64")
    first = np.maximum(units["first_seen_ts"].to_numpy(dtype="float64"), start_ts)
    last = np.minimum(units["last_seen_ts"].to_numpy(dtype="float64") + unit_step, end_ts)
    existed = np.clip(last - first, 0, None) / HOUR_S
    with_data = units["gpu_id"].map(data).fillna(0.0).to_numpy(dtype="float64")
    out = units[["cluster", "node", "gpu_id", "gpu_model"]].copy()
    out[c.OBSERVED_HOURS] = existed
    out[c.DATA_HOURS] = with_data
    out[c.COVERAGE_RATIO] = np.where(
        existed > 0, with_data / np.where(existed > 0, existed, 1), np.nan
    )
    return out.reset_index(drop=True)


def capacity_timeseries(
    costed: pd.DataFrame, bucket_s: int, by: Sequence[str] = ()
) -> pd.DataFrame:
    """Capacity vs allocated vs used per time bucket: mean GPUs over the bucket, and
    GPU-hours, in GPU equivalents (a MIG instance counts g/7 of a GPU, a slot 1/R).
    """
    if bucket_s <= 0:
        raise ValueError(f"bucket must be a positive number of seconds, got {bucket_s}")
    hours = costed[c.GPU_HOURS].to_numpy(dtype="float64")
    held = costed[c.ALLOCATED].to_numpy(bool)
    keys = costed[list(by)].reset_index(drop=True)
    keys[c.BUCKET_TS] = costed["ts"].to_numpy() // bucket_s * bucket_s
    values = {
        c.CAPACITY_GPU_HOURS: hours,
        c.ALLOCATED_GPU_HOURS: hours * held,
        c.USED_GPU_HOURS: hours * held * costed[c.UTIL].to_numpy(dtype="float64"),
    }
    out = group_sum(keys, values)
    bucket_hours = bucket_s / HOUR_S
    out[c.CAPACITY_GPUS] = out[c.CAPACITY_GPU_HOURS] / bucket_hours
    out[c.ALLOCATED_GPUS] = out[c.ALLOCATED_GPU_HOURS] / bucket_hours
    out[c.USED_GPUS] = out[c.USED_GPU_HOURS] / bucket_hours
    return as_text(out, by)
