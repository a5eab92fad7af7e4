"""Alerting rules beyond the six core ones: waste in dollars, scheduling, GPU memory rows."""

from __future__ import annotations

from gpuwatch.alerts import promql
from gpuwatch.alerts.definitions import AlertDefinition, AlertTable, alert_table, span_text
from gpuwatch.alerts.normalise import ALLOCATED, MIG_INSTANCE_LABEL, pod_and_namespace
from gpuwatch.alerts.params import RuleParams
from gpuwatch.alerts.recording import (
    NAMESPACE_IDLE_COST,
    NODE_UNALLOCATED,
    ROW_REMAP_FAILURE,
    UNCORRECTABLE_ROWS,
    UTIL,
)
from gpuwatch.alerts.recording_budgets import TEAM_BUDGET, TEAM_FORECAST
from gpuwatch.alerts.recording_scheduling import KSM_GPU_RESOURCES as GPU_RESOURCES
from gpuwatch.alerts.rules import GPU_TEXT, HOLDER_TEXT, Alert, pct, ratio_pct
from gpuwatch.domain.durations import DAY_S


def namespace_idle_cost(params: RuleParams, d: AlertDefinition) -> Alert:
    limit = promql.number(d.threshold)
    return Alert(
        d,
        f"avg_over_time({NAMESPACE_IDLE_COST}[{d.timing.window}]) > {limit}",
        "Namespace {{ $labels.namespace }} pays for idle GPUs.",
        "Namespace {{ $labels.namespace }} spent about "
        '${{ printf "%.2f" $value }} per hour over the last '
        f"{span_text(d.timing.window_s)} on GPUs it holds below "
        f"{pct(params.idle_util_pct)} utilization (threshold ${d.threshold:.2f} per hour).",
    )


def _pending_gpu_pods(params: RuleParams) -> str:
    pod = promql.by([*params.cluster, "namespace", "pod"])
    phase = pod_and_namespace('kube_pod_status_phase{phase="Pending"} == 1', params)
    limits = promql.selector(
        "kube_pod_container_resource_limits", (), (f"resource=~{promql.string(GPU_RESOURCES)}",)
    )
    requests = pod_and_namespace(f"{limits} > 0", params)
    return f"{phase}\nand on ({pod})\n{requests}"


def unallocated_while_pending(params: RuleParams, d: AlertDefinition) -> Alert:
    cluster = promql.by(params.cluster)
    pending = promql.aggregate("count", params.cluster, _pending_gpu_pods(params))
    return Alert(
        d,
        f"{NODE_UNALLOCATED}\nand on ({cluster}) (\n{promql.indent(pending)}\n)",
        "Node {{ $labels.node }} has free GPUs while GPU pods are Pending.",
        'Node {{ $labels.node }} has {{ printf "%.2f" $value }} GPU(s) that no pod holds (in '
        "GPU equivalents: a MIG instance counts g/7) while pods requesting GPUs are Pending: "
        "check taints, node selectors, affinity and the GPU type or MIG "
        "profile they request.",
    )


def row_remap_failure(params: RuleParams, d: AlertDefinition) -> Alert:
    return Alert(
        d,
        f"{ROW_REMAP_FAILURE} > {promql.number(d.threshold)}",
        "GPU {{ $labels.gpu }} failed to remap a memory row.",
        f"{GPU_TEXT} could not remap a faulty memory row: its memory is no longer reliable. "
        "Drain the node and have the GPU inspected.",
    )


def uncorrectable_remapped_rows(params: RuleParams, d: AlertDefinition) -> Alert:
    return Alert(
        d,
        f"{UNCORRECTABLE_ROWS} > {promql.number(d.threshold)}",
        "GPU {{ $labels.gpu }} remapped rows after uncorrectable errors.",
        f'{GPU_TEXT} remapped about {{{{ printf "%.0f" $value }}}} memory rows after '
        f"uncorrectable ECC errors in the last {span_text(d.timing.window_s)}; the remap takes "
        "effect after a GPU reset.",
    )


def mig_instance_idle(params: RuleParams, d: AlertDefinition) -> Alert:
    held = promql.selector(UTIL, (), (f'{MIG_INSTANCE_LABEL}!=""', *ALLOCATED))
    idle = promql.number(d.threshold)
    expr = (
        f"max_over_time({held}[{d.timing.window}]) < {idle}\n"
        f"and {UTIL}\n"
        f"and present_over_time({UTIL}{d.timing.history_range})"
    )
    return Alert(
        d,
        expr,
        f"Pod {HOLDER_TEXT} holds an idle MIG instance.",
        f"Pod {HOLDER_TEXT} has held MIG instance {{{{ $labels.GPU_I_PROFILE }}}} "
        "({{ $labels.gpu }}) on node {{ $labels.node }} for "
        f"{span_text(d.timing.window_s)} without using it above "
        f"{ratio_pct(d.threshold)} (peak {{{{ $value | humanizePercentage }}}}): "
        "release the slice.",
    )


def team_budget_forecast(params: RuleParams, d: AlertDefinition) -> Alert:
    """A team's month-end forecast above its budget (docs/cost-model.md#budgets)."""
    budget = TEAM_BUDGET if d.threshold == 1 else f"({TEAM_BUDGET} * {promql.number(d.threshold)})"
    lookup = (
        f'{{{{ with printf "{TEAM_BUDGET}{{team=%q}}" $labels.team | query }}}}'
        '{{ . | first | value | printf "%.2f" }}{{ end }}'
    )
    return Alert(
        d,
        f"{TEAM_FORECAST} > on (team) {budget}",
        "Team {{ $labels.team }} is forecast to spend more on GPUs this month than its budget.",
        "Team {{ $labels.team }} is forecast to spend about "
        '${{ printf "%.2f" $value }} on GPUs this month, above its monthly budget of '
        f"${lookup}: its allocated cost since the first of the month plus the last "
        f"{d.timing.window_s // DAY_S} days' cost per hour for the hours left (on-demand prices).",
    )


def extra_alerts(params: RuleParams, table: AlertTable | None = None) -> list[Alert]:
    """The alerts beyond the core six, in a stable order."""
    t = table or alert_table(params)
    return [
        namespace_idle_cost(params, t.namespace_idle_cost),
        unallocated_while_pending(params, t.unallocated_while_pending),
        mig_instance_idle(params, t.mig_instance_idle),
        row_remap_failure(params, t.row_remap_failure),
        uncorrectable_remapped_rows(params, t.uncorrectable_remapped_rows),
        team_budget_forecast(params, t.team_budget_forecast),
    ]
