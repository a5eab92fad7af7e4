"""The six core alerts, whose names users script against (docs/alerts.md, docs/runbook.md)."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.alerts import promql
from gpuwatch.alerts.normalise import ALLOCATED
from gpuwatch.alerts.params import RuleParams
from gpuwatch.alerts.recording import (
    FB_USED,
    NAMESPACE_GPUS,
    NAMESPACE_UTIL_SUM,
    TEMPERATURE,
    UTIL,
    UTIL_MAX_30M,
    XID_CODE,
)

#: How an alert names the GPU and its holder in descriptions.
GPU_TEXT = "GPU {{ $labels.gpu }} ({{ $labels.modelName }}) on node {{ $labels.node }}"
HOLDER_TEXT = "{{ $labels.namespace }}/{{ $labels.pod }}"
#: ", held by <namespace>/<pod>," where a pod holds the GPU, else nothing.
HELD_BY_TEXT = "{{ if $labels.pod }}, held by " + HOLDER_TEXT + ",{{ end }}"


@dataclass(frozen=True)
class Alert:
    """One alerting rule; ``for_`` is a Prometheus duration (empty: fire at once)."""

    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str

    @property
    def anchor(self) -> str:
        """The runbook section anchor (GitHub's heading slug)."""
        return self.name.lower()


def pct(value: float) -> str:
    """A threshold in percent as text, ``5%``."""
    return f"{promql.number(value)}%"


def allocated_idle(params: RuleParams) -> Alert:
    idle = promql.number(params.idle_ratio)
    gpu = promql.by([*params.cluster, "gpu"])
    held = promql.by([*params.cluster, "gpu", "namespace", "pod"])
    expr = (
        f"{promql.selector(UTIL_MAX_30M, (), ALLOCATED)} < {idle}\n"
        f"unless on ({gpu}) ({UTIL_MAX_30M} >= {idle})\n"
        f"and on ({held}) {UTIL}"
    )
    return Alert(
        "GPUAllocatedIdle",
        expr,
        "20m",
        "warning",
        f"Pod {HOLDER_TEXT} holds an idle GPU.",
        f"Pod {HOLDER_TEXT} holds {GPU_TEXT} but has not used it above "
        f"{pct(params.idle_util_pct)} in the last 30 minutes "
        "(peak {{ $value | humanizePercentage }}).",
    )


def namespace_low_efficiency(params: RuleParams) -> Alert:
    namespace = promql.by([*params.cluster, "namespace"])
    expr = (
        f"sum_over_time({NAMESPACE_UTIL_SUM}[6h])\n/\nsum_over_time({NAMESPACE_GPUS}[6h])\n"
        f"< {promql.number(params.low_efficiency_ratio)}\n"
        f"and on ({namespace}) present_over_time({NAMESPACE_GPUS}[1h] offset 5h)"
    )
    return Alert(
        "GPUNamespaceLowEfficiency",
        expr,
        "30m",
        "info",
        "Namespace {{ $labels.namespace }} uses its GPUs little.",
        "The GPUs allocated in namespace {{ $labels.namespace }} averaged "
        "{{ $value | humanizePercentage }} utilization over the last 6 hours "
        f"(threshold {pct(params.low_efficiency_pct)}).",
    )


def memory_near_full(params: RuleParams) -> Alert:
    return Alert(
        "GPUMemoryNearFull",
        f"{FB_USED} >= {promql.number(params.memory_full_ratio)}",
        "5m",
        "warning",
        "GPU {{ $labels.gpu }} framebuffer is nearly full.",
        f"{GPU_TEXT}{HELD_BY_TEXT} has {{{{ $value | humanizePercentage }}}} of its "
        f"framebuffer in use (threshold {pct(params.memory_full_pct)}): out-of-memory risk.",
    )


def high_temperature(params: RuleParams) -> Alert:
    return Alert(
        "GPUHighTemperature",
        f"{TEMPERATURE} >= {promql.number(params.temperature_c)}",
        "5m",
        "warning",
        "GPU {{ $labels.gpu }} is running hot.",
        f"{GPU_TEXT} is at {{{{ $value }}}} °C "
        f"(threshold {promql.number(params.temperature_c)} °C): it throttles its clocks.",
    )


def xid_error(params: RuleParams) -> Alert:
    return Alert(
        "GPUXidError",
        f"{XID_CODE} > 0",
        "",
        "warning",
        "GPU {{ $labels.gpu }} reported an XID error.",
        f"{GPU_TEXT}{HELD_BY_TEXT} reported XID error {{{{ $value }}}} within the last hour.",
    )


def _silent_targets(params: RuleParams) -> str:
    target = promql.by([*params.cluster, "job", "instance"])
    gpu = promql.by([*params.cluster, "gpu"])
    node = promql.by([*params.cluster, "node"])
    seen = f"max_over_time({UTIL}[1h])"
    removed_nodes = f"max_over_time(kube_node_info[1h]) unless on ({node}) kube_node_info"
    return (
        f"({seen} unless on ({target}) {UTIL})\n"
        f"unless on ({target}) ({seen} and on ({gpu}) {UTIL})\n"
        f"unless on ({node}) ({removed_nodes})"
    )


def exporter_down(params: RuleParams) -> Alert:
    target = promql.by([*params.cluster, "job", "instance"])
    labels = [*params.cluster, "job", "instance", "node"]
    up = promql.selector("up", params.matchers)
    failing = f"max_over_time({UTIL}[1h]) and on ({target}) ({up} == 0)"
    either = f"(\n{promql.indent(_silent_targets(params))}\n)\nor\n({failing})"
    gpus = promql.aggregate("count", [*labels, "gpu"], either)
    return Alert(
        "GPUExporterDown",
        promql.aggregate("count", labels, gpus),
        "5m",
        "warning",
        "DCGM exporter {{ $labels.instance }} has gone silent.",
        "Target {{ $labels.instance }} (job {{ $labels.job }}, node {{ $labels.node }}) "
        "exported DCGM metrics for {{ $value }} GPU(s) in the last hour but now exports none "
        "or fails its scrapes: gpuwatch cannot see those GPUs.",
    )


def core_alerts(params: RuleParams) -> list[Alert]:
    """The six core alerts, in a stable order."""
    return [
        allocated_idle(params),
        namespace_low_efficiency(params),
        memory_near_full(params),
        high_temperature(params),
        xid_error(params),
        exporter_down(params),
    ]
