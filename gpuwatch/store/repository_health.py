"""Reads of the health and efficiency roll-up as the frame of :data:`HEALTH_COLUMNS`.

Re-exported by :mod:`gpuwatch.store.repository` (``repository.load_health_hourly``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from gpuwatch.domain.frames import HEALTH_COLUMNS, conform
from gpuwatch.store.models import NO_POD
from gpuwatch.store.models_health import GpuHealthHourly
from gpuwatch.store.rollup_health import COLUMNS, FLOATS, MEANS, NULLABLE

#: Integer columns that may be NULL: read as nullable integers.
_NULLABLE_INTEGERS = tuple(name for name in NULLABLE if name not in FLOATS)


def load_health_hourly(engine: Engine, start_ts: int, end_ts: int) -> pd.DataFrame:
    """The health roll-up rows of the hours starting in ``[start_ts, end_ts)``, joined with
    their GPU unit's and pod's facts like :func:`~gpuwatch.store.repository.load_hourly_samples`.

    One row per (hour, GPU unit, pod) with an efficiency or health reading: ``ts`` is the hour,
    ``step_s`` the row's seconds with samples (``data_s``); the means (SM clock, PCIe and
    NVLink bytes per second) are NaN without readings, the counts <NA> where none was
    reported. Columns: :data:`HEALTH_COLUMNS` (docs/storage.md#health).
    """
    from gpuwatch.store import repository  # it re-exports this module: imported when called

    table = GpuHealthHourly.__tablename__
    m = repository._fetch_window(engine, table, "hour_ts", list(COLUMNS), start_ts, end_ts)
    col = {name: m[:, n] for n, name in enumerate(COLUMNS)}
    pod = pd.Series(col["pod_id"].astype(np.int64), dtype="Int64")
    frame = pd.DataFrame(
        {
            "gpu_id": col["gpu_id"].astype(np.int64),
            "ts": col["hour_ts"].astype(np.int64),
            "step_s": col["data_s"].astype(np.int64),
            "pod_id": pod.mask(pod.eq(NO_POD)),
            # read by the join, not part of the frame
            "util_signal": pd.array([pd.NA] * len(m), dtype="Int64"),
            "xid": pd.array([pd.NA] * len(m), dtype="Int64"),
        }
    )
    skip = {"hour_ts", "gpu_id", "pod_id", *(t[0] for t in MEANS), *(t[1] for t in MEANS)}
    for name in COLUMNS:
        if name in _NULLABLE_INTEGERS:
            frame[name] = pd.array(col[name], dtype="Float64").astype("Int64")
        elif name not in skip:
            frame[name] = col[name]
    with np.errstate(invalid="ignore", divide="ignore"):
        for total, count, name in MEANS:
            frame[name] = np.where(col[count] > 0, col[total] / col[count], np.nan)
    return conform(repository._with_facts(engine, frame), HEALTH_COLUMNS)
