"""The scheduling-waste alerts: a stalled gang, capacity too fragmented for a pending pod, and
Kueue quota left idle while work waits (docs/alerts.md#scheduling-waste, docs/runbook.md).

Conditions read the recording rules of :mod:`gpuwatch.alerts.recording_scheduling`; the gang
threshold is ``scheduling.gang_stall_after`` (:mod:`gpuwatch.domain.scheduling`), the other
timings are in :mod:`gpuwatch.alerts.definitions`.
"""

from __future__ import annotations

from gpuwatch.alerts import promql
from gpuwatch.alerts.definitions import AlertDefinition, AlertTable, alert_table, span_text
from gpuwatch.alerts.params import RuleParams
from gpuwatch.alerts.recording_scheduling import (
    CLUSTER_GPUS_FREE,
    GANG_GPUS_RUNNING,
    GANG_LABELS,
    GANG_PODS_STALLED,
    KUEUE_GPU_PENDING,
    KUEUE_QUOTA_IDLE,
    NODE_GPUS_FREE_MAX,
    POD_GPUS_UNSCHEDULED,
)
from gpuwatch.alerts.rules import HOLDER_TEXT, Alert

GANG_TEXT = "{{ $labels.gang_kind }} {{ $labels.gang_name }} in namespace {{ $labels.namespace }}"
COUNT_TEXT = '{{ printf "%.0f" $value }}'


def _lookup(params: RuleParams, record: str, labels: tuple[str, ...]) -> str:
    """Template text that reads ``record`` for the alert's own ``labels`` (and cluster) when
    the annotation is expanded, printed as a whole number."""
    names = (*params.cluster, *labels)
    matchers = ", ".join(f"{name}=%q" for name in names)
    args = " ".join(f"$labels.{name}" for name in names)
    query = promql.string(f"sum({record}{{{matchers}}})")
    return (
        f"{{{{ with printf {query} {args} | query }}}}"
        '{{ . | first | value | printf "%.0f" }}{{ end }}'
    )


def gang_stalled(params: RuleParams, d: AlertDefinition) -> Alert:
    gang = promql.by([*params.cluster, "namespace", *GANG_LABELS])
    stalled = _lookup(params, GANG_PODS_STALLED, ("namespace", *GANG_LABELS))
    return Alert(
        d,
        f"{GANG_GPUS_RUNNING} > 0\nand on ({gang})\n{GANG_PODS_STALLED}",
        "Gang {{ $labels.gang_name }} holds GPUs while some of its pods cannot start.",
        f"The running pods of gang {GANG_TEXT} hold {COUNT_TEXT} GPU(s) while {stalled} of its "
        f"pods have been Pending for more than {span_text(int(d.threshold))}: the gang cannot "
        "run until they start, so those GPUs wait idle (stalled).",
    )


def capacity_fragmented(params: RuleParams, d: AlertDefinition) -> Alert:
    per_resource = promql.by([*params.cluster, "resource"])
    largest = _lookup(params, NODE_GPUS_FREE_MAX, ("resource",))
    total = _lookup(params, CLUSTER_GPUS_FREE, ("resource",))
    expr = (
        f"{POD_GPUS_UNSCHEDULED}\n"
        f"> on ({per_resource}) group_left ()\n{NODE_GPUS_FREE_MAX}\n"
        f"<= on ({per_resource}) group_left ()\n{CLUSTER_GPUS_FREE}"
    )
    return Alert(
        d,
        expr,
        f"Pod {HOLDER_TEXT} waits for GPUs the cluster has, scattered over nodes.",
        f"Pod {HOLDER_TEXT} requests {COUNT_TEXT} {{{{ $labels.resource }}}} and no node has had "
        f"room for it for {span_text(d.timing.for_s)}, while the cluster has {total} free in "
        f"total but at most {largest} on any one node. Consolidate the pods of partly used "
        "nodes, or split the request.",
    )


def quota_idle_while_pending(params: RuleParams, d: AlertDefinition) -> Alert:
    limit = promql.number(d.threshold)
    cohort = promql.by([*params.cluster, "cohort", "flavor", "resource"])
    queue = promql.by([*params.cluster, "cluster_queue", "flavor", "resource"])
    waiting = promql.aggregate(
        "sum",
        [*params.cluster, "cohort", "flavor", "resource"],
        f'{KUEUE_GPU_PENDING}{{cohort!=""}}',
    )
    expr = (
        f'{KUEUE_QUOTA_IDLE}{{cohort!=""}} > {limit}\n'
        f"and on ({cohort})\n({waiting} > 0)\n"
        f"or\n"
        f'{KUEUE_QUOTA_IDLE}{{cohort=""}} > {limit}\n'
        f'and on ({queue})\n{KUEUE_GPU_PENDING}{{cohort=""}} > 0'
    )
    where = "{{ if $labels.cohort }}cohort {{ $labels.cohort }}{{ else }}the queue{{ end }}"
    return Alert(
        d,
        expr,
        "ClusterQueue {{ $labels.cluster_queue }} leaves GPU quota unused while work waits.",
        f"ClusterQueue {{{{ $labels.cluster_queue }}}} has left {COUNT_TEXT} of its nominal "
        "{{ $labels.resource }} quota (flavor {{ $labels.flavor }}) unused for "
        f"{span_text(d.timing.for_s)} while workloads of {where} are pending on that flavor: "
        "see what the pending workloads wait for, then lend the idle quota (lendingLimit) or "
        "move it to the queues that wait.",
    )


def scheduling_alerts(params: RuleParams, table: AlertTable | None = None) -> list[Alert]:
    """The scheduling-waste alerts, in a stable order."""
    t = table or alert_table(params)
    return [
        gang_stalled(params, t.gang_stalled),
        capacity_fragmented(params, t.capacity_fragmented),
        quota_idle_while_pending(params, t.quota_idle_while_pending),
    ]
