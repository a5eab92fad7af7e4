"""The efficiency and health families of the simulated dcgm-exporter (pure, no I/O).

Values of one series, from its sample row (:mod:`gpuwatch.simulate.health` computed them) and,
for the counters, from the closed forms of :mod:`gpuwatch.simulate.health_counters`:

- profiling gauges (``DCGM_FI_PROF_SM_ACTIVE``, ``_SM_OCCUPANCY``, ``_PIPE_TENSOR_ACTIVE``,
  ``_DRAM_ACTIVE``, ``_PCIE_TX_BYTES``/``_RX_BYTES``) on units that export
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``; ``DCGM_FI_PROF_NVLINK_TX_BYTES``/``_RX_BYTES`` on whole GPUs
  of NVLink models; a byte rate's TX is a fifth (PCIe) or half (NVLink) of the stored total;
- device readings on every series of a GPU: ``DCGM_FI_DEV_SM_CLOCK``, the clock-event bitmask
  (``DCGM_FI_DEV_CLOCKS_EVENT_REASONS``, or ``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS`` on the node
  whose exporter uses the older name), the ECC counters (nodes with ECC on), the PCIe replay
  counter, the NVLink error counters (whole GPUs of NVLink models) and
  ``DCGM_FI_DEV_ROW_REMAP_FAILURE`` (models with row remapping).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuwatch.simulate import health_counters as counters
from gpuwatch.simulate.layout_health import NodeHealth

if TYPE_CHECKING:
    from gpuwatch.simulate.fleet import GpuUnit, NodeSpec

SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"
SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"
SM_OCCUPANCY = "DCGM_FI_PROF_SM_OCCUPANCY"
TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
DRAM_ACTIVE = "DCGM_FI_PROF_DRAM_ACTIVE"
PCIE_TX = "DCGM_FI_PROF_PCIE_TX_BYTES"
PCIE_RX = "DCGM_FI_PROF_PCIE_RX_BYTES"
NVLINK_TX = "DCGM_FI_PROF_NVLINK_TX_BYTES"
NVLINK_RX = "DCGM_FI_PROF_NVLINK_RX_BYTES"
CLOCK_EVENTS = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
CLOCK_THROTTLE = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
SBE_VOL = "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"
SBE_AGG = "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL"
DBE_VOL = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
DBE_AGG = "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"
PCIE_REPLAY = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
NVLINK_ERRORS = (
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"

#: The families, in exposition order: name → (type, help text).
HEALTH_FAMILIES: dict[str, tuple[str, str]] = {
    CLOCK_EVENTS: ("gauge", "Current clock event reasons (bitmask)."),
    CLOCK_THROTTLE: ("gauge", "Current clock throttle reasons (bitmask)."),
    SBE_VOL: ("counter", "Total number of single-bit volatile ECC errors."),
    DBE_VOL: ("counter", "Total number of double-bit volatile ECC errors."),
    SBE_AGG: ("counter", "Total number of single-bit persistent ECC errors."),
    DBE_AGG: ("counter", "Total number of double-bit persistent ECC errors."),
    PCIE_REPLAY: ("counter", "Total number of PCIe retries."),
    NVLINK_ERRORS[0]: ("counter", "Total number of NVLink flow-control CRC errors."),
    NVLINK_ERRORS[1]: ("counter", "Total number of NVLink data CRC errors."),
    NVLINK_ERRORS[2]: ("counter", "Total number of NVLink retries."),
    NVLINK_ERRORS[3]: ("counter", "Total number of NVLink recovery errors."),
    ROW_REMAP_FAILURE: ("gauge", "Whether remapping of rows has failed."),
    SM_ACTIVE: ("gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
    SM_OCCUPANCY: ("gauge", "The ratio of number of warps resident on an SM."),
    TENSOR_ACTIVE: ("gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    DRAM_ACTIVE: ("gauge", "Ratio of cycles the device memory interface is active."),
    PCIE_TX: ("gauge", "The rate of data transmitted over the PCIe bus (in B/s)."),
    PCIE_RX: ("gauge", "The rate of data received over the PCIe bus (in B/s)."),
    NVLINK_TX: ("gauge", "The rate of data transmitted over NVLink (in B/s)."),
    NVLINK_RX: ("gauge", "The rate of data received over NVLink (in B/s)."),
}
_RATIOS = (
    ("sm_active_ratio", SM_ACTIVE),
    ("sm_occupancy_ratio", SM_OCCUPANCY),
    ("tensor_active_ratio", TENSOR_ACTIVE),
    ("dram_active_ratio", DRAM_ACTIVE),
)


def _split(total: float, tx_share: int, tx: str, rx: str) -> dict[str, str]:
    """A byte rate's TX (``total // tx_share``) and RX (the rest): they add up to ``total``."""
    whole = int(total)
    sent = whole // tx_share
    return {tx: str(sent), rx: str(whole - sent)}


def profiling_values(row: Any) -> dict[str, str]:
    """The profiling gauges of a unit's (or slot's) sample row; none where not exported."""
    values: dict[str, str] = {}
    if math.isnan(float(row.sm_active_ratio)):
        return values
    for column, family in _RATIOS:
        values[family] = f"{float(getattr(row, column)):.6f}"
    values |= _split(float(row.pcie_bytes_per_s), 5, PCIE_TX, PCIE_RX)
    nvlink = float(row.nvlink_bytes_per_s)
    if not math.isnan(nvlink):
        values |= _split(nvlink, 2, NVLINK_TX, NVLINK_RX)
    return values


def summed_profiling(rows: Iterable[Any], util_ratio: float) -> dict[str, str]:
    """The profiling gauges of a shared GPU's device series: the sum over its slots, each ratio
    at most the device's engine activity ``util_ratio``."""
    rows = list(rows)
    if math.isnan(float(rows[0].sm_active_ratio)):
        return {}
    values = {
        family: f"{min(util_ratio, sum(float(getattr(r, column)) for r in rows)):.6f}"
        for column, family in _RATIOS
    }
    pcie = sum(float(r.pcie_bytes_per_s) for r in rows)
    return values | _split(pcie, 5, PCIE_TX, PCIE_RX)


def device_values(node: NodeSpec, unit: GpuUnit, row: Any, ts: int) -> dict[str, str]:
    """The readings of the unit's physical GPU: SM clock, clock events, error counters."""
    events = CLOCK_THROTTLE if node.health.legacy_clock_field else CLOCK_EVENTS
    values = {SM_CLOCK: str(int(row.sm_clock_mhz)), events: str(int(row.clock_events))}
    whole = unit.mig_gi_id < 0
    if unit.failure is None and unit.noise is None:
        return values | _zero_counters(node.health, whole)
    return values | _counter_values(node.health, whole, unit, ts)


@lru_cache(maxsize=16)
def _zero_counters(health: NodeHealth, whole_gpu: bool) -> dict[str, str]:
    return {family: "0" for family in _counter_families(health, whole_gpu)}


def _counter_families(health: NodeHealth, whole_gpu: bool) -> list[str]:
    families = [SBE_VOL, DBE_VOL, SBE_AGG, DBE_AGG] if health.ecc else []
    families.append(PCIE_REPLAY)
    if health.nvlink and whole_gpu:
        families += NVLINK_ERRORS
    if health.row_remap:
        families.append(ROW_REMAP_FAILURE)
    return families


def _counter_values(health: NodeHealth, whole: bool, unit: GpuUnit, ts: int) -> dict[str, str]:
    """Counter readings of a GPU with events (the failing GPU, a noisy one)."""
    totals = counters.totals(unit, np.array([ts], dtype=np.int64))
    readings = {
        SBE_VOL: totals.sbe_volatile,
        DBE_VOL: totals.dbe_volatile,
        SBE_AGG: totals.sbe_aggregate,
        DBE_AGG: totals.dbe_aggregate,
        PCIE_REPLAY: totals.pcie_replays,
    }
    values = dict(_zero_counters(health, whole))
    for family in values:
        if family in readings:
            values[family] = str(int(readings[family][0]))
    return values
