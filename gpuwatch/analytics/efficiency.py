"""Real efficiency of the GPU-hours a workload held: engine, SM, tensor and DRAM activity,
throttled and failing hours, and the busy-but-inefficient hours with their likely cause
(docs/cost-model.md#health-and-efficiency).

Pure: the input is the health roll-up summed per (GPU unit, pod) over the window
(:data:`gpuwatch.domain.frames.HEALTH_SUM_COLUMNS`, from the store or from hourly rows by
:func:`~gpuwatch.analytics.health_sums.health_sums`). A mean is GPU-hour weighted over the
hours with its reading and NaN (unavailable) where none has it. The utilization reading is the
engine's activity only on rows with a profiling reading (SM, SM occupancy, tensor or DRAM):
elsewhere it is ``DCGM_FI_DEV_GPU_UTIL`` and engine activity is unavailable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.health_rows import SHARE, Groups, divide, group_rows, prepare
from gpuwatch.analytics.health_sums import health_sums, row_terms
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
#: Mean activity columns: name → prefix of its sums
#: (:data:`~gpuwatch.domain.frames.HEALTH_SUM_READINGS`).
ACTIVITY: dict[str, str] = {
    "engine_active_pct": "engine",
    "sm_active_pct": "sm_active",
    "sm_occupancy_pct": "sm_occupancy",
    "tensor_active_pct": "tensor_active",
    "dram_active_pct": "dram_active",
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


def _f(frame: pd.DataFrame, name: str) -> np.ndarray:
    values = frame[name].to_numpy(dtype="float64", na_value=np.nan)
    return np.asarray(np.nan_to_num(values), dtype="float64")


def _share(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return divide(num, den)


def _tensor_models(models: pd.Series) -> np.ndarray:
    """Whether each row's GPU model has tensor cores (unknown: no)."""
    codes, uniques = pd.factorize(models.astype(object), use_na_sentinel=True)
    known = np.array([has_tensor_cores(str(m)) is True for m in uniques] + [False], dtype=bool)
    return known[np.where(codes < 0, len(uniques), codes)]


def _figures(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per prepared row of the sums (:func:`~gpuwatch.analytics.health_sums.health_sums`):
    throttled, failing and inefficient GPU-hours (seconds × the unit's share ÷ 3600)."""
    per_s = rows[SHARE].to_numpy(dtype="float64") / HOUR_S
    tensor = _tensor_models(rows["gpu_model"])
    inefficient = np.where(tensor, _f(rows, "inefficient_data_s"), _f(rows, "low_sm_data_s"))
    return {
        "throttled_gpu_hours": per_s * _f(rows, "throttled_data_s"),
        "failing_gpu_hours": per_s * _f(rows, "fail_s"),
        "inefficient_gpu_hours": per_s * inefficient,
    }


def _activity(rows: pd.DataFrame, groups: Groups) -> dict[str, np.ndarray]:
    """The activity means per group in percent, GPU-hour weighted over the hours with the
    reading; NaN (unavailable) where no hour of the group has it."""
    per_s = rows[SHARE].to_numpy(dtype="float64") / HOUR_S
    out = {}
    for name, prefix in ACTIVITY.items():
        has = groups.sum(_f(rows, f"{prefix}_hours")) > 0
        weighted = groups.sum(per_s * _f(rows, f"{prefix}_weighted_s"))
        mean = divide(100.0 * weighted, groups.sum(per_s * _f(rows, f"{prefix}_weight_s")), np.nan)
        out[name] = np.where(has, mean, np.nan)
    return out


def _sums(rows: pd.DataFrame, groups: Groups, figures: dict[str, np.ndarray]) -> pd.DataFrame:
    out = groups.keys.copy()
    price = rows[c.USD_PER_HOUR].to_numpy(dtype="float64")
    out[c.ALLOCATED_GPU_HOURS] = groups.sum(rows[c.GPU_HOURS].to_numpy(dtype="float64"))
    clocked = groups.sum(_f(rows, "clock_data_s")) > 0
    throttled = groups.sum(figures["throttled_gpu_hours"])
    out["throttled_gpu_hours"] = np.where(clocked, throttled, np.nan)
    out["failing_gpu_hours"] = groups.sum(figures["failing_gpu_hours"])
    out["failing_cost_usd"] = groups.sum(figures["failing_gpu_hours"] * price)
    out["inefficient_gpu_hours"] = groups.sum(figures["inefficient_gpu_hours"])
    out["inefficient_cost_usd"] = groups.sum(figures["inefficient_gpu_hours"] * price)
    return out


def _teams(rows: pd.DataFrame, groups: Groups) -> np.ndarray:
    """The team with the most GPU-hours among each group's rows (ties: the first by name)."""
    team_codes, teams = pd.factorize(rows["team"].astype(object), sort=True, use_na_sentinel=False)
    parts = pd.DataFrame({"g": groups.codes, "t": team_codes,
                          "h": rows[c.GPU_HOURS].to_numpy(dtype="float64")})  # fmt: skip
    summed = parts.groupby(["g", "t"], sort=True).sum().reset_index()
    best = summed.sort_values("h", ascending=False, kind="stable").drop_duplicates("g")
    out = np.empty(groups.n, dtype=object)
    out[best["g"].to_numpy()] = np.asarray(teams, dtype=object)[best["t"].to_numpy()]
    return out


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
    if dram_pct >= 100 * MEMORY_BOUND_DRAM_RATIO:
        return CAUSES[1]
    return CAUSES[2] if low_sm else CAUSES[3]


def _empty() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=object) for name in EFFICIENCY_COLUMNS})


def _causes(out: pd.DataFrame) -> pd.Series:
    """:func:`efficiency_cause` of each workload row."""
    throttled = _share(
        np.nan_to_num(out["throttled_gpu_hours"].to_numpy(dtype="float64")),
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
    return pd.Series(causes, index=out.index, dtype=object)


def workload_efficiency(
    health: pd.DataFrame, price_book: PriceBook, failing_since: pd.Series | None = None
) -> pd.DataFrame:
    """:func:`efficiency_of_sums` of the hourly health rows given, summed per (unit, pod) by
    :func:`~gpuwatch.analytics.health_sums.health_sums`; failing from each GPU's
    ``failing_since`` (epoch seconds by (cluster, gpu_uuid), else the rows' own first failing
    events)."""
    return efficiency_of_sums(health_sums(health, failing_since), price_book)


def efficiency_of_sums(sums: pd.DataFrame, price_book: PriceBook) -> pd.DataFrame:
    """One row per :data:`EFFICIENCY_KEYS` of the allocated (unit, pod) sums
    (:data:`~gpuwatch.domain.frames.HEALTH_SUM_COLUMNS`): ``team``, ``allocated_gpu_hours``,
    the activity means in percent (NaN: unavailable), ``throttled_gpu_hours`` (NaN without
    clock-event readings), ``failing_gpu_hours`` and ``failing_cost_usd``,
    ``inefficient_gpu_hours``, ``inefficient_cost_usd`` and ``cause``."""
    if sums.empty:
        return _empty()
    rows = prepare(sums, price_book)
    rows = rows[rows[c.ALLOCATED].to_numpy(dtype=bool)]
    if rows.empty:
        return _empty()
    groups = group_rows(rows, list(EFFICIENCY_KEYS))
    out = _sums(rows, groups, _figures(rows))
    for name, values in _activity(rows, groups).items():
        out[name] = values
    out["team"] = _teams(rows, groups)
    out["cause"] = _causes(out)
    return out[list(EFFICIENCY_COLUMNS)]


def efficiency_timeline(health: pd.DataFrame) -> pd.DataFrame:
    """One row per hour ``ts`` of the rows given (filter to one workload first): the activity
    means ``engine_active_pct``, ``sm_active_pct``, ``tensor_active_pct``, ``dram_active_pct``,
    GPU-hour weighted, NaN where no row of the hour has the reading."""
    names = ("engine_active_pct", "sm_active_pct", "tensor_active_pct", "dram_active_pct")
    if health.empty:
        return pd.DataFrame({n: pd.Series(dtype="float64") for n in ("ts", *names)})
    rows = prepare(row_terms(health))
    groups = group_rows(rows, ["ts"])
    activity = _activity(rows, groups)
    out = groups.keys.copy()
    for name in names:
        out[name] = activity[name]
    out = out.sort_values("ts", ignore_index=True)
    out["ts"] = out["ts"].astype("int64")
    return out


@dataclass(frozen=True)
class EfficiencyMeasures:
    """One workload's row of :func:`workload_efficiency`, as the recommendation rules read it."""

    allocated_gpu_hours: float
    engine_active_pct: float
    sm_active_pct: float
    tensor_active_pct: float
    dram_active_pct: float
    throttled_gpu_hours: float
    inefficient_gpu_hours: float
    inefficient_cost_usd: float
    cause: str | None

    @property
    def throttled_pct(self) -> float:
        """Throttled share of the allocated GPU-hours, percent (NaN without clock data)."""
        if self.allocated_gpu_hours <= 0:
            return math.nan
        return 100.0 * self.throttled_gpu_hours / self.allocated_gpu_hours


def key_of(values: tuple[object, ...]) -> tuple[str, ...]:
    """A workload key as text (<NA> as ""), to match rows of different frames."""
    return tuple("" if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))
                 else str(v) for v in values)  # fmt: skip


def efficiency_measures(frame: pd.DataFrame) -> dict[tuple[str, ...], EfficiencyMeasures]:
    """The rows of :func:`workload_efficiency` by workload key (:func:`key_of`)."""
    out = {}
    for row in frame.to_dict("records"):
        cause = row["cause"]
        out[key_of(tuple(row[k] for k in EFFICIENCY_KEYS))] = EfficiencyMeasures(
            allocated_gpu_hours=float(row[c.ALLOCATED_GPU_HOURS]),
            engine_active_pct=float(row["engine_active_pct"]),
            sm_active_pct=float(row["sm_active_pct"]),
            tensor_active_pct=float(row["tensor_active_pct"]),
            dram_active_pct=float(row["dram_active_pct"]),
            throttled_gpu_hours=float(row["throttled_gpu_hours"]),
            inefficient_gpu_hours=float(row["inefficient_gpu_hours"]),
            inefficient_cost_usd=float(row["inefficient_cost_usd"]),
            cause=cause if isinstance(cause, str) else None,
        )
    return out
