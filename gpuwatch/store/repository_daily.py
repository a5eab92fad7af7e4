"""The summed samples of a window, per UTC day: daily sums and hourly rows, read by the store.

:func:`daily_samples` turns the sums of :func:`gpuwatch.store.daily.read_sums` into sample
rows, one per (UTC day, GPU unit, pod), shaped as :func:`~gpuwatch.store.repository.
load_hourly_samples` shapes an hour (``ts`` is the day; no health readings), so the analytics
cost them exactly as they cost hourly rows: every cost figure is linear in the summed seconds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from gpuwatch.store.repository import summed_samples

_SUMMED = ("gpu_id", "pod_id", "samples", "data_s", "used_s", "idle_s")
_UNREAD = ("util_signal", "fb_used_max_mib", "fb_total_mib", "power_w_sum", "temp_max_c", "xid")


def daily_samples(
    engine: Engine, sums: pd.DataFrame, pods: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Sums of :func:`~gpuwatch.store.daily.read_sums` as sample rows, one per (UTC day, GPU
    unit, pod): ``ts`` the day, ``step_s`` the seconds with a reading, ``util_ratio`` and
    ``idle_ratio`` their mean and idle share, ``samples`` the raw samples behind them
    (:data:`~gpuwatch.domain.frames.HOURLY_SAMPLE_COLUMNS`; memory, power, temperature and XID
    are left unread: NaN/0, the sums carry their peaks). ``pods``: the pods' frame, if read."""
    cols = {name: sums[name].to_numpy(dtype="float64") for name in _SUMMED}
    cols["hour_ts"] = sums["day_ts"].to_numpy(dtype="float64")
    cols |= {name: np.full(len(sums), np.nan) for name in _UNREAD}
    cols["power_n"] = np.zeros(len(sums))
    return summed_samples(engine, cols, pods)
