"""Alerting rules beyond the six core ones: waste in dollars, scheduling, GPU health."""

from __future__ import annotations

from gpuwatch.alerts import promql
from gpuwatch.alerts.normalise import ALLOCATED, MIG_INSTANCE_LABEL, pod_and_namespace
from gpuwatch.alerts.params import RuleParams
from gpuwatch.alerts.recording import (
    NAMESPACE_IDLE_COST,
    NODE_UNALLOCATED,
    PCIE_REPLAYS,
    ROW_REMAP_FAILURE,
    UNCORRECTABLE_ROWS,
    UTIL,
)
from gpuwatch.alerts.rules import GPU_TEXT, HOLDER_TEXT, Alert, pct

#: kube-state-metrics ``resource`` values of GPU requests (whole, shared, MIG slices).
GPU_RESOURCES = "nvidia_com_(gpu|gpu_shared|mig_.+)"


def namespace_idle_cost(params: RuleParams) -> Alert:
    limit = promql.number(params.idle_cost_usd_per_hour)
    return Alert(
        "GPUNamespaceIdleCost",
        f"avg_over_time({NAMESPACE_IDLE_COST}[1h]) > {limit}",
        "15m",
        "warning",
        "Namespace {{ $labels.namespace }} pays for idle GPUs.",
        "Namespace {{ $labels.namespace }} spent about "
        '${{ printf "%.2f" $value }} per hour over the last hour on GPUs it holds below '
        f"{pct(params.idle_util_pct)} utilization (threshold ${params.idle_cost_usd_per_hour:.2f}"
        " per hour).",
    )


def _pending_gpu_pods(params: RuleParams) -> str:
    pod = promql.by([*params.cluster, "namespace", "pod"])
    phase = pod_and_namespace('kube_pod_status_phase{phase="Pending"} == 1', params)
    limits = promql.selector(
        "kube_pod_container_resource_limits", (), (f"resource=~{promql.string(GPU_RESOURCES)}",)
    )
    requests = pod_and_namespace(f"{limits} > 0", params)
    return f"{phase}\nand on ({pod})\n{requests}"


def unallocated_while_pending(params: RuleParams) -> Alert:
    cluster = promql.by(params.cluster)
    pending = promql.aggregate("count", params.cluster, _pending_gpu_pods(params))
    return Alert(
        "GPUUnallocatedWhilePodsPending",
        f"{NODE_UNALLOCATED}\nand on ({cluster}) (\n{promql.indent(pending)}\n)",
        "15m",
        "warning",
        "Node {{ $labels.node }} has free GPUs while GPU pods are Pending.",
        "Node {{ $labels.node }} has {{ $value }} GPU(s) that no pod holds while pods requesting "
        "GPUs are Pending: check taints, node selectors, affinity and the GPU type or MIG "
        "profile they request.",
    )


def row_remap_failure(params: RuleParams) -> Alert:
    return Alert(
        "GPURowRemapFailure",
        f"{ROW_REMAP_FAILURE} > 0",
        "",
        "critical",
        "GPU {{ $labels.gpu }} failed to remap a memory row.",
        f"{GPU_TEXT} could not remap a faulty memory row: its memory is no longer reliable. "
        "Drain the node and have the GPU inspected.",
    )


def uncorrectable_remapped_rows(params: RuleParams) -> Alert:
    return Alert(
        "GPUUncorrectableRemappedRows",
        f"{UNCORRECTABLE_ROWS} > 0",
        "",
        "warning",
        "GPU {{ $labels.gpu }} remapped rows after uncorrectable errors.",
        f'{GPU_TEXT} remapped about {{{{ printf "%.0f" $value }}}} memory rows after '
        "uncorrectable ECC errors in the last hour; the remap takes effect after a GPU reset.",
    )


def pcie_replays_rising(params: RuleParams) -> Alert:
    return Alert(
        "GPUPCIeReplaysRising",
        f"{PCIE_REPLAYS} > 0",
        "30m",
        "warning",
        "GPU {{ $labels.gpu }} keeps retrying PCIe transfers.",
        f'{GPU_TEXT} replayed about {{{{ printf "%.0f" $value }}}} PCIe packets in the last '
        "10 minutes, and has kept doing so for 30 minutes: a failing link or riser slows it.",
    )


def mig_instance_idle(params: RuleParams) -> Alert:
    held = promql.selector(UTIL, (), (f'{MIG_INSTANCE_LABEL}!=""', *ALLOCATED))
    idle = promql.number(params.idle_ratio)
    expr = (
        f"max_over_time({held}[6h]) < {idle}\n"
        f"and {UTIL}\n"
        f"and present_over_time({UTIL}[30m] offset 5h30m)"
    )
    return Alert(
        "GPUMIGInstanceAllocatedIdle",
        expr,
        "15m",
        "info",
        f"Pod {HOLDER_TEXT} holds an idle MIG instance.",
        f"Pod {HOLDER_TEXT} has held MIG instance {{{{ $labels.GPU_I_PROFILE }}}} "
        "({{ $labels.gpu }}) on node {{ $labels.node }} for 6 hours without using it above "
        f"{pct(params.idle_util_pct)} (peak {{{{ $value | humanizePercentage }}}}): "
        "release the slice.",
    )


def extra_alerts(params: RuleParams) -> list[Alert]:
    """The alerts beyond the core six, in a stable order."""
    return [
        namespace_idle_cost(params),
        unallocated_while_pending(params),
        mig_instance_idle(params),
        row_remap_failure(params),
        uncorrectable_remapped_rows(params),
        pcie_replays_rising(params),
    ]
