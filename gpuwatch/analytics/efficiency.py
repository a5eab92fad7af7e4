"""Real efficiency of the GPU-hours a workload held: engine, SM, tensor and DRAM activity,
throttled and failing hours, and the busy-but-inefficient hours with their likely cause
(docs/cost-model.md#health-and-efficiency).

Pure: the input is the hourly health roll-up (:data:`gpuwatch.domain.frames.HEALTH_COLUMNS`).
A mean is GPU-hour weighted over the rows with its reading and NaN (unavailable) where no row
has one. The utilization reading is the engine's activity only on rows with a profiling reading
(SM, SM occupancy, tensor or DRAM): elsewhere it is ``DCGM_FI_DEV_GPU_UTIL`` and engine activity
is unavailable.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics import health_rows
from gpuwatch.analytics.health_rows import (
    FAIL_S,
    divide,
    prepare,
    ratio_mean_pct,
    with_failing,
)
from gpuwatch.domain.durations import HOUR_S
from gpuwatch.domain.health import (
    BUSY_UTIL_RATIO,
    LOW_SM_ACTIVE_RATIO,
    MEMORY_BOUND_DRAM_RATIO,
    NO_TENSOR_RATIO,
    has_tensor_cores,
)
from gpuwatch.domain.pricing import PriceBook

#: Keys of a workload's efficiency row.
EFFICIENCY_KEYS: tuple[str, ...] = (
    "cluster",
    "namespace",
    "workload_kind",
    "workload",
    "gpu_model",
)
#: Throttled at least this share of the allocated GPU-hours: the cause is ``throttled``.
THROTTLED_CAUSE_RATIO = 0.25
#: Causes of busy-but-inefficient GPU time, in the order they are tested.
CAUSES: tuple[str, ...] = ("throttled", "memory-bound", "input-bound", "no tensor cores used")
#: Mean activity columns: name → (Σ ratio × step column, seconds-with-reading column).
ACTIVITY: dict[str, tuple[str, str]] = {
    "engine_active_pct": ("engine_s", "engine_data_s"),
    "sm_active_pct": ("sm_active_s", "sm_data_s"),
    "sm_occupancy_pct": ("sm_occupancy_s", "sm_occupancy_data_s"),
    "tensor_active_pct": ("tensor_active_s", "tensor_data_s"),
    "dram_active_pct": ("dram_active_s", "dram_data_s"),
}
EFFICIENCY_COLUMNS: tuple[str, ...] = (
    *EFFICIENCY_KEYS,
    "team",
    c.ALLOCATED_GPU_HOURS,
    *ACTIVITY,
    "throttled_gpu_hours",
    "failing_gpu_hours",
    "failing_cost_usd",
    "inefficient_gpu_hours",
    "inefficient_cost_usd",
    "cause",
)
_PROFILING = ("sm_data_s", "sm_occupancy_data_s", "tensor_data_s", "dram_data_s")


def _f(frame: pd.DataFrame, name: str) -> np.ndarray:
    values = frame[name].to_numpy(dtype="float64", na_value=np.nan)
    return np.asarray(np.nan_to_num(values), dtype="float64")


def _share(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return divide(num, den)


def _tensor_models(models: pd.Series) -> np.ndarray:
    """Whether each row's GPU model has tensor cores (unknown: no)."""
    known = {m: has_tensor_cores(m) is True for m in models.dropna().astype(str).unique()}
    return models.astype(object).map(lambda m: known.get(str(m), False)).to_numpy(dtype=bool)


def add_row_figures(rows: pd.DataFrame) -> pd.DataFrame:
    """Prepared rows with the per-row figures summed by :func:`workload_efficiency`:
    engine seconds (on rows with profiling), throttled, failing and inefficient GPU-hours."""
    out = rows.copy()
    profiled = np.zeros(len(out), dtype=bool)
    for name in _PROFILING:
        profiled |= _f(out, name) > 0
    out["engine_s"] = np.where(profiled, _f(out, "util_s"), 0.0)
    out["engine_data_s"] = np.where(profiled, _f(out, "util_data_s"), 0.0)
    gpu_h = out[c.GPU_HOURS].to_numpy(dtype="float64")
    out["throttled_gpu_hours"] = gpu_h * _share(_f(out, "throttled_s"), _f(out, "clock_data_s"))
    out["failing_gpu_hours"] = _f(out, FAIL_S) / HOUR_S * out["share"].to_numpy(dtype="float64")
    util_data = _f(out, "util_data_s")
    low_sm = _share(_f(out, "busy_low_sm_s"), util_data)
    no_tensor = _share(_f(out, "busy_no_tensor_s"), util_data) * _tensor_models(out["gpu_model"])
    out["inefficient_gpu_hours"] = gpu_h * np.maximum(low_sm, no_tensor)
    return out


def _sums(rows: pd.DataFrame, keys: list[str], price: np.ndarray) -> pd.DataFrame:
    figures = pd.DataFrame({k: rows[k].to_numpy() for k in keys})
    gpu_h = rows[c.GPU_HOURS].to_numpy(dtype="float64")
    figures[c.ALLOCATED_GPU_HOURS] = gpu_h
    for name in ("throttled_gpu_hours", "failing_gpu_hours", "inefficient_gpu_hours"):
        figures[name] = rows[name].to_numpy(dtype="float64")
    figures["failing_cost_usd"] = figures["failing_gpu_hours"] * price
    figures["inefficient_cost_usd"] = figures["inefficient_gpu_hours"] * price
    return figures.groupby(keys, dropna=False, sort=False, observed=True).sum()


def _teams(rows: pd.DataFrame, keys: list[str]) -> pd.Series:
    """The team with the most GPU-hours among each group's rows."""
    by_team = rows.groupby([*keys, "team"], dropna=False, sort=True, observed=True)[c.GPU_HOURS]
    ranked = by_team.sum().reset_index().sort_values(c.GPU_HOURS, ascending=False, kind="stable")
    return ranked.drop_duplicates(keys).set_index(keys)["team"]


def efficiency_cause(
    engine_pct: float,
    sm_pct: float,
    tensor_pct: float,
    dram_pct: float,
    throttled_ratio: float,
    tensor_cores: bool,
) -> str | None:
    """The likely cause of busy-but-inefficient GPU time, None when the time is not busy, is
    efficient, or the profiling readings that would tell are unavailable (NaN)."""
    if not engine_pct >= 100 * BUSY_UTIL_RATIO:
        return None
    low_sm = sm_pct < 100 * LOW_SM_ACTIVE_RATIO
    no_tensor = tensor_cores and tensor_pct < 100 * NO_TENSOR_RATIO
    if not (low_sm or no_tensor):
        return None
    if throttled_ratio >= THROTTLED_CAUSE_RATIO:
        return CAUSES[0]
    if low_sm:
        return CAUSES[1] if dram_pct >= 100 * MEMORY_BOUND_DRAM_RATIO else CAUSES[2]
    return CAUSES[3]


def _empty() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=object) for name in EFFICIENCY_COLUMNS})


def workload_efficiency(
    health: pd.DataFrame, price_book: PriceBook, failing_since: pd.Series | None = None
) -> pd.DataFrame:
    """One row per :data:`EFFICIENCY_KEYS` of the allocated rows: ``team``,
    ``allocated_gpu_hours``, the activity means in percent (NaN: unavailable),
    ``throttled_gpu_hours``, ``failing_gpu_hours`` and ``failing_cost_usd`` (from each GPU's
    ``failing_since``, epoch seconds by (cluster, gpu_uuid), else the frame's own first failing
    events), ``inefficient_gpu_hours``, ``inefficient_cost_usd`` and ``cause``."""
    if health.empty:
        return _empty()
    rows = prepare(health, price_book)
    since = health_rows.failing_since(rows) if failing_since is None else failing_since
    rows = rows[rows[c.ALLOCATED].to_numpy(dtype=bool)]
    if rows.empty:
        return _empty()
    rows = add_row_figures(with_failing(rows, since))
    keys = list(EFFICIENCY_KEYS)
    out = _sums(rows, keys, rows[c.USD_PER_HOUR].to_numpy(dtype="float64"))
    for name, (active, data) in ACTIVITY.items():
        out[name] = ratio_mean_pct(rows, keys, active, data)
    out["team"] = _teams(rows, keys)
    out = out.reset_index()
    throttled = _share(
        out["throttled_gpu_hours"].to_numpy(dtype="float64"),
        out[c.ALLOCATED_GPU_HOURS].to_numpy(dtype="float64"),
    )
    tensor_cores = _tensor_models(out["gpu_model"])
    causes = [
        efficiency_cause(e, s, t, d, th, tc)
        for e, s, t, d, th, tc in zip(
            out["engine_active_pct"],
            out["sm_active_pct"],
            out["tensor_active_pct"],
            out["dram_active_pct"],
            throttled,
            tensor_cores,
            strict=True,
        )
    ]
    out["cause"] = pd.Series(causes, index=out.index, dtype=object)
    return out[list(EFFICIENCY_COLUMNS)]


def efficiency_timeline(health: pd.DataFrame) -> pd.DataFrame:
    """One row per hour ``ts`` of the rows given (filter to one workload first): the activity
    means ``engine_active_pct``, ``sm_active_pct``, ``tensor_active_pct``, ``dram_active_pct``,
    GPU-hour weighted, NaN where no row of the hour has the reading."""
    names = ("engine_active_pct", "sm_active_pct", "tensor_active_pct", "dram_active_pct")
    if health.empty:
        return pd.DataFrame({n: pd.Series(dtype="float64") for n in ("ts", *names)})
    rows = add_row_figures(with_failing(prepare(health)))
    out = pd.DataFrame({n: ratio_mean_pct(rows, ["ts"], *ACTIVITY[n]) for n in names})
    out = out.rename_axis("ts").reset_index().sort_values("ts", ignore_index=True)
    out["ts"] = out["ts"].astype("int64")
    return out
