"""The six core alerts, whose names users script against (docs/alerts.md, docs/runbook.md).

Each rule's threshold, window and ``for:`` come from its definition
(:mod:`gpuwatch.alerts.definitions`); this module only writes them as PromQL and text.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.alerts import promql
from gpuwatch.alerts.definitions import AlertDefinition, AlertTable, alert_table, span_text
from gpuwatch.alerts.normalise import ALLOCATED
from gpuwatch.alerts.params import RuleParams
from gpuwatch.alerts.recording import (
    FB_USED,
    NAMESPACE_GPUS,
    NAMESPACE_UTIL_SUM,
    TEMPERATURE,
    UTIL,
    UTIL_PEAK,
    XID_CODE,
)

#: How an alert names the GPU and its holder in descriptions.
GPU_TEXT = "GPU {{ $labels.gpu }} ({{ $labels.modelName }}) on node {{ $labels.node }}"
HOLDER_TEXT = "{{ $labels.namespace }}/{{ $labels.pod }}"
#: ", held by <namespace>/<pod>," where a pod holds the GPU, else nothing.
HELD_BY_TEXT = "{{ if $labels.pod }}, held by " + HOLDER_TEXT + ",{{ end }}"


@dataclass(frozen=True)
class Alert:
    """One alerting rule: its definition, written as PromQL and annotation text."""

    definition: AlertDefinition
    expr: str
    summary: str
    description: str

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def severity(self) -> str:
        return self.definition.severity

    @property
    def for_(self) -> str:
        """The ``for:`` duration (empty: fire at once)."""
        return self.definition.timing.for_

    @property
    def anchor(self) -> str:
        """The runbook section anchor (GitHub's heading slug)."""
        return self.definition.anchor


def pct(value: float) -> str:
    """A threshold in percent as text, ``5%``."""
    return f"{promql.number(value)}%"


def ratio_pct(ratio: float) -> str:
    """A threshold ratio as percent text, ``0.05`` → ``5%``."""
    return pct(ratio * 100)


def allocated_idle(params: RuleParams, d: AlertDefinition) -> Alert:
    idle = promql.number(d.threshold)
    gpu = promql.by([*params.cluster, "gpu"])
    held = promql.by([*params.cluster, "gpu", "namespace", "pod"])
    expr = (
        f"{promql.selector(UTIL_PEAK, (), ALLOCATED)} < {idle}\n"
        f"unless on ({gpu}) ({UTIL_PEAK} >= {idle})\n"
        f"and on ({held}) {UTIL}"
    )
    return Alert(
        d,
        expr,
        f"Pod {HOLDER_TEXT} holds an idle GPU.",
        f"Pod {HOLDER_TEXT} holds {GPU_TEXT} but has not used it above "
        f"{ratio_pct(d.threshold)} in the last {span_text(d.timing.window_s)} "
        "(peak {{ $value | humanizePercentage }}).",
    )


def namespace_low_efficiency(params: RuleParams, d: AlertDefinition) -> Alert:
    namespace = promql.by([*params.cluster, "namespace"])
    window = d.timing.window
    expr = (
        f"sum_over_time({NAMESPACE_UTIL_SUM}[{window}])\n/\n"
        f"sum_over_time({NAMESPACE_GPUS}[{window}])\n"
        f"< {promql.number(d.threshold)}\n"
        f"and on ({namespace}) present_over_time({NAMESPACE_GPUS}{d.timing.history_range})"
    )
    return Alert(
        d,
        expr,
        "Namespace {{ $labels.namespace }} uses its GPUs little.",
        "The GPUs allocated in namespace {{ $labels.namespace }} averaged "
        "{{ $value | humanizePercentage }} utilization over the last "
        f"{span_text(d.timing.window_s)} (threshold {ratio_pct(d.threshold)}).",
    )


def memory_near_full(params: RuleParams, d: AlertDefinition) -> Alert:
    return Alert(
        d,
        f"{FB_USED} >= {promql.number(d.threshold)}",
        "GPU {{ $labels.gpu }} framebuffer is nearly full.",
        f"{GPU_TEXT}{HELD_BY_TEXT} has {{{{ $value | humanizePercentage }}}} of its "
        f"framebuffer in use (threshold {ratio_pct(d.threshold)}): out-of-memory risk.",
    )


def high_temperature(params: RuleParams, d: AlertDefinition) -> Alert:
    return Alert(
        d,
        f"{TEMPERATURE} >= {promql.number(d.threshold)}",
        "GPU {{ $labels.gpu }} is running hot.",
        f"{GPU_TEXT} is at {{{{ $value }}}} °C "
        f"(threshold {promql.number(d.threshold)} °C): it throttles its clocks.",
    )


def xid_error(params: RuleParams, d: AlertDefinition) -> Alert:
    return Alert(
        d,
        f"{XID_CODE} > {promql.number(d.threshold)}",
        "GPU {{ $labels.gpu }} reported an XID error.",
        f"{GPU_TEXT}{HELD_BY_TEXT} reported XID error {{{{ $value }}}} within the last "
        f"{span_text(d.timing.window_s)}.",
    )


def _silent_targets(params: RuleParams, window: str) -> str:
    target = promql.by([*params.cluster, "job", "instance"])
    gpu = promql.by([*params.cluster, "gpu"])
    node = promql.by([*params.cluster, "node"])
    seen = f"max_over_time({UTIL}[{window}])"
    removed_nodes = f"max_over_time(kube_node_info[{window}]) unless on ({node}) kube_node_info"
    return (
        f"({seen} unless on ({target}) {UTIL})\n"
        f"unless on ({target}) ({seen} and on ({gpu}) {UTIL})\n"
        f"unless on ({node}) ({removed_nodes})"
    )


def exporter_down(params: RuleParams, d: AlertDefinition) -> Alert:
    target = promql.by([*params.cluster, "job", "instance"])
    labels = [*params.cluster, "job", "instance", "node"]
    up = promql.selector("up", params.matchers)
    window = d.timing.window
    failing = f"max_over_time({UTIL}[{window}]) and on ({target}) ({up} == 0)"
    either = f"(\n{promql.indent(_silent_targets(params, window))}\n)\nor\n({failing})"
    gpus = promql.aggregate("count", [*labels, "gpu"], either)
    count = promql.aggregate("count", labels, gpus)
    return Alert(
        d,
        f"{count} > {promql.number(d.threshold)}",
        "DCGM exporter {{ $labels.instance }} has gone silent.",
        "Target {{ $labels.instance }} (job {{ $labels.job }}, node {{ $labels.node }}) "
        "exported DCGM metrics for {{ $value }} GPU(s) in the last "
        f"{span_text(d.timing.window_s)} but now exports none "
        "or fails its scrapes: gpuwatch cannot see those GPUs.",
    )


def core_alerts(params: RuleParams, table: AlertTable | None = None) -> list[Alert]:
    """The six core alerts, in a stable order."""
    t = table or alert_table(params)
    return [
        allocated_idle(params, t.allocated_idle),
        namespace_low_efficiency(params, t.namespace_low_efficiency),
        memory_near_full(params, t.memory_near_full),
        high_temperature(params, t.high_temperature),
        xid_error(params, t.xid_error),
        exporter_down(params, t.exporter_down),
    ]
