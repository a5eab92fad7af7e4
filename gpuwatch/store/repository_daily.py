"""The summed samples of a window, per UTC day: daily sums and hourly rows, read by the store.

:func:`daily_samples` turns the sums of :func:`gpuwatch.store.daily.read_sums` into sample
rows, one per (UTC day, GPU unit, pod), shaped as :func:`~gpuwatch.store.repository.
load_hourly_samples` shapes an hour (no health readings), so the analytics cost them exactly as
they cost hourly rows: every cost figure is linear in the summed seconds.
:func:`hourly_samples_beside` reads the hourly rows that such sums do not stand for.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from gpuwatch.domain.durations import DAY_S, HOUR_S
from gpuwatch.domain.frames import LAST_HOUR_TS, NO_POD
from gpuwatch.store.daily_health import Spans
from gpuwatch.store.repository import load_hourly_samples, summed_samples

_SUMMED = ("gpu_id", "pod_id", "samples", "data_s", "used_s", "idle_s")
_UNREAD = ("util_signal", "fb_used_max_mib", "fb_total_mib", "power_w_sum", "temp_max_c", "xid")


def daily_samples(
    engine: Engine, sums: pd.DataFrame, pods: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Sums of :func:`~gpuwatch.store.daily.read_sums` as sample rows, one per (UTC day, GPU
    unit, pod): ``ts`` the hour of the row's first reading and :data:`~gpuwatch.domain.frames.
    LAST_HOUR_TS` that of its last (both within its day), ``step_s`` the seconds with a
    reading, ``util_ratio`` and ``idle_ratio`` their mean and idle share, ``samples`` the raw
    samples behind them (:data:`~gpuwatch.domain.frames.HOURLY_SAMPLE_COLUMNS` and
    ``last_hour_ts``; memory, power, temperature and XID are left unread: NaN/0, the sums carry
    their peaks). ``pods``: the pods' frame, if read."""
    day = sums["day_ts"].to_numpy(dtype="int64")
    last_hour = day + DAY_S - HOUR_S
    first = np.clip(_hour(sums["first_ts"]), day, last_hour)
    cols = {name: sums[name].to_numpy(dtype="float64") for name in _SUMMED}
    cols["hour_ts"] = first.astype("float64")
    cols |= {name: np.full(len(sums), np.nan) for name in _UNREAD}
    cols["power_n"] = np.zeros(len(sums))
    out = summed_samples(engine, cols, pods)
    out[LAST_HOUR_TS] = np.clip(_hour(sums["last_ts"]), first, last_hour).astype("float64")
    return out


def _hour(ts: pd.Series) -> np.ndarray:
    values: np.ndarray = ts.to_numpy(dtype="int64")
    hours: np.ndarray = values - values % HOUR_S
    return hours


def hourly_samples_beside(
    engine: Engine,
    window: tuple[int, int],
    days: Spans,
    gpu_ids: list[int],
    pods: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The hourly rows of the window ``[start_ts, end_ts)`` (whole hours) except, within
    ``days``, the rows no pod held of the units not in ``gpu_ids``: what the daily sums of
    those days do not stand for (:func:`~gpuwatch.store.repository.load_hourly_samples`)."""
    start_ts, end_ts = window
    if not days:
        return load_hourly_samples(engine, start_ts, end_ts, health=False, pods=pods)
    in_days = " OR ".join(f"(hour_ts >= {int(lo)} AND hour_ts < {int(hi)})" for lo, hi in days)
    condition = f"pod_id <> {NO_POD} OR NOT ({in_days})"
    if gpu_ids:
        condition += f" OR gpu_id IN ({', '.join(str(int(i)) for i in gpu_ids)})"
    return load_hourly_samples(
        engine, start_ts, end_ts, health=False, pods=pods, condition=condition
    )
