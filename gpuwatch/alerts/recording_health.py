"""Recording rules of GPU health: clock throttling, ECC, NVLink, PCIe and XID codes.

Every rule is one series per DCGM series, with the normalised labels
(:mod:`gpuwatch.alerts.normalise`); the alerts of :mod:`gpuwatch.alerts.health` and the
GPU-health dashboard read them. The clock-event bits and the XID catalogue come from
:mod:`gpuwatch.domain.health`.
"""

from __future__ import annotations

from gpuwatch.alerts import promql
from gpuwatch.alerts.definitions import (
    ECC_DOUBLE_BIT_ERROR,
    NVLINK_ERRORS,
    PCIE_REPLAYS,
    Timing,
)
from gpuwatch.alerts.normalise import dcgm, normalise
from gpuwatch.alerts.params import RuleParams
from gpuwatch.domain.health import THROTTLE_MASK

#: The clock-event bitmask, renamed in DCGM 3.3 (the older name is read where the new is absent).
CLOCK_EVENT_METRICS = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
#: Volatile counts (since the driver loaded) first, else the aggregate (lifetime) ones.
ECC_DBE_METRICS = ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL")
ECC_SBE_METRICS = ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL")
#: NVLink error counters, added together.
NVLINK_ERROR_METRICS = (
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)
PCIE_REPLAY_METRIC = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
XID_METRIC = "DCGM_FI_DEV_XID_ERRORS"

#: The throttling bits (thermal, power cap, HW slowdown) of the latest clock-event reading.
CLOCK_THROTTLE = "gpuwatch:gpu_clock_throttle:mask"
#: 1 while any throttling bit is set, else 0 (its mean over a range is the throttled share).
CLOCK_THROTTLED = "gpuwatch:gpu_clock_throttled:bool"
ECC_DBE = f"gpuwatch:gpu_ecc_dbe:increase{ECC_DOUBLE_BIT_ERROR.window}"
ECC_SBE = f"gpuwatch:gpu_ecc_sbe:increase{ECC_DOUBLE_BIT_ERROR.window}"
NVLINK_ERRORS_RECORD = f"gpuwatch:gpu_nvlink_errors:increase{NVLINK_ERRORS.window}"
PCIE_REPLAYS_RECORD = f"gpuwatch:gpu_pcie_replays:increase{PCIE_REPLAYS.window}"
#: One series per GPU and non-zero XID code, the code in label :data:`XID_LABEL`, value 1.
XID_INFO = "gpuwatch:gpu_xid_code:info"
XID_LABEL = "xid"


def _first_of(metrics: tuple[str, ...], reading: str, params: RuleParams) -> str:
    """``reading`` of each metric, ``or``-ed in order: the first present one wins per series."""
    return "\nor\n".join(reading.format(dcgm(m, params)) for m in metrics)


def clock_events(params: RuleParams) -> str:
    """The latest clock-event bitmask, new name over old, blank readings dropped."""
    readings = _first_of(CLOCK_EVENT_METRICS, promql.below_sentinel("{}"), params)
    return f"(\n{promql.indent(readings)}\n)"


def _increase(metrics: tuple[str, ...], timing: Timing, params: RuleParams) -> str:
    return normalise(_first_of(metrics, f"increase({{}}[{timing.window}])", params), params)


def _nvlink(params: RuleParams) -> str:
    """The four NVLink error counters' increases, added up per series (a counter the exporter
    does not send adds nothing)."""
    window = NVLINK_ERRORS.window
    parts = [
        promql.replace(f"increase({dcgm(m, params)}[{window}])", promql.TMP_LABEL, m, "", "")
        for m in NVLINK_ERROR_METRICS
    ]
    summed = promql.aggregate(f"sum without ({promql.TMP_LABEL})", (), "\nor\n".join(parts))
    return normalise(summed, params)


def _xid_codes(params: RuleParams) -> str:
    codes = promql.below_sentinel(dcgm(XID_METRIC, params)) + " > 0"
    body = f"{promql.string(XID_LABEL)},\n{normalise(codes, params)}"
    return f"count_values without () (\n{promql.indent(body)}\n)"


def health_records(params: RuleParams) -> list[tuple[str, str]]:
    """(record, expr) of the health rules, in evaluation order."""
    throttle = normalise(promql.bit_and(clock_events(params), THROTTLE_MASK), params)
    return [
        (CLOCK_THROTTLE, throttle),
        (CLOCK_THROTTLED, f"{CLOCK_THROTTLE} > bool 0"),
        (ECC_DBE, _increase(ECC_DBE_METRICS, ECC_DOUBLE_BIT_ERROR, params)),
        (ECC_SBE, _increase(ECC_SBE_METRICS, ECC_DOUBLE_BIT_ERROR, params)),
        (NVLINK_ERRORS_RECORD, _nvlink(params)),
        (PCIE_REPLAYS_RECORD, _increase((PCIE_REPLAY_METRIC,), PCIE_REPLAYS, params)),
        (XID_INFO, _xid_codes(params)),
    ]
