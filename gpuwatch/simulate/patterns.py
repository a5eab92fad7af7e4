"""Workload shapes: vectorised utilization and memory over arrays of instants (UTC).

Every function is element-wise in time: its value at an instant depends only on that instant and
on noise drawn for it (see ``noise``), never on the window it is computed in. Arrays are shaped
``(units, instants)``; ``ts`` is a 1-D int64 array of epoch seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gpuwatch.domain.durations import DAY_S, HOUR_S

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
BOOL = NDArray[np.bool_]

SHAPES = ("flat", "office", "diurnal")
#: Share of an office-hours half hour in which a notebook user is actually computing.
OFFICE_BUSY_SHARE = 0.8
WEEKEND_TRAFFIC = 0.6


@dataclass(frozen=True)
class Pattern:
    """How a workload uses each GPU unit it holds.

    ``shape``: ``flat`` (steady between the bounds, e.g. training), ``office`` (busy in working
    hours on weekdays, idle at night and at weekends, e.g. notebooks) or ``diurnal`` (follows a
    daily traffic curve peaking at ``peak_hour`` UTC, lower at weekends, e.g. inference).
    ``util_*`` are ratios 0-1; ``mem_*`` fractions of the unit's memory. Outside activity (and on
    the units beyond ``busy_units`` of a pod) utilization stays below ``idle_util`` and memory at
    ``mem_idle``.
    """

    shape: str
    util_lo: float
    util_hi: float
    mem_lo: float
    mem_hi: float
    idle_util: float = 0.01
    mem_idle: float = 0.0
    busy_units: int | None = None
    peak_hour: float = 15.0
    work_start_h: float = 9.0
    work_end_h: float = 18.0

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"unknown pattern shape {self.shape!r}: use one of {SHAPES}")
        bounds = (self.util_lo, self.util_hi, self.mem_lo, self.mem_hi, self.mem_idle)
        if not all(0.0 <= b <= 1.0 for b in bounds) or self.util_lo > self.util_hi:
            raise ValueError(f"invalid pattern bounds in {self}")


def hour_of_day(ts: I64) -> F64:
    """Hour of the UTC day, fractional (0 ≤ h < 24)."""
    return (ts % DAY_S) / HOUR_S


def day_of_week(ts: I64) -> I64:
    """ISO weekday minus one: Monday 0 … Sunday 6 (1970-01-01 was a Thursday)."""
    return ((ts // DAY_S) + 3) % 7


def working_hours(ts: I64, start_h: float, end_h: float) -> BOOL:
    """Whether each instant is within working hours on a weekday (UTC)."""
    hour = hour_of_day(ts)
    weekday: BOOL = day_of_week(ts) < 5
    return weekday & (hour >= start_h) & (hour < end_h)


def traffic(ts: I64, peak_hour: float) -> F64:
    """Daily traffic in [0, 1]: 1 at ``peak_hour``, 0 twelve hours away, damped at weekends."""
    angle = 2.0 * np.pi * (hour_of_day(ts) - peak_hour) / 24.0
    curve = 0.5 + 0.5 * np.cos(angle)
    weekend = day_of_week(ts) >= 5
    result: F64 = np.where(weekend, curve * WEEKEND_TRAFFIC, curve)
    return result


def activity(pattern: Pattern, ts: I64, slow: F64) -> F64:
    """How active the workload is at each instant, 0-1, shaped like ``slow``."""
    if pattern.shape == "flat":
        return np.ones_like(slow)
    if pattern.shape == "office":
        hours = working_hours(ts, pattern.work_start_h, pattern.work_end_h)
        busy = hours[None, :] & (slow >= 1.0 - OFFICE_BUSY_SHARE)
        return busy.astype(np.float64)
    return np.broadcast_to(traffic(ts, pattern.peak_hour)[None, :], slow.shape).copy()


def utilization(pattern: Pattern, act: F64, busy: BOOL, slow: F64, fast: F64) -> F64:
    """Utilization ratio per (unit, instant); ``busy`` marks the pod's units that do work."""
    span = pattern.util_hi - pattern.util_lo
    idle = pattern.idle_util * fast
    if pattern.shape == "diurnal":
        level = pattern.util_lo + span * (0.7 * act + 0.15 * slow + 0.15 * fast)
    elif pattern.shape == "flat":
        level = pattern.util_lo + span * (0.6 * slow + 0.4 * fast)
    else:
        active = pattern.util_lo + span * (0.5 * slow + 0.5 * fast)
        level = np.where(act > 0.0, active, idle)
    util: F64 = np.where(busy[:, None], level, idle)
    return np.clip(util, 0.0, 1.0)


def memory_fraction(pattern: Pattern, act: F64, busy: BOOL, slow: F64, fast: F64) -> F64:
    """Framebuffer used as a fraction of the unit's memory, per (unit, instant)."""
    span = pattern.mem_hi - pattern.mem_lo
    level = pattern.mem_lo + span * (0.85 * slow + 0.15 * fast)
    resting = pattern.mem_idle * (0.98 + 0.02 * fast)
    if pattern.shape == "office":
        level = np.where(act > 0.0, level, resting)
    mem: F64 = np.where(busy[:, None], level, resting)
    return np.clip(mem, 0.0, 1.0)


def busy_mask(pattern: Pattern, n_units: int, rotation: int) -> BOOL:
    """Which of a pod's ``n_units`` units work: the first ``busy_units`` after ``rotation``."""
    if pattern.busy_units is None:
        return np.ones(n_units, dtype=np.bool_)
    order = (np.arange(n_units) - rotation) % n_units
    result: BOOL = order < pattern.busy_units
    return result


def power_w(device_util: F64, idle_w: F64, max_w: F64, fast: F64) -> F64:
    """Board power from device utilization, per physical GPU: idle draw plus a concave rise."""
    load = np.clip(device_util, 0.0, 1.0) ** 0.85
    watts: F64 = idle_w[:, None] + (max_w - idle_w)[:, None] * load * (0.94 + 0.06 * fast)
    return np.round(watts, 3)


def temperature_c(device_util: F64, offset_c: F64, slow: F64) -> F64:
    """GPU temperature in °C (whole degrees, as DCGM reports it)."""
    load = np.clip(device_util, 0.0, 1.0)
    celsius: F64 = 31.0 + 46.0 * load + 4.0 * slow + offset_c[:, None]
    return np.round(celsius)
