"""Recording rules of scheduling waste: gangs and free GPUs from kube-state-metrics, quotas and
pending work from Kueue's own metrics (docs/alerts.md#scheduling-waste).

kube-state-metrics series are read with their ``namespace``/``pod`` normalised like the DCGM
ones (``exported_*`` first); a gang's identity comes from the pod labels and annotations of
:mod:`gpuwatch.domain.scheduling`, which kube-state-metrics exports only when they are listed
in its ``--metric-labels-allowlist`` / ``--metric-annotations-allowlist``. Kueue's quota and
usage series exist only with ``metrics.enableClusterQueueResources`` in its configuration.
Every rule takes the largest of duplicate series (two kube-state-metrics or Kueue replicas).
"""

from __future__ import annotations

import re

from gpuwatch.alerts import promql
from gpuwatch.alerts.normalise import pod_and_namespace
from gpuwatch.alerts.params import RuleParams
from gpuwatch.domain.scheduling import (
    JOBSET_NAME_LABEL,
    KUEUE_POD_GROUP_LABEL,
    VOLCANO_GROUP_ANNOTATION,
)

#: kube-state-metrics ``resource`` values of GPU requests (whole, shared, MIG slices).
KSM_GPU_RESOURCES = "nvidia_com_(gpu|gpu_shared|mig_.+)"
#: Kueue's ``resource`` values of GPUs (the Kubernetes resource names, unsanitised).
KUEUE_GPU_RESOURCES = r"nvidia\.com/(gpu|gpu\.shared|mig-.+)"

#: GPUs each pod requests, per node it is bound to (none while unscheduled) and resource.
POD_GPU_REQUESTS = "gpuwatch:pod_gpu_requests:sum"
#: One series per pod of a gang: labels ``gang_kind`` and ``gang_name``, value 1.
POD_GANG = "gpuwatch:pod_gang:info"
#: GPUs the Running pods of each gang request (hold).
GANG_GPUS_RUNNING = "gpuwatch:gang_gpus_running:sum"
#: Pods of each gang Pending for longer than ``scheduling.gang_stall_after``.
GANG_PODS_STALLED = "gpuwatch:gang_pods_stalled:count"
#: Allocatable GPUs of each schedulable, Ready node no Running or Pending pod requests.
NODE_GPUS_FREE = "gpuwatch:node_gpus_free:sum"
#: Free GPUs of the cluster, per resource.
CLUSTER_GPUS_FREE = "gpuwatch:cluster_gpus_free:sum"
#: The most free GPUs on any one node, per resource.
NODE_GPUS_FREE_MAX = "gpuwatch:cluster_gpus_free_one_node:max"
#: GPUs each unscheduled Pending pod requests (the scheduler found no node for it).
POD_GPUS_UNSCHEDULED = "gpuwatch:pod_gpu_requests_unschedulable:sum"
KUEUE_QUOTA = "gpuwatch:kueue_gpu_quota:sum"
KUEUE_USAGE = "gpuwatch:kueue_gpu_usage:sum"
#: Nominal GPU quota minus usage, never below 0 (a borrowing queue has none idle).
KUEUE_QUOTA_IDLE = "gpuwatch:kueue_gpu_quota_idle:sum"
KUEUE_PENDING = "gpuwatch:kueue_pending_workloads:sum"
#: A ClusterQueue's pending workloads on each GPU flavor and resource it covers.
KUEUE_GPU_PENDING = "gpuwatch:kueue_gpu_pending_workloads:sum"
#: Window of the admission wait quantile (informational, dashboard only).
ADMISSION_WAIT_WINDOW = "1h"
KUEUE_ADMISSION_WAIT_P90 = f"gpuwatch:kueue_admission_wait_seconds:p90_{ADMISSION_WAIT_WINDOW}"

#: Gang sources, most specific first (:data:`gpuwatch.domain.scheduling.GANG_KINDS`):
#: (gang kind, kube-state-metrics metric, its label holding the gang's name).
_GANG_SOURCES = (
    ("kueue", "kube_pod_labels", KUEUE_POD_GROUP_LABEL, "label"),
    ("volcano", "kube_pod_annotations", VOLCANO_GROUP_ANNOTATION, "annotation"),
    ("jobset", "kube_pod_labels", JOBSET_NAME_LABEL, "label"),
)
GANG_LABELS = ("gang_kind", "gang_name")


def ksm_label(name: str, prefix: str) -> str:
    """The label kube-state-metrics writes for a Kubernetes label or annotation ``name``
    (``kueue.x-k8s.io/pod-group-name`` → ``label_kueue_x_k8s_io_pod_group_name``)."""
    return f"{prefix}_{re.sub(r'[^a-zA-Z0-9_]', '_', name)}"


def _pods(params: RuleParams) -> list[str]:
    return [*params.cluster, "namespace", "pod"]


def pods_in_phase(params: RuleParams, phases: str) -> str:
    """Pods whose phase matches the regex ``phases`` now (value 1)."""
    return pod_and_namespace(f'kube_pod_status_phase{{phase=~"{phases}"}} == 1', params)


def _pod_requests(params: RuleParams) -> str:
    matcher = f"resource=~{promql.string(KSM_GPU_RESOURCES)}"
    selector = promql.selector("kube_pod_container_resource_requests", (), (matcher,))
    labels = [*_pods(params), "node", "resource"]
    return promql.aggregate("sum", labels, pod_and_namespace(selector, params))


def _gang_source(params: RuleParams, kind: str, metric: str, name: str, prefix: str) -> str:
    label = ksm_label(name, prefix)
    expr = promql.replace(f'{metric}{{{label}!=""}}', "gang_name", "$1", label, "(.+)")
    expr = promql.replace(expr, "gang_kind", kind, "", "")
    return promql.aggregate("max", [*_pods(params), *GANG_LABELS], pod_and_namespace(expr, params))


def _job_gangs(params: RuleParams) -> str:
    """Pods owned by a Job whose parallelism is above 1, the Job being the gang."""
    owner = promql.replace(
        'kube_pod_owner{owner_kind="Job"}', "gang_name", "$1", "owner_name", "(.+)"
    )
    owner = promql.replace(owner, "gang_kind", "job", "", "")
    parallel = promql.replace(
        "kube_job_spec_parallelism > 1", "gang_name", "$1", "job_name", "(.+)"
    )
    job = promql.by([*params.cluster, "namespace", "gang_name"])
    pods = promql.aggregate("max", [*_pods(params), *GANG_LABELS], pod_and_namespace(owner, params))
    return f"{pods}\nand on ({job})\n{pod_and_namespace(parallel, params)}"


def _pod_gang(params: RuleParams) -> str:
    """Each pod's gang; a pod several sources name takes the most specific one."""
    pod = promql.by(_pods(params))
    terms = [_gang_source(params, *source) for source in _GANG_SOURCES]
    terms.append(f"(\n{promql.indent(_job_gangs(params))}\n)")
    return f"\nor on ({pod})\n".join(terms)


def _per_gang(params: RuleParams, operator: str, pods: str) -> str:
    pod = promql.by(_pods(params))
    gangs = [*params.cluster, "namespace", *GANG_LABELS]
    joined = f"(\n{promql.indent(pods)}\n)\n* on ({pod}) group_left ({promql.by(GANG_LABELS)})\n"
    return promql.aggregate(operator, gangs, joined + POD_GANG)


def _stalled_pods(params: RuleParams) -> str:
    pod = promql.by(_pods(params))
    created = pod_and_namespace("kube_pod_created", params)
    stall = promql.number(params.scheduling.gang_stall_after_s)
    pending = pods_in_phase(params, "Pending")
    return f"(time() - {created}) > {stall}\nand on ({pod})\n{pending}"


def gang_records(params: RuleParams) -> list[tuple[str, str]]:
    pod = promql.by(_pods(params))
    running = f"{POD_GPU_REQUESTS}\nand on ({pod})\n{pods_in_phase(params, 'Running')}"
    return [
        (POD_GPU_REQUESTS, _pod_requests(params)),
        (POD_GANG, _pod_gang(params)),
        (GANG_GPUS_RUNNING, _per_gang(params, "sum", running)),
        (GANG_PODS_STALLED, _per_gang(params, "count", _stalled_pods(params))),
    ]


def _allocatable(params: RuleParams) -> str:
    matcher = f"resource=~{promql.string(KSM_GPU_RESOURCES)}"
    selector = promql.selector("kube_node_status_allocatable", (), (matcher,))
    return promql.aggregate("max", [*params.cluster, "node", "resource"], selector)


def _node_gpus_free(params: RuleParams) -> str:
    """Allocatable minus what bound Running or Pending pods request, on nodes that take pods."""
    node = promql.by([*params.cluster, "node"])
    key = promql.by([*params.cluster, "node", "resource"])
    pod = promql.by(_pods(params))
    live = pods_in_phase(params, "Running|Pending")
    bound = f'{POD_GPU_REQUESTS}{{node!=""}}\nand on ({pod})\n{live}'
    requested = promql.aggregate("sum", [*params.cluster, "node", "resource"], bound)
    allocatable = _allocatable(params)
    held = f"(\n{promql.indent(requested)}\nor\n{allocatable} * 0\n)"
    free = f"{allocatable}\n- on ({key})\n{held}"
    closed = (
        "kube_node_spec_unschedulable == 1\n"
        'or kube_node_status_condition{condition="Ready", status="true"} == 0'
    )
    return (
        f"{promql.call('clamp_min', free, '0')}\nunless on ({node}) (\n{promql.indent(closed)}\n)"
    )


def _unscheduled(params: RuleParams) -> str:
    """Requests of Pending pods the scheduler could not place (``PodScheduled`` false with
    reason ``Unschedulable``: a pod held by a scheduling gate is not one)."""
    pod = promql.by(_pods(params))
    unschedulable = pod_and_namespace("kube_pod_status_unschedulable == 1", params)
    pending = pods_in_phase(params, "Pending")
    body = (
        f'{POD_GPU_REQUESTS}{{node=""}}\nand on ({pod})\n{pending}\nand on ({pod})\n{unschedulable}'
    )
    return promql.aggregate("sum", [*_pods(params), "resource"], body)


def capacity_records(params: RuleParams) -> list[tuple[str, str]]:
    per_resource = [*params.cluster, "resource"]
    return [
        (NODE_GPUS_FREE, _node_gpus_free(params)),
        (CLUSTER_GPUS_FREE, promql.aggregate("sum", per_resource, NODE_GPUS_FREE)),
        (NODE_GPUS_FREE_MAX, promql.aggregate("max", per_resource, NODE_GPUS_FREE)),
        (POD_GPUS_UNSCHEDULED, _unscheduled(params)),
    ]


def _queue_keys(params: RuleParams) -> list[str]:
    return [*params.cluster, "cohort", "cluster_queue", "flavor", "resource"]


def _kueue_gpu(metric: str, params: RuleParams) -> str:
    matcher = f"resource=~{promql.string(KUEUE_GPU_RESOURCES)}"
    return promql.aggregate("max", _queue_keys(params), promql.selector(metric, (), (matcher,)))


def kueue_records(params: RuleParams) -> list[tuple[str, str]]:
    key = promql.by(_queue_keys(params))
    queue = promql.by([*params.cluster, "cluster_queue"])
    idle = f"{KUEUE_QUOTA}\n- on ({key})\n({KUEUE_USAGE} or {KUEUE_QUOTA} * 0)"
    pending = promql.aggregate(
        "max", [*params.cluster, "cluster_queue", "status"], "kueue_pending_workloads"
    )
    buckets = f"rate(kueue_admission_wait_time_seconds_bucket[{ADMISSION_WAIT_WINDOW}])"
    wait = promql.aggregate("sum", [*params.cluster, "cluster_queue", "le"], buckets)
    return [
        (KUEUE_QUOTA, _kueue_gpu("kueue_cluster_queue_nominal_quota", params)),
        (KUEUE_USAGE, _kueue_gpu("kueue_cluster_queue_resource_usage", params)),
        (KUEUE_QUOTA_IDLE, promql.call("clamp_min", idle, "0")),
        (KUEUE_PENDING, promql.aggregate("sum", [*params.cluster, "cluster_queue"], pending)),
        (KUEUE_GPU_PENDING, f"{KUEUE_QUOTA} * 0\n+ on ({queue}) group_left ()\n{KUEUE_PENDING}"),
        (KUEUE_ADMISSION_WAIT_P90, f"histogram_quantile(0.9, {wait})"),
    ]


def scheduling_records(params: RuleParams) -> list[tuple[str, str]]:
    """(record, expr) of the scheduling rules, in evaluation order."""
    return [*gang_records(params), *capacity_records(params), *kueue_records(params)]
