"""Every alert's threshold, window and ``for:``, defined once (docs/alerts.md).

The rule renderer writes its PromQL from these definitions (:mod:`gpuwatch.alerts.rules`,
:mod:`gpuwatch.alerts.extras`, :mod:`gpuwatch.alerts.recording`), and the dashboard evaluates
the same definitions over the stored samples (:mod:`gpuwatch.alerts.evaluate`) when it does not
ask Prometheus. Windows and ``for:`` are fixed here; thresholds come from the configuration
(:class:`~gpuwatch.alerts.params.RuleParams`), whose defaults are in
:mod:`gpuwatch.domain.thresholds`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Literal

from gpuwatch.alerts.params import RuleParams
from gpuwatch.analytics.budgets import OVER_BUDGET_PCT, RUN_RATE_DAYS
from gpuwatch.domain.durations import DAY_S, HOUR_S, MINUTE_S, format_duration

Severity = Literal["critical", "warning", "info"]

#: How far back an instant selector finds a series' latest sample (Prometheus' default).
LOOKBACK_S = 5 * MINUTE_S
#: Seconds between rule evaluations (Prometheus' default ``evaluation_interval``).
EVALUATION_INTERVAL_S = MINUTE_S


@dataclass(frozen=True)
class Timing:
    """When a condition is read and how long it must hold.

    ``window_s``: the range the condition reads (``max_over_time(x[window])``; 0: the latest
    sample). ``for_s``: how long the condition must hold at every evaluation before the alert
    fires (``for:``). ``history_s``: the subject must already have had data this long ago (a
    sample in ``[t - window, t - history]``), so a short history never looks like a whole window.
    """

    window_s: int = 0
    for_s: int = 0
    history_s: int = 0

    @property
    def window(self) -> str:
        """The window as a PromQL duration, ``30m``."""
        return duration(self.window_s)

    @property
    def for_(self) -> str:
        """The ``for:`` duration, empty when the alert fires at once."""
        return duration(self.for_s) if self.for_s else ""

    @property
    def history_range(self) -> str:
        """``[window - history] offset history``: the range that must hold a sample."""
        return f"[{duration(self.window_s - self.history_s)}] offset {duration(self.history_s)}"


def duration(seconds: int) -> str:
    """Seconds as a PromQL duration (``90`` → ``1m30s``)."""
    return format_duration(timedelta(seconds=seconds))


def span_text(seconds: int) -> str:
    """A span as descriptions say it: ``hour``, ``30 minutes``, ``6 hours``."""
    for size, unit in ((HOUR_S, "hour"), (MINUTE_S, "minute")):
        if seconds % size == 0:
            count = seconds // size
            return unit if count == 1 else f"{count} {unit}s"
    return f"{seconds} seconds"


# The fixed part of each definition: windows and for: (contract section 6 gives the bounds).
ALLOCATED_IDLE = Timing(window_s=30 * MINUTE_S, for_s=20 * MINUTE_S)
NAMESPACE_LOW_EFFICIENCY = Timing(window_s=6 * HOUR_S, for_s=30 * MINUTE_S, history_s=5 * HOUR_S)
MEMORY_NEAR_FULL = Timing(for_s=5 * MINUTE_S)
HIGH_TEMPERATURE = Timing(for_s=5 * MINUTE_S)
XID_ERROR = Timing(window_s=HOUR_S)
EXPORTER_DOWN = Timing(window_s=HOUR_S, for_s=5 * MINUTE_S)
NAMESPACE_IDLE_COST = Timing(window_s=HOUR_S, for_s=15 * MINUTE_S)
UNALLOCATED_WHILE_PENDING = Timing(for_s=15 * MINUTE_S)
MIG_INSTANCE_IDLE = Timing(
    window_s=6 * HOUR_S, for_s=15 * MINUTE_S, history_s=5 * HOUR_S + 30 * MINUTE_S
)
ROW_REMAP_FAILURE = Timing()
UNCORRECTABLE_REMAPPED_ROWS = Timing(window_s=HOUR_S)
# GPU health (docs/alerts.md#gpu-health): counters are read as increases over an hour, so the
# configured per-hour thresholds (section ``health``) compare with them directly.
XID_HARDWARE_ERROR = Timing(window_s=HOUR_S)
ECC_DOUBLE_BIT_ERROR = Timing(window_s=HOUR_S)
THROTTLED_WHILE_ALLOCATED = Timing(window_s=HOUR_S, for_s=15 * MINUTE_S)
NVLINK_ERRORS = Timing(window_s=HOUR_S)
PCIE_REPLAYS = Timing(window_s=HOUR_S)
#: Reads the conditions of the three failing alerts above, with their windows.
ALLOCATED_AND_FAILING = Timing()
FELL_OFF_BUS = Timing(window_s=HOUR_S, for_s=5 * MINUTE_S)
# Scheduling waste (docs/alerts.md#scheduling-waste): the gang threshold is the configured
# ``scheduling.gang_stall_after``; the others are sustained conditions.
GANG_STALLED = Timing()
CAPACITY_FRAGMENTED = Timing(for_s=30 * MINUTE_S)
QUOTA_IDLE_WHILE_PENDING = Timing(for_s=30 * MINUTE_S)
#: docs/cost-model.md#budgets: the run rate reads the last 7 days; an hour over budget fires.
TEAM_BUDGET_FORECAST = Timing(window_s=RUN_RATE_DAYS * DAY_S, for_s=HOUR_S)
#: The XID NVIDIA's catalogue names "GPU has fallen off the bus".
FELL_OFF_BUS_XID = 79


@dataclass(frozen=True)
class AlertDefinition:
    """One alert: name, severity, threshold (in the unit its condition compares) and timing."""

    name: str
    severity: Severity
    threshold: float
    timing: Timing

    @property
    def anchor(self) -> str:
        """The runbook section anchor (GitHub's heading slug)."""
        return self.name.lower()


@dataclass(frozen=True)
class AlertTable:
    """Every alert gpuwatch renders, with the configured thresholds; names are fixed (contract)."""

    #: Held by a pod, and no sample of the GPU reached the idle ratio in the window.
    allocated_idle: AlertDefinition
    #: The namespace's allocated GPUs' mean utilization ratio over the window is below this.
    namespace_low_efficiency: AlertDefinition
    #: Framebuffer used ÷ total at or above this ratio.
    memory_near_full: AlertDefinition
    #: Temperature (°C) at or above this.
    high_temperature: AlertDefinition
    #: Highest XID code in the window above this (0: any error).
    xid_error: AlertDefinition
    #: GPUs seen in the window that the target no longer exports: more than this.
    exporter_down: AlertDefinition
    #: $ per hour on idle GPUs, averaged over the window, above this.
    namespace_idle_cost: AlertDefinition
    unallocated_while_pending: AlertDefinition
    #: Peak utilization ratio of a held MIG instance over the window below this.
    mig_instance_idle: AlertDefinition
    row_remap_failure: AlertDefinition
    uncorrectable_remapped_rows: AlertDefinition
    #: A team's month-end forecast ÷ its monthly budget above this ratio.
    team_budget_forecast: AlertDefinition
    #: An XID of :data:`gpuwatch.domain.health.FAILING_XIDS` in the window (threshold unused).
    xid_hardware_error: AlertDefinition
    #: Uncorrectable ECC errors in the window above this.
    ecc_double_bit_error: AlertDefinition
    #: Share (ratio) of the window's evaluations with a throttling clock event, at or above this.
    throttled_while_allocated: AlertDefinition
    #: NVLink CRC, replay and recovery errors in the window, at or above this.
    nvlink_errors: AlertDefinition
    #: PCIe replays in the window, at or above this.
    pcie_replays: AlertDefinition
    allocated_and_failing: AlertDefinition
    fell_off_bus: AlertDefinition
    #: Seconds a pod of a gang has been Pending while its running siblings hold GPUs.
    gang_stalled: AlertDefinition
    #: A pending pod's GPU request fits the free GPUs of the cluster but no one node's.
    capacity_fragmented: AlertDefinition
    #: A ClusterQueue's unused nominal GPU quota above this while its cohort has work pending.
    quota_idle_while_pending: AlertDefinition

    def all(self) -> tuple[AlertDefinition, ...]:
        """Every definition, in the rule file's order."""
        return tuple(getattr(self, f.name) for f in fields(self))

    def by_name(self, name: str) -> AlertDefinition:
        found = {d.name: d for d in self.all()}
        return found[name]


def alert_table(params: RuleParams) -> AlertTable:
    """The definitions with the thresholds of ``params``."""
    return AlertTable(
        allocated_idle=AlertDefinition(
            "GPUAllocatedIdle", "warning", params.idle_ratio, ALLOCATED_IDLE
        ),
        namespace_low_efficiency=AlertDefinition(
            "GPUNamespaceLowEfficiency",
            "info",
            params.low_efficiency_ratio,
            NAMESPACE_LOW_EFFICIENCY,
        ),
        memory_near_full=AlertDefinition(
            "GPUMemoryNearFull", "warning", params.memory_full_ratio, MEMORY_NEAR_FULL
        ),
        high_temperature=AlertDefinition(
            "GPUHighTemperature", "warning", params.temperature_c, HIGH_TEMPERATURE
        ),
        xid_error=AlertDefinition("GPUXidError", "warning", 0, XID_ERROR),
        exporter_down=AlertDefinition("GPUExporterDown", "warning", 0, EXPORTER_DOWN),
        namespace_idle_cost=AlertDefinition(
            "GPUNamespaceIdleCost", "warning", params.idle_cost_usd_per_hour, NAMESPACE_IDLE_COST
        ),
        unallocated_while_pending=AlertDefinition(
            "GPUUnallocatedWhilePodsPending", "warning", 0, UNALLOCATED_WHILE_PENDING
        ),
        mig_instance_idle=AlertDefinition(
            "GPUMIGInstanceAllocatedIdle", "info", params.idle_ratio, MIG_INSTANCE_IDLE
        ),
        row_remap_failure=AlertDefinition("GPURowRemapFailure", "critical", 0, ROW_REMAP_FAILURE),
        uncorrectable_remapped_rows=AlertDefinition(
            "GPUUncorrectableRemappedRows", "warning", 0, UNCORRECTABLE_REMAPPED_ROWS
        ),
        **_health(params),
        **_scheduling(params),
        team_budget_forecast=AlertDefinition(
            "GPUTeamBudgetForecastExceeded",
            "warning",
            OVER_BUDGET_PCT / 100,
            TEAM_BUDGET_FORECAST,
        ),
    )


def _per_window(per_hour: float, timing: Timing) -> float:
    """A per-hour threshold as a count in the timing's window."""
    return per_hour * timing.window_s / HOUR_S


def _health(params: RuleParams) -> dict[str, AlertDefinition]:
    """The GPU-health definitions, thresholds from the configuration's ``health`` section."""
    policy = params.health
    return {
        "xid_hardware_error": AlertDefinition(
            "GPUXidHardwareError", "critical", 0, XID_HARDWARE_ERROR
        ),
        "ecc_double_bit_error": AlertDefinition(
            "GPUEccDoubleBitError", "critical", 0, ECC_DOUBLE_BIT_ERROR
        ),
        "throttled_while_allocated": AlertDefinition(
            "GPUThrottledWhileAllocated",
            "warning",
            policy.throttle_degraded_pct / 100,
            THROTTLED_WHILE_ALLOCATED,
        ),
        "nvlink_errors": AlertDefinition(
            "GPUNVLinkErrors",
            "warning",
            _per_window(policy.nvlink_errors_per_hour, NVLINK_ERRORS),
            NVLINK_ERRORS,
        ),
        "pcie_replays": AlertDefinition(
            "GPUPCIeReplays",
            "warning",
            _per_window(policy.pcie_replays_per_hour, PCIE_REPLAYS),
            PCIE_REPLAYS,
        ),
        "allocated_and_failing": AlertDefinition(
            "GPUAllocatedAndFailing", "critical", 0, ALLOCATED_AND_FAILING
        ),
        "fell_off_bus": AlertDefinition("GPUFellOffBus", "critical", 0, FELL_OFF_BUS),
    }


def _scheduling(params: RuleParams) -> dict[str, AlertDefinition]:
    """The scheduling-waste definitions; the gang threshold from ``scheduling.gang_stall_after``."""
    stall_s = params.scheduling.gang_stall_after_s
    return {
        "gang_stalled": AlertDefinition("GPUGangStalled", "warning", stall_s, GANG_STALLED),
        "capacity_fragmented": AlertDefinition(
            "GPUCapacityFragmented", "warning", 0, CAPACITY_FRAGMENTED
        ),
        "quota_idle_while_pending": AlertDefinition(
            "GPUQuotaIdleWhilePending", "warning", 0, QUOTA_IDLE_WHILE_PENDING
        ),
    }
