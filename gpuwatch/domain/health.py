"""GPU health and efficiency: NVIDIA's XID catalogue, the clock-event bitmask, and the fixed
limits that the roll-ups count against (docs/cost-model.md#health, docs/collectors.md#health).

Pure data and small pure functions; the analytics, the roll-up SQL, the alert rules and the
dashboard all read these, so a class or a bit is defined once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

XidClass = Literal["hardware", "driver", "app"]
State = Literal["healthy", "degraded", "failing", "app_error"]

#: States a GPU can be in, worst first (a GPU in several during a window reports the worst).
STATES: tuple[State, ...] = ("failing", "app_error", "degraded", "healthy")


@dataclass(frozen=True)
class Xid:
    code: int
    cls: XidClass
    meaning: str


#: NVIDIA's XID catalogue (docs.nvidia.com/deploy/xid-errors), the codes a fleet meets. ``cls``
#: is the catalogue's "possible cause": ``hardware`` or ``driver`` make the GPU ``failing``
#: (drain it), ``app`` is an error of the user's code (the GPU is fine). Codes not listed are
#: read as ``degraded`` with their number as the reason.
XID_CATALOGUE: dict[int, Xid] = {
    x.code: x
    for x in (
        Xid(8, "driver", "GPU stopped processing (driver timeout)"),
        Xid(13, "app", "Graphics engine exception (illegal instruction or address in user code)"),
        Xid(31, "app", "GPU memory page fault (user code accessed an invalid address)"),
        Xid(32, "driver", "Invalid or corrupted push buffer stream"),
        Xid(38, "driver", "Driver firmware error"),
        Xid(43, "app", "GPU stopped processing (user application fault)"),
        Xid(45, "app", "Preemptive cleanup after a previous error or a killed process"),
        Xid(48, "hardware", "Double-bit ECC error (uncorrectable)"),
        Xid(61, "driver", "Internal micro-controller breakpoint/warning"),
        Xid(62, "driver", "Internal micro-controller halt"),
        Xid(63, "hardware", "ECC page retirement or row remapping recording event"),
        Xid(64, "hardware", "ECC page retirement or row remapper recording failure"),
        Xid(68, "app", "Video processor exception"),
        Xid(69, "app", "Graphics engine class error"),
        Xid(74, "hardware", "NVLink error"),
        Xid(79, "hardware", "GPU has fallen off the bus"),
        Xid(92, "hardware", "High single-bit ECC error rate"),
        Xid(94, "hardware", "Contained ECC error (applications on the GPU must restart)"),
        Xid(95, "hardware", "Uncontained ECC error (GPU reset required)"),
        Xid(109, "app", "Context switch timeout"),
        Xid(119, "driver", "GSP RPC timeout"),
        Xid(120, "driver", "GSP error"),
        Xid(121, "hardware", "C2C link corrected error"),
        Xid(140, "hardware", "Unrecovered ECC error"),
        Xid(143, "hardware", "GPU initialization failure"),
    )
}

#: XIDs that make a GPU ``failing`` / ``app_error``, sorted (the roll-up SQL and alert regexes
#: are rendered from these).
FAILING_XIDS: tuple[int, ...] = tuple(
    sorted(code for code, x in XID_CATALOGUE.items() if x.cls in ("hardware", "driver"))
)
APP_XIDS: tuple[int, ...] = tuple(
    sorted(code for code, x in XID_CATALOGUE.items() if x.cls == "app")
)


def xid_class(code: int) -> XidClass | None:
    """The catalogue's class of an XID code, None when the catalogue does not list it.

    >>> xid_class(79), xid_class(13), xid_class(999)
    ('hardware', 'app', None)
    """
    entry = XID_CATALOGUE.get(int(code))
    return None if entry is None else entry.cls


# DCGM_FI_DEV_CLOCKS_EVENT_REASONS (older DCGM_FI_DEV_CLOCK_THROTTLE_REASONS): NVML's
# nvmlClocksEventReasons bits.
CLOCK_EVENT_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
#: Bits that mean the clocks were held down by heat.
THERMAL_MASK = 0x20 | 0x40
#: Bits that mean the clocks were held down by the power limit.
POWER_CAP_MASK = 0x4 | 0x80
#: Bits of the hardware slowdown (external power brake, overheating board).
HW_SLOWDOWN_MASK = 0x8
#: Throttling: thermal, power-cap or HW slowdown (the idle, clocks-setting and sync-boost bits
#: are not throttling).
THROTTLE_MASK = THERMAL_MASK | POWER_CAP_MASK | HW_SLOWDOWN_MASK


def decode_clock_events(mask: int) -> list[str]:
    """The names of the bits set in a clock-event bitmask, lowest bit first.

    >>> decode_clock_events(0x44)
    ['sw_power_cap', 'hw_thermal_slowdown']
    >>> decode_clock_events(0)
    []
    """
    value = int(mask)
    return [name for bit, name in CLOCK_EVENT_BITS.items() if value & bit]


def throttle_reasons(mask: int) -> list[str]:
    """The throttling classes of a bitmask: ``thermal_throttle``, ``power_throttle``,
    ``hw_slowdown`` (health reasons of contract section 7).

    >>> throttle_reasons(0x44), throttle_reasons(0x3)
    (['thermal_throttle', 'power_throttle'], [])
    """
    value = int(mask)
    out = []
    if value & THERMAL_MASK:
        out.append("thermal_throttle")
    if value & POWER_CAP_MASK:
        out.append("power_throttle")
    if value & HW_SLOWDOWN_MASK:
        out.append("hw_slowdown")
    return out


# Efficiency: fixed limits the hourly roll-ups count seconds against (not configurable: they
# are baked into stored roll-ups, like the contract's own definition of the rule).
#: Engine active at or above this ratio counts as busy.
BUSY_UTIL_RATIO = 0.5
#: Busy with SM active below this ratio: the engine is occupied but few SMs work.
LOW_SM_ACTIVE_RATIO = 0.25
#: Busy with tensor-pipe activity below this ratio: no tensor cores used.
NO_TENSOR_RATIO = 0.01
#: DRAM active at or above this ratio while SM active is low: memory-bound rather than
#: input-bound.
MEMORY_BOUND_DRAM_RATIO = 0.5

#: Model families without tensor cores (before Volta); every other NVIDIA data-centre GPU has them.
_NO_TENSOR_FAMILIES = ("K80", "K40", "M40", "M60", "M10", "P4", "P40", "P100", "P6")


def has_tensor_cores(model: str | None) -> bool | None:
    """Whether a GPU model has tensor cores (None: model unknown).

    >>> has_tensor_cores("NVIDIA H100 80GB HBM3"), has_tensor_cores("Tesla P100-PCIE-16GB")
    (True, False)
    """
    if not model:
        return None
    words = model.replace("-", " ").upper().split()
    return not any(word in _NO_TENSOR_FAMILIES for word in words)


@dataclass(frozen=True)
class HealthPolicy:
    """When a GPU counts as ``degraded`` (configuration section ``health``)."""

    #: Throttled (thermal, power cap, HW slowdown) in at least this share of its hours with
    #: data in the window, percent.
    throttle_degraded_pct: float = 10.0
    #: Correctable (single-bit) ECC errors in one hour that make a burst.
    sbe_burst_per_hour: int = 10
    #: PCIe replays in one hour at or above this.
    pcie_replays_per_hour: int = 100
    #: NVLink CRC, replay or recovery errors in one hour at or above this.
    nvlink_errors_per_hour: int = 1
