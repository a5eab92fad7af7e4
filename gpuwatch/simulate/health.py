"""Efficiency and health readings of a simulated fleet, per (unit, instant) (pure, vectorised).

The sample rows of :mod:`gpuwatch.simulate.generate` carry them under the names of
``gpuwatch.store.models.HEALTH_SAMPLE_FIELDS``, as ``gpuwatch collect`` would store them from
the simulated exporter (NaN: no reading):

- profiling ratios (SM active, SM occupancy, tensor-pipe active, DRAM active) and PCIe bytes per
  second on units that export ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, from the unit's utilization and
  its holder's :class:`~gpuwatch.simulate.layout_health.Efficiency`; NVLink bytes per second on
  whole GPUs of NVLink models (0 unless the holding pod has several GPUs);
- the SM clock (MHz) and the clock-event bitmask of every unit's physical GPU: the idle bit
  (``0x1``) and idle clock while the GPU is idle, the thermal (``0x20``) or power-cap (``0x4``)
  bit and a lowered clock while the throttling node's GPUs are busy in their hours;
- counter increases over the step (``health_counters``), NaN where there is none (0: the
  collector asks only for non-zero increases) or the unit reported nothing a step earlier.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from gpuwatch.domain.durations import DAY_S, HOUR_S
from gpuwatch.domain.health import BUSY_UTIL_RATIO
from gpuwatch.simulate import health_counters as counters
from gpuwatch.simulate.layout_health import (
    DEFAULT_EFFICIENCY,
    POWER_CAP_CLOCK_SHARE,
    POWER_CAP_HOURS,
    THERMAL_CLOCK_SHARE,
    THERMAL_HOURS,
)
from gpuwatch.store.models import HEALTH_SAMPLE_FIELDS

if TYPE_CHECKING:
    from gpuwatch.simulate.fleet import Fleet, GpuUnit
    from gpuwatch.simulate.pods import PodInstance

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
BOOL = NDArray[np.bool_]

#: Clock-event bits the simulation sets (``domain.health.CLOCK_EVENT_BITS``): GPU idle, SW
#: thermal slowdown, SW power cap.
GPU_IDLE_BIT = 0x1
THERMAL_BIT = 0x20
POWER_CAP_BIT = 0x4
#: Engine activity at or below which a GPU idles (idle clock, idle bit).
IDLE_UTIL_RATIO = 0.05
BOOST_MHZ = {"A100": 1410, "H100": 1980, "L40S": 2520, "L4": 2040, "T4": 1590}
DEFAULT_BOOST_MHZ = 1400
IDLE_MHZ = 210
#: PCIe bytes per second (TX + RX) at full engine activity; NVLink likewise, for a pod with
#: several GPUs.
PCIE_PEAK_BYTES_PER_S = 6.0e9
NVLINK_PEAK_BYTES_PER_S = 8.0e10
COUNTER_FIELDS = ("ecc_sbe_count", "ecc_dbe_count", "pcie_replay_count", "nvlink_error_count")


def boost_mhz(model_name: str) -> int:
    """The boost clock of a GPU model (by the family in its name)."""
    family = next((f for f in BOOST_MHZ if f in model_name), None)
    return DEFAULT_BOOST_MHZ if family is None else BOOST_MHZ[family]


@dataclass(frozen=True)
class HealthUnits:
    """Per unit (index = position in ``Fleet.units``): what it exports; per physical GPU: its
    boost clock and whether it throttles; the units with counter events."""

    prof: BOOL
    ecc: BOOL
    nvlink: BOOL
    boost_mhz: F64
    throttling: BOOL
    special: tuple[int, ...]


def health_units(fleet: Fleet) -> HealthUnits:
    nodes = {(n.cluster, n.name): n for n in fleet.nodes}
    node_of = [nodes[u.cluster, u.node] for u in fleet.units]
    starts = np.flatnonzero(np.diff([u.physical for u in fleet.units], prepend=-1))
    first = [fleet.units[i] for i in starts]
    return HealthUnits(
        prof=np.array([u.util_signal == "prof" for u in fleet.units], dtype=np.bool_),
        ecc=np.array([n.health.ecc for n in node_of], dtype=np.bool_),
        nvlink=np.array(
            [
                n.health.nvlink and u.mig_gi_id < 0
                for u, n in zip(fleet.units, node_of, strict=True)
            ],
            dtype=np.bool_,
        ),
        boost_mhz=np.array([boost_mhz(u.model_name) for u in first], dtype=np.float64),
        throttling=np.array(
            [nodes[u.cluster, u.node].health.throttling for u in first], dtype=np.bool_
        ),
        special=tuple(
            i for i, u in enumerate(fleet.units) if u.failure is not None or u.noise is not None
        ),
    )


def health_columns(
    fleet: Fleet,
    ts: I64,
    step_s: int,
    util: tuple[F64, F64],
    holder: NDArray[np.int32],
    instances: list[PodInstance],
    reported: tuple[BOOL, BOOL],
) -> dict[str, F64]:
    """The health columns of the sample rows kept (``reported[0]``, unit × instant, flattened
    unit by unit), in ``HEALTH_SAMPLE_FIELDS`` order. ``util``: each unit's and each physical
    GPU's utilization; ``holder``: the index in ``instances`` of the pod holding each unit
    (-1: none); ``reported[1]``: whether each unit reported a step earlier. One grid at a time:
    the columns are the demo's largest arrays."""
    units, (unit_util, device_util) = health_units(fleet), util
    keep = reported[0].ravel()
    columns = {
        name: grid.ravel()[keep]
        for name, grid in _profiling(fleet, units, unit_util, holder, instances)
    }
    physical = np.array([u.physical for u in fleet.units], dtype=np.int64)
    clock, events = clocks(units, device_util, ts)
    columns["sm_clock_mhz"] = clock[physical].ravel()[keep]
    columns["clock_events"] = events[physical].ravel()[keep]
    increases = counter_increases(fleet, units, ts, step_s, reported[1])
    position = (np.cumsum(keep) - 1).reshape(reported[0].shape)
    for name in (*COUNTER_FIELDS, "row_remap_failure"):
        columns[name] = np.full(int(keep.sum()), np.nan)
        for row, values in increases.get(name, {}).items():
            mine = reported[0][row]
            columns[name][position[row][mine]] = values[mine]
    return {name: columns[name] for name in HEALTH_SAMPLE_FIELDS}


def _profiling(
    fleet: Fleet,
    units: HealthUnits,
    util: F64,
    holder: NDArray[np.int32],
    instances: list[PodInstance],
) -> Iterator[tuple[str, F64]]:
    """The profiling ratios and PCIe/NVLink bytes per (unit, instant), NaN where not exported,
    one field at a time."""
    workloads = [*(w.efficiency for w in fleet.workloads), DEFAULT_EFFICIENCY]
    of_instance = np.array([i.workload for i in instances] + [len(fleet.workloads)], np.int64)
    efficiency = of_instance[holder]
    prof = units.prof[:, None]

    def share(name: str) -> F64:
        return np.array([getattr(e, name) for e in workloads], dtype=np.float64)[efficiency]

    sm = np.round(util * share("sm_per_util"), 6)
    yield "sm_active_ratio", np.where(prof, sm, np.nan)
    yield "sm_occupancy_ratio", np.where(prof, np.round(sm * share("occupancy_per_sm"), 6), np.nan)
    yield "tensor_active_ratio", np.where(prof, np.round(sm * share("tensor_per_sm"), 6), np.nan)
    yield "dram_active_ratio", np.where(prof, np.round(util * share("dram_per_util"), 6), np.nan)
    yield "pcie_bytes_per_s", np.where(prof, np.round(util * PCIE_PEAK_BYTES_PER_S), np.nan)
    several = np.array([len(i.units) > 1 for i in instances] + [False], dtype=np.bool_)[holder]
    nvlink = np.where(several, np.round(util * NVLINK_PEAK_BYTES_PER_S), 0.0)
    yield "nvlink_bytes_per_s", np.where(units.nvlink[:, None], nvlink, np.nan)


def _in_hours(ts: I64, hours: tuple[float, float]) -> BOOL:
    hour = (ts % DAY_S) / HOUR_S
    result: BOOL = (hour >= hours[0]) & (hour < hours[1])
    return result


def clocks(units: HealthUnits, device_util: F64, ts: I64) -> tuple[F64, F64]:
    """``(SM clock MHz, clock-event bitmask)`` per (physical GPU, instant)."""
    idle = device_util <= IDLE_UTIL_RATIO
    held = units.throttling[:, None] & (device_util >= BUSY_UTIL_RATIO)
    thermal = held & _in_hours(ts, THERMAL_HOURS)[None, :]
    power = held & _in_hours(ts, POWER_CAP_HOURS)[None, :] & ~thermal
    events = (
        np.where(idle, GPU_IDLE_BIT, 0)
        | np.where(thermal, THERMAL_BIT, 0)
        | np.where(power, POWER_CAP_BIT, 0)
    )
    share = np.where(thermal, THERMAL_CLOCK_SHARE, np.where(power, POWER_CAP_CLOCK_SHARE, 1.0))
    clock = np.where(idle, float(IDLE_MHZ), np.round(units.boost_mhz[:, None] * share))
    return clock, events.astype(np.float64)


def apply_xid_events(
    fleet: Fleet, xid: I64, ts: I64, holder: NDArray[np.int32], instances: list[PodInstance]
) -> None:
    """Write the scenarios' XIDs into ``xid`` (unit × instant): each workload's daily event on
    its replica's units while that pod holds them, and the failing GPUs' XID while they report."""
    for index, inst in enumerate(instances):
        event = fleet.workloads[inst.workload].xid_event
        if event is None or inst.replica != event.replica:
            continue
        rows = np.array(inst.units)
        on = ((ts - event.start_s) % DAY_S < event.run_s)[None, :] & (holder[rows] == index)
        xid[rows] = np.where(on, event.code, xid[rows])
    for row, unit in enumerate(fleet.units):
        if unit.failure is not None:
            on = counters.failed_reporting(unit.failure, ts)
            xid[row] = np.where(on, unit.failure.xid, xid[row])


def silent(fleet: Fleet, ts: I64) -> BOOL:
    """Where a unit has no series: a failed GPU's silence (unit × instant)."""
    out = np.zeros((len(fleet.units), len(ts)), dtype=np.bool_)
    for row, unit in enumerate(fleet.units):
        if unit.failure is not None:
            out[row] = counters.failed_silent(unit.failure, ts)
    return out


def counter_increases(
    fleet: Fleet, units: HealthUnits, ts: I64, step_s: int, reported_before: BOOL
) -> dict[str, dict[int, F64]]:
    """Per counter field and unit with counter events (other units count nothing), the increase
    over the step ending at each instant, NaN where it is 0 or the unit had no reading a step
    earlier (``reported_before``, unit × instant); ECC counts only on units that export them.
    NVLink error counts are always 0."""
    out: dict[str, dict[int, F64]] = {name: {} for name in COUNTER_FIELDS}
    for row in units.special:
        unit: GpuUnit = fleet.units[row]
        now, before = counters.totals(unit, ts), counters.totals(unit, ts - step_s)
        pairs = {"pcie_replay_count": (now.pcie_replays, before.pcie_replays)}
        if units.ecc[row]:
            pairs["ecc_sbe_count"] = (now.sbe_volatile, before.sbe_volatile)
            pairs["ecc_dbe_count"] = (now.dbe_volatile, before.dbe_volatile)
        for name, (value, previous) in pairs.items():
            step = counters.increase(value, previous)
            keep = reported_before[row] & (step != 0)
            out[name][row] = np.where(keep, step.astype(np.float64), np.nan)
    return out
