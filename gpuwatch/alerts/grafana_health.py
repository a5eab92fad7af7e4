"""The GPU-health dashboard's panels for failing and degraded GPUs: hardware XIDs, GPUs fallen
off the bus, ECC errors and row-remap failures, throttle reasons, PCIe replays and NVLink
errors. Each reads the recording rules of :mod:`gpuwatch.alerts.recording_health` with the
alerts' own conditions (:mod:`gpuwatch.alerts.health`), so a panel and its alert agree.

Counts of optional readings are 0 where the exporter sends the field and no GPU has the
condition, and empty where it does not send the field at all (no data, never 0).
"""

from __future__ import annotations

from typing import Any

from gpuwatch.alerts import promql
from gpuwatch.alerts.definitions import AlertTable, span_text
from gpuwatch.alerts.grafana_model import Panel, Query, Row
from gpuwatch.alerts.grafana_panels import Scope, gpu_series, series, stat, table
from gpuwatch.alerts.health import (
    allocated_and_failing_expr,
    fell_off_bus_expr,
    xid_hardware_condition,
)
from gpuwatch.alerts.recording import ROW_REMAP_FAILURE
from gpuwatch.alerts.recording_health import (
    CLOCK_THROTTLE,
    CLOCK_THROTTLED,
    ECC_DBE,
    ECC_SBE,
    NVLINK_ERRORS_RECORD,
    PCIE_REPLAYS_RECORD,
)
from gpuwatch.domain.health import HW_SLOWDOWN_MASK, POWER_CAP_MASK, THERMAL_MASK

_ALARM: dict[str, Any] = {"steps": (("green", None), ("red", 1))}


def _gpus(expr: str) -> str:
    """Distinct physical GPUs or units named by ``gpu`` in ``expr``, 0 when there is none."""
    return f"count(count by (gpu) ({expr})) or vector(0)"


def _count_where(selector: str, condition: str) -> str:
    """GPUs meeting ``condition``: 0 where ``selector`` has series, empty where it has none."""
    return f"count({condition}) or count({selector}) * 0"


def _failing(scope: Scope, t: AlertTable) -> Row:
    node = scope.matchers(node=True)
    dbe, remap = scope.sel(ECC_DBE, node=True), scope.sel(ROW_REMAP_FAILURE, node=True)
    hour = span_text(t.xid_hardware_error.timing.window_s)
    lost = span_text(t.fell_off_bus.timing.window_s)
    pods = allocated_and_failing_expr(scope.params, t, node)
    return Row(
        "Failing GPUs",
        (
            stat(
                f"GPUs with a hardware XID in the last {hour}",
                _gpus(xid_hardware_condition(t.xid_hardware_error, node)),
                "XIDs NVIDIA's catalogue lists as hardware or driver errors "
                "(alert GPUXidHardwareError).",
                **_ALARM,
            ),
            stat(
                "GPUs fallen off the bus",
                _gpus(fell_off_bus_expr(scope.params, t.fell_off_bus, node)),
                f"GPUs that stopped reporting in the last {lost} while their exporter is up, or "
                "reported XID 79 (alert GPUFellOffBus).",
                **_ALARM,
            ),
            stat(
                f"GPUs with a double-bit ECC error in the last {hour}",
                _count_where(dbe, f"{dbe} > 0"),
                f"`{ECC_DBE}` > 0 (alert GPUEccDoubleBitError); empty where the exporter sends "
                "no ECC counts.",
                **_ALARM,
            ),
            stat(
                "GPUs with a row-remap failure",
                _count_where(remap, f"{remap} > 0"),
                f"`{ROW_REMAP_FAILURE}` > 0 (alert GPURowRemapFailure).",
                **_ALARM,
            ),
            stat(
                "Pods holding a failing GPU",
                f"count(count by ({scope.by('namespace', 'pod')}) (\n{pods}\n)) or vector(0)",
                "Pods on a GPU with a double-bit ECC error, a row-remap failure or a hardware "
                "XID (alert GPUAllocatedAndFailing).",
                width=8,
                **_ALARM,
            ),
        ),
    )


def _throttling(scope: Scope, t: AlertTable) -> Row:
    mask = scope.sel(CLOCK_THROTTLE, node=True)
    reasons = (
        ("thermal", THERMAL_MASK),
        ("power cap", POWER_CAP_MASK),
        ("HW slowdown", HW_SLOWDOWN_MASK),
    )
    queries = tuple(
        Query(_count_where(mask, f"{promql.bit_and(mask, bits)} > 0"), name)
        for name, bits in reasons
    )
    d = t.throttled_while_allocated
    share = f"avg_over_time({scope.sel(CLOCK_THROTTLED, node=True)}[{d.timing.window}])"
    return Row(
        "Throttling",
        (
            series(
                "Throttle reasons",
                queries,
                "GPUs whose clocks are held down, by reason, from the clock-event bits "
                f"(`{CLOCK_THROTTLE}`): thermal (0x20, 0x40), power cap (0x4, 0x80), HW slowdown "
                "(0x8). Idle, clocks-setting and sync-boost bits are not throttling.",
            ),
            gpu_series(
                scope,
                f"Throttled share of the last {span_text(d.timing.window_s)}",
                share,
                "Share of rule evaluations with a throttling clock event, per GPU and holder; "
                f"a held GPU at or above {promql.number(d.threshold * 100)}% for "
                f"{span_text(d.timing.for_s)} raises GPUThrottledWhileAllocated.",
                unit="percentunit",
                steps=(("green", None), ("red", d.threshold)),
            ),
        ),
    )


def _counter_panel(scope: Scope, title: str, record: str, text: str, limit: float) -> Panel:
    return gpu_series(
        scope,
        title,
        f"{scope.sel(record, node=True)} > 0",
        f"`{record}` of each GPU with any: {text}",
        steps=(("green", None), ("red", limit)),
    )


def _errors(scope: Scope, t: AlertTable) -> Row:
    policy = scope.params.health
    sbe, dbe = scope.sel(ECC_SBE, node=True), scope.sel(ECC_DBE, node=True)
    legend = scope.legend("node", "gpu")
    return Row(
        "Memory and interconnect errors",
        (
            series(
                "ECC errors in the last hour",
                (Query(f"{sbe} > 0", f"{legend} SBE"), Query(f"{dbe} > 0", f"{legend} DBE")),
                f"Correctable (SBE, `{ECC_SBE}`) and uncorrectable (DBE, `{ECC_DBE}`) ECC errors "
                f"per GPU; {policy.sbe_burst_per_hour} SBE in an hour is a burst (degraded), any "
                "DBE makes the GPU failing.",
                legend=False,
                steps=(("green", None), ("red", policy.sbe_burst_per_hour)),
            ),
            table(
                "Row-remap failures",
                (Query(f"{scope.sel(ROW_REMAP_FAILURE, node=True)} > 0", "failure"),),
                "Empty while no GPU failed to remap a memory row.",
            ),
            _counter_panel(
                scope,
                "PCIe replays in the last hour",
                PCIE_REPLAYS_RECORD,
                f"{policy.pcie_replays_per_hour} or more raise GPUPCIeReplays.",
                t.pcie_replays.threshold,
            ),
            _counter_panel(
                scope,
                "NVLink errors in the last hour",
                NVLINK_ERRORS_RECORD,
                f"CRC, replay and recovery errors; {policy.nvlink_errors_per_hour} or more raise "
                "GPUNVLinkErrors.",
                t.nvlink_errors.threshold,
            ),
        ),
    )


def _failures(scope: Scope, t: AlertTable) -> Row:
    node = scope.matchers(node=True)
    return Row(
        "Failures",
        (
            table(
                "Hardware XID errors",
                (Query(xid_hardware_condition(t.xid_hardware_error, node), "seen"),),
                "GPUs with an XID NVIDIA's catalogue lists as hardware or driver in the last "
                "hour, the code in column xid (runbook: GPUXidHardwareError).",
            ),
            table(
                "GPUs that fell off the bus",
                (Query(fell_off_bus_expr(scope.params, t.fell_off_bus, node), "lost"),),
                "Per physical GPU and exporter target (runbook: GPUFellOffBus).",
            ),
        ),
    )


def health_rows(scope: Scope, t: AlertTable) -> tuple[Row, ...]:
    """The health dashboard's rows for failing and degraded GPUs."""
    return (_failing(scope, t), _throttling(scope, t), _errors(scope, t), _failures(scope, t))
