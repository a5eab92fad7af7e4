"""The simulated GPUs' error counters, as closed forms of time (pure, vectorised over instants).

A counter's reading at an instant depends on nothing but the GPU and that instant: the exporter
serves it at any second, and the demo store keeps its increase over each step, exactly what
``gpuwatch collect`` computes from the served readings (the previous step's reading subtracted;
where the counter went down, a reset, the new reading itself).

- Volatile counts (``DCGM_FI_DEV_ECC_*_VOL_TOTAL``, the PCIe replay and NVLink error counters)
  run from the node's last driver load (``layout_health.DRIVER_LOAD_EPOCH_TS`` + k × 90 days);
  aggregate counts (``*_AGG_TOTAL``) from ``layout_health.AGGREGATE_EPOCH_TS``.
- A noisy GPU (``GpuUnit.noise``) counts one event at every ``phase_s + k × every_s``.
- The failing GPU (``GpuUnit.failure``) counts one double-bit error at each failure; its
  volatile count stays 1 until it is reset at the end of its silence, its aggregate count grows
  by one a week.

Every other counter reads 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from gpuwatch.simulate.layout_health import (
    AGGREGATE_EPOCH_TS,
    DRIVER_LOAD_EPOCH_TS,
    DRIVER_LOAD_PERIOD_S,
    CounterNoise,
    Failure,
)

if TYPE_CHECKING:
    from gpuwatch.simulate.fleet import GpuUnit

I64 = NDArray[np.int64]
BOOL = NDArray[np.bool_]


@dataclass(frozen=True)
class Totals:
    """A GPU's counter readings at each instant of an array."""

    sbe_volatile: I64
    sbe_aggregate: I64
    dbe_volatile: I64
    dbe_aggregate: I64
    pcie_replays: I64


def last_driver_load(ts: I64) -> I64:
    """The instant of the last driver load at or before each instant."""
    since: I64 = (ts - DRIVER_LOAD_EPOCH_TS) % DRIVER_LOAD_PERIOD_S
    return ts - since


def _since(ts: I64, origin: I64 | int, every_s: int, phase_s: int) -> I64:
    """Events at ``phase_s + k × every_s`` in ``(origin, ts]``."""
    counted: I64 = np.maximum(0, (ts - phase_s) // every_s - (origin - phase_s) // every_s)
    return counted


def _phase(failure: Failure) -> tuple[int, int]:
    """``(phase, period)``: failures happen at ``phase + k × period``."""
    schedule = failure.schedule
    return schedule.offset_s + schedule.start_s, schedule.period_s


def failed_reporting(failure: Failure, ts: I64) -> BOOL:
    """Whether each instant lies between a failure and the end of its reporting."""
    phase, period = _phase(failure)
    result: BOOL = (ts - phase) % period < failure.schedule.max_run_s
    return result


def failed_silent(failure: Failure, ts: I64) -> BOOL:
    """Whether each instant lies in the silence after a failure's reporting (no series)."""
    phase, period = _phase(failure)
    into = (ts - phase) % period
    run = failure.schedule.max_run_s
    result: BOOL = (into >= run) & (into < run + failure.silent_s)
    return result


def _noise(noise: CounterNoise | None, counter: str, ts: I64) -> tuple[I64, I64]:
    """``(volatile, aggregate)`` readings of one noisy counter (zeros when not this one)."""
    if noise is None or noise.counter != counter:
        zero = np.zeros_like(ts)
        return zero, zero
    volatile = _since(ts, last_driver_load(ts), noise.every_s, noise.phase_s)
    return volatile, _since(ts, AGGREGATE_EPOCH_TS, noise.every_s, noise.phase_s)


def _dbe(failure: Failure | None, ts: I64) -> tuple[I64, I64]:
    """``(volatile, aggregate)`` double-bit error readings."""
    if failure is None:
        zero = np.zeros_like(ts)
        return zero, zero
    phase, period = _phase(failure)
    aggregate = _since(ts, AGGREGATE_EPOCH_TS, period, phase)
    since_failure = (ts - phase) % period
    live = (since_failure < failure.schedule.max_run_s + failure.silent_s) & (aggregate > 0)
    return live.astype(np.int64), aggregate


def totals(unit: GpuUnit, ts: I64) -> Totals:
    """The unit's GPU's counter readings at the instants ``ts`` (int64 epoch seconds)."""
    ts = np.asarray(ts, dtype=np.int64)
    sbe = _noise(unit.noise, "ecc_sbe", ts)
    replays, _ = _noise(unit.noise, "pcie_replay", ts)
    dbe = _dbe(unit.failure, ts)
    return Totals(sbe[0], sbe[1], dbe[0], dbe[1], replays)


def increase(now: I64, before: I64) -> I64:
    """A counter's increase between two readings: the difference, or the new reading where the
    counter went down (a reset), as the collector computes it."""
    result: I64 = np.where(now < before, now, now - before)
    return result
