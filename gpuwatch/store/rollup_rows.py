"""Hourly roll-up rows computed in memory from sample columns, and their insert.

:func:`hourly_rows` is what ``rollup._ROLL_UP_SQL`` computes from the same rows, column by
column (pure); :func:`records` and :func:`insert_rows` write them as plain tuples.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import Connection

from gpuwatch.store import rollup_append
from gpuwatch.store.driver import insert_tuples
from gpuwatch.store.models import HOUR_S, NO_POD, GpuSampleHourly
from gpuwatch.store.sample_columns import SampleColumns


def hourly_rows(samples: SampleColumns, idle_ratio: float) -> dict[str, np.ndarray]:
    """The roll-up rows of ``samples`` (unique per GPU and instant), column by column: what
    ``rollup._ROLL_UP_SQL`` computes from the same rows, in memory (pure)."""
    hour = samples.ts - samples.ts % HOUR_S
    pod = np.where(np.isnan(samples.pod_id), NO_POD, samples.pod_id).astype(np.int64)
    order = np.lexsort((samples.ts, pod, samples.gpu_id, hour))
    hour, pod, gpu, ts = hour[order], pod[order], samples.gpu_id[order], samples.ts[order]
    starts = rollup_append.group_starts(hour, gpu, pod)
    step = samples.step_s[order].astype(np.int64)
    util = samples.util_ratio[order]
    read = ~np.isnan(util)
    power = samples.power_w[order]

    def peak(column: np.ndarray) -> np.ndarray:
        return np.fmax.reduceat(column[order], starts)

    return {
        "hour_ts": hour[starts],
        "gpu_id": gpu[starts],
        "pod_id": pod[starts],
        "samples": np.diff(np.append(starts, len(ts))),
        "step_s": np.maximum.reduceat(step, starts),
        "first_ts": ts[starts],
        "last_ts": np.maximum.reduceat(ts, starts),
        "data_s": np.add.reduceat(np.where(read, step, 0), starts),
        "used_s": np.add.reduceat(np.where(read, np.clip(util, 0.0, 1.0) * step, 0.0), starts),
        "idle_s": np.add.reduceat(np.where(read & (util < idle_ratio), step, 0), starts),
        "util_max": np.fmax.reduceat(util, starts),
        "util_signal": peak(samples.util_signal),
        "fb_used_max_mib": peak(samples.fb_used_mib),
        "fb_total_mib": peak(samples.fb_total_mib),
        "power_w_sum": np.add.reduceat(np.nan_to_num(power), starts),
        "power_n": np.add.reduceat((~np.isnan(power)).astype(np.int64), starts),
        "temp_max_c": peak(samples.temp_c),
        "xid": peak(samples.xid),
    }


_INTEGER_COLUMNS = ("hour_ts", "gpu_id", "pod_id", "samples", "step_s", "first_ts", "last_ts",
                    "data_s", "idle_s", "power_n")  # fmt: skip


def _python_values(name: str, column: np.ndarray) -> list[Any]:
    """One column as Python values: integers as ints, NaN as None."""
    if name in _INTEGER_COLUMNS:
        ints: list[Any] = column.astype(np.int64).tolist()
        return ints
    missing = np.isnan(column)
    whole = name in ("util_signal", "xid")
    values = (np.where(missing, 0, column).astype(np.int64) if whole else column).tolist()
    return [None if gone else v for gone, v in zip(missing.tolist(), values, strict=True)]


def records(columns: dict[str, np.ndarray]) -> list[tuple[Any, ...]]:
    """Rows to insert, in ``columns`` order (a power sum only where a power reading was)."""
    power = np.where(columns["power_n"] > 0, columns["power_w_sum"], np.nan)
    lists = {name: _python_values(name, column) for name, column in columns.items()}
    lists["power_w_sum"] = _python_values("power_w_sum", power)
    return list(zip(*lists.values(), strict=True))


def insert_rows(conn: Connection, names: list[str], rows: list[tuple[Any, ...]]) -> None:
    """One ``executemany`` of plain tuples (:func:`~gpuwatch.store.driver.insert_tuples`)."""
    insert_tuples(conn, GpuSampleHourly.__tablename__, names, rows)
