"""The health roll-up summed per (GPU unit, pod) over a window: what the efficiency figures
and the placement traffic need, without the window's hourly rows
(docs/cost-model.md#health-and-efficiency).

Each figure of :mod:`gpuwatch.analytics.efficiency` is a sum over hourly rows of a per-row term
(a row's seconds times its own ratio), and a unit's share and price are the same in every hour,
so a (unit, pod) pair's terms can be summed first, here or in the database
(:func:`gpuwatch.store.repository.load_health_sums`), and grouped into workloads after. The
terms are defined once, in :func:`row_terms`; the store's SQL computes the same ones.

Pure: the input is the hourly health roll-up (:data:`gpuwatch.domain.frames.HEALTH_COLUMNS`),
the output :data:`gpuwatch.domain.frames.HEALTH_SUM_COLUMNS`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuwatch.analytics.health_rows import FAIL_S, divide, with_failing
from gpuwatch.domain.frames import (
    HEALTH_SUM_COLUMNS,
    HEALTH_SUM_IDENTITY,
    HEALTH_SUM_PROFILING,
    HEALTH_SUM_READINGS,
    HEALTH_SUM_TERMS,
    conform,
    empty_frame,
)

#: Hourly mean bandwidths summed over the rows that have them (placement traffic).
TRAFFIC: tuple[str, ...] = ("pcie_bytes_per_s", "nvlink_bytes_per_s")
#: A (unit, pod) pair: every fact of a row is the same for the pair.
PAIR: tuple[str, str] = ("gpu_id", "pod_id")


def _f(frame: pd.DataFrame, name: str) -> np.ndarray:
    values = frame[name].to_numpy(dtype="float64", na_value=np.nan)
    return np.asarray(np.nan_to_num(values), dtype="float64")


def _activity(frame: pd.DataFrame, data_s: np.ndarray) -> dict[str, np.ndarray]:
    profiled = np.zeros(len(frame), dtype=bool)
    for name in HEALTH_SUM_PROFILING:
        profiled |= _f(frame, name) > 0
    out: dict[str, np.ndarray] = {}
    for prefix, (active, data) in HEALTH_SUM_READINGS.items():
        active_s, reading_s = _f(frame, active), _f(frame, data)
        if prefix == "engine":
            active_s, reading_s = active_s * profiled, reading_s * profiled
        has = reading_s > 0
        out[f"{prefix}_weighted_s"] = np.where(has, data_s * divide(active_s, reading_s), 0.0)
        out[f"{prefix}_weight_s"] = np.where(has, data_s, 0.0)
        out[f"{prefix}_hours"] = has.astype("float64")
    return out


def row_terms(health: pd.DataFrame, since: pd.Series | None = None) -> pd.DataFrame:
    """The hourly rows with every term of :data:`~gpuwatch.domain.frames.HEALTH_SUM_TERMS`
    added, each row a sum over its hour:

    - ``data_s`` and ``clock_data_s`` as stored;
    - ``throttled_data_s``: data_s × throttled_s ÷ clock_data_s (0 without clock readings);
    - ``low_sm_data_s``: data_s × busy_low_sm_s ÷ util_data_s, and ``inefficient_data_s`` the
      same with the larger of busy_low_sm_s and busy_no_tensor_s (GPUs with tensor cores);
    - ``fail_s``: the seconds after the GPU's first failing event (``since``, epoch seconds by
      (cluster, gpu_uuid), else the rows' own first events: :func:`with_failing`);
    - per activity reading: ``<x>_weighted_s`` data_s × the hour's ratio, ``<x>_weight_s``
      data_s, ``<x>_hours`` 1, on rows with the reading (else 0);
    - per bandwidth: ``<x>_sum`` the hour's mean and ``<x>_hours`` 1 where it has one."""
    rows = with_failing(health, since)
    data_s = _f(rows, "data_s")
    util_data = _f(rows, "util_data_s")
    low_sm = divide(_f(rows, "busy_low_sm_s"), util_data)
    no_tensor = divide(_f(rows, "busy_no_tensor_s"), util_data)
    terms: dict[str, np.ndarray] = {
        "data_s": data_s,
        "clock_data_s": _f(rows, "clock_data_s"),
        "throttled_data_s": data_s * divide(_f(rows, "throttled_s"), _f(rows, "clock_data_s")),
        "low_sm_data_s": data_s * low_sm,
        "inefficient_data_s": data_s * np.maximum(low_sm, no_tensor),
        "fail_s": rows[FAIL_S].to_numpy(dtype="float64"),
        **_activity(rows, data_s),
    }
    for name in TRAFFIC:
        values = rows[name].to_numpy(dtype="float64", na_value=np.nan)
        terms[f"{name}_sum"] = np.nan_to_num(values)
        terms[f"{name}_hours"] = (~np.isnan(values)).astype("float64")
    return rows.drop(columns=[FAIL_S]).assign(**{name: terms[name] for name in HEALTH_SUM_TERMS})


def health_sums(health: pd.DataFrame, since: pd.Series | None = None) -> pd.DataFrame:
    """:func:`row_terms` summed per (GPU unit, pod), with the pair's facts: the frame
    :func:`gpuwatch.store.repository.load_health_sums` reads from the database, one row per
    pair in order of first appearance."""
    if health.empty:
        return empty_frame(HEALTH_SUM_COLUMNS)
    rows = row_terms(health.reset_index(drop=True), since)
    codes = rows.groupby(list(PAIR), dropna=False, sort=False).ngroup().to_numpy(dtype="int64")
    _, first = np.unique(codes, return_index=True)
    out = rows[[c.name for c in HEALTH_SUM_IDENTITY]].iloc[first].reset_index(drop=True)
    for name in HEALTH_SUM_TERMS:
        out[name] = np.bincount(codes, weights=rows[name].to_numpy(dtype="float64"))
    return conform(out, HEALTH_SUM_COLUMNS)
