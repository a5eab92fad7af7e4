"""The cost and GPU rows of any window, summed by the store (docs/storage.md#daily-sums).

:func:`window_sums` reads the window's sums per UTC day (:func:`gpuwatch.store.daily.read_sums`),
costs them with the analytics' own :func:`~gpuwatch.analytics.costing.prepare`, and returns the
cost model's quantities per (UTC day, GPU unit, pod) and each unit's utilization, health peaks
and signal per UTC day: the same figures the hourly rows give, from a few rows per unit and
day. Units that node-level attribution may give to pods are costed from their hourly rows,
since that attribution follows the pods' start and end times. :func:`span_sums` caches a
window's sums with the snapshot of the data version they were read at.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.costing import node_level_units, prepare
from gpuwatch.app import rollup
from gpuwatch.app.data import Snapshot
from gpuwatch.domain.durations import DAY_S
from gpuwatch.domain.pricing import PriceBook
from gpuwatch.store import daily, repository
from gpuwatch.store.repository_daily import daily_samples

#: Per (UTC day, GPU unit) columns of :attr:`WindowSums.gpu` (besides ``day_ts``, ``gpu_id``).
GPU_COLUMNS = ("step_s", *rollup.GPU_SUMS, *rollup.GPU_PEAKS)
_PEAKS = {"fb_used_ratio_max": "fb_used_ratio_max", "temp_max_c": "temp_c_max",
          "power_w_max": "power_w_max", "xid_max": "xid_last"}  # fmt: skip
_COUNTS = ("prof_samples", "dev_samples", "xid_hours")


@dataclass(frozen=True)
class WindowSums:
    """``cost``: per (UTC day ``day_ts``, GPU unit, pod) the cost model's sums
    (:data:`~gpuwatch.app.rollup.COST_SUMS`) with unit and pod text; ``gpu``: per (UTC day,
    GPU unit) :data:`GPU_COLUMNS` (``step_s``: the unit's longest step in the window)."""

    cost: pd.DataFrame
    gpu: pd.DataFrame


def window_sums(
    engine: Engine,
    pods: pd.DataFrame,
    price_book: PriceBook,
    idle_threshold_ratio: float,
    window: tuple[int, int],
) -> WindowSums:
    """The sums of the window ``[start_ts, end_ts)`` (whole hours)."""
    start_ts, end_ts = window
    sums = daily.read_sums(engine, start_ts, end_ts).sums
    samples = daily_samples(engine, sums, pods)
    by_hour = node_level_units(samples, pods)
    if len(by_hour):
        hourly = repository.load_hourly_samples(
            engine, start_ts, end_ts, health=False, gpu_ids=by_hour.tolist(), pods=pods
        )
        kept = samples[~samples["gpu_id"].isin(by_hour)]
        samples = pd.concat([kept, hourly], ignore_index=True)
    rows = rollup.compact(prepare(samples, pods, price_book))
    days = rows["ts"].to_numpy(dtype="int64") // DAY_S * DAY_S
    cost = rollup.cost_sums(rows, days, idle_threshold_ratio)
    return WindowSums(cost=cost, gpu=_gpu_sums(rows, days, sums))


def _gpu_sums(rows: pd.DataFrame, days: np.ndarray, sums: pd.DataFrame) -> pd.DataFrame:
    """Per (UTC day, unit): samples, data and utilized hours from the costed rows (node-level
    attribution changes utilization), peaks and counts from the store's sums."""
    hours = rows[c.DATA_HOURS].to_numpy(dtype="float64")
    costed = pd.DataFrame(
        {
            "day_ts": days,
            "gpu_id": rows["gpu_id"].to_numpy(dtype="int64"),
            c.SAMPLES: rows[c.SAMPLES].to_numpy(dtype="float64"),
            c.DATA_HOURS: hours,
            "util_hours": hours * rows[c.UTIL].to_numpy(dtype="float64"),
        }
    )
    keys = ["day_ts", "gpu_id"]
    out = costed.groupby(keys, sort=True).sum()
    stored = sums.groupby(keys, sort=True)
    out[list(_COUNTS)] = stored[list(_COUNTS)].sum().reindex(out.index).astype("float64")
    peaks = stored[list(_PEAKS)].max().reindex(out.index).rename(columns=_PEAKS)
    out[list(_PEAKS.values())] = peaks.astype("float64")
    steps = sums.groupby("gpu_id")["step_max_s"].max()
    out = out.reset_index()
    out["step_s"] = out["gpu_id"].map(steps).fillna(0).astype("int64")
    return out[[*keys, *GPU_COLUMNS]]


def span_sums(snap: Snapshot, start_ts: int, end_ts: int) -> WindowSums:
    """The cost and GPU rows of ``[start_ts, end_ts)`` per UTC day, summed by the store
    (:func:`~gpuwatch.app.window_costs.window_sums`); never modify them."""

    def compute() -> WindowSums:
        if snap.engine is None or snap.empty:
            return WindowSums(cost=rollup.empty_cost_rows(), gpu=rollup.empty_gpu_rows())
        return window_sums(
            snap.engine,
            snap.pods,
            snap.price_book,
            snap.policy.idle_threshold_ratio,
            (start_ts, end_ts),
        )

    return snap.memo(("span_sums", start_ts, end_ts), compute, share=True)


def span_cost_rows(snap: Snapshot, start_ts: int, end_ts: int) -> pd.DataFrame:
    """The per (UTC day ``day_ts``, GPU unit, pod) cost rows of ``[start_ts, end_ts)``."""
    return span_sums(snap, start_ts, end_ts).cost
