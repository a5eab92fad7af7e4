"""Pure parsers of Kueue objects (``kueue.x-k8s.io`` ``v1beta1`` and ``v1beta2``, plain JSON).

- ClusterQueue → one ``queue_flavors`` row per (flavor, GPU resource) of its
  ``spec.resourceGroups[].flavors[].resources[]``: ``nominalQuota``, ``borrowingLimit``,
  ``lendingLimit`` (absent: unlimited); cohort from ``spec.cohortName`` (``v1beta2``) or
  ``spec.cohort`` (``v1beta1``). Resources that are not GPUs (cpu, memory) are not rows.
- ResourceFlavor → the GPU model its ``spec.nodeLabels["nvidia.com/gpu.product"]`` selects,
  read as a node with that label would be (:func:`gpuwatch.collectors.kube_nodes.parse_node`).
- LocalQueue → its ClusterQueue (``spec.clusterQueue``).
- Workload → one ``sched_workloads`` row when its pod sets ask for GPUs: Σ over
  ``spec.podSets[]`` of ``count`` × the GPUs of the template's containers (as the scheduler
  counts a pod's), its queue (``status.admission.clusterQueue``, else its LocalQueue's), the
  flavor assigned to the GPU resource, and its state from the conditions (docs/collectors.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpuwatch.collectors.kube_nodes import is_gpu_resource, parse_node, parse_quantity
from gpuwatch.collectors.kube_parse import controller_ref, epoch_seconds, pod_gpu_requests
from gpuwatch.collectors.sched_state import GangFacts, NamespacedName, OwnerKey
from gpuwatch.domain.scheduling import WorkloadState

JsonObject = Mapping[str, Any]
KIND = "kueue"
#: The owner kind of a Workload that several pods own (a Kueue plain-pod group).
POD_GROUP_OWNER = "PodGroup"


def _meta(obj: JsonObject) -> JsonObject:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _spec(obj: JsonObject) -> JsonObject:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _name(obj: JsonObject) -> str:
    return str(_meta(obj).get("name") or "")


def _namespace(obj: JsonObject) -> str:
    return str(_meta(obj).get("namespace") or "")


def _quantity(value: object) -> float | None:
    return None if value is None else float(parse_quantity(value))


# -- ResourceFlavors, LocalQueues ---------------------------------------------------------------


def flavor_models(flavors: Iterable[JsonObject]) -> dict[str, str | None]:
    """ResourceFlavor name → the GPU model its node labels select (None: any)."""
    models: dict[str, str | None] = {}
    for flavor in flavors:
        labels = _spec(flavor).get("nodeLabels") or {}
        node = {"metadata": {"labels": dict(labels)}, "status": {}}
        models[_name(flavor)] = parse_node(node)["gpu_model"]
    return models


def local_queue_index(local_queues: Iterable[JsonObject]) -> dict[NamespacedName, str]:
    """``(namespace, LocalQueue)`` → its ClusterQueue."""
    index: dict[NamespacedName, str] = {}
    for queue in local_queues:
        cluster_queue = _spec(queue).get("clusterQueue")
        if cluster_queue:
            index[(_namespace(queue), _name(queue))] = str(cluster_queue)
    return index


# -- ClusterQueues ------------------------------------------------------------------------------


def cohort_of(cluster_queue: JsonObject) -> str | None:
    """``spec.cohortName`` (``v1beta2``) or ``spec.cohort`` (``v1beta1``); None: no cohort."""
    spec = _spec(cluster_queue)
    cohort = spec.get("cohortName") or spec.get("cohort")
    return str(cohort) if cohort else None


def parse_cluster_queue(
    cluster_queue: JsonObject, models: Mapping[str, str | None]
) -> list[dict[str, Any]]:
    """``queue_flavors`` rows of a ClusterQueue's GPU quotas; ``first_seen_ts`` is its creation
    (None when not given): a collection backfilling a window knows the quota existed since."""
    queue, cohort = _name(cluster_queue), cohort_of(cluster_queue)
    created = epoch_seconds(_meta(cluster_queue).get("creationTimestamp"))
    rows = []
    for group in _spec(cluster_queue).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            flavor_name = str(flavor.get("name") or "")
            for quota in flavor.get("resources") or []:
                resource = str(quota.get("name") or "")
                if not is_gpu_resource(resource):
                    continue
                rows.append(
                    {
                        "kind": KIND,
                        "queue": queue,
                        "cohort": cohort,
                        "flavor": flavor_name,
                        "gpu_resource": resource,
                        "gpu_model": models.get(flavor_name),
                        "nominal_gpus": _quantity(quota.get("nominalQuota") or 0),
                        "borrowing_limit_gpus": _quantity(quota.get("borrowingLimit")),
                        "lending_limit_gpus": _quantity(quota.get("lendingLimit")),
                        "first_seen_ts": created,
                    }
                )
    return rows


# -- Workloads ----------------------------------------------------------------------------------


def _conditions(obj: JsonObject) -> dict[str, JsonObject]:
    status = obj.get("status") or {}
    return {
        str(c.get("type")): c
        for c in status.get("conditions") or []
        if isinstance(c, Mapping) and c.get("type")
    }


def _true_since(conditions: Mapping[str, JsonObject], kind: str) -> tuple[bool, int | None]:
    """Whether condition ``kind`` is True, and since when (its lastTransitionTime)."""
    condition = conditions.get(kind)
    if condition is None or str(condition.get("status")) != "True":
        return False, None
    return True, epoch_seconds(condition.get("lastTransitionTime"))


def workload_state(workload: JsonObject) -> tuple[WorkloadState, int | None, int | None]:
    """``(state, admitted_ts, finished_ts)``: ``finished`` (Finished True), else ``admitted``
    (Admitted True), else ``evicted`` (Evicted True: waiting to be admitted again), else
    ``pending`` (QuotaReserved alone is not admission: admission checks still run)."""
    conditions = _conditions(workload)
    admitted, admitted_ts = _true_since(conditions, "Admitted")
    finished, finished_ts = _true_since(conditions, "Finished")
    if finished:
        return "finished", admitted_ts, finished_ts
    if admitted:
        return "admitted", admitted_ts, None
    if _true_since(conditions, "Evicted")[0]:
        return "evicted", None, None
    return "pending", None, None


def evictions_of(workload: JsonObject) -> int:
    """Times evicted: Σ ``status.schedulingStats.evictions[].count``, at least
    ``status.requeueState.count``, and at least 1 while the Evicted condition is True."""
    status = workload.get("status") or {}
    stats = (status.get("schedulingStats") or {}).get("evictions") or []
    counted = sum(int(e.get("count") or 0) for e in stats if isinstance(e, Mapping))
    requeued = int((status.get("requeueState") or {}).get("count") or 0)
    evicted = 1 if _true_since(_conditions(workload), "Evicted")[0] else 0
    return max(counted, requeued, evicted)


def pod_set_gpus(workload: JsonObject) -> tuple[Counter[str], int]:
    """GPUs asked for per resource (Σ count × per pod) and the pods asked for (Σ count)."""
    gpus: Counter[str] = Counter()
    pods = 0
    for pod_set in _spec(workload).get("podSets") or []:
        count = int(pod_set.get("count", 1) or 0)
        template = pod_set.get("template") or {}
        per_pod = pod_gpu_requests({"spec": template.get("spec") or {}})
        for resource, n in per_pod.items():
            gpus[resource] += count * n
        pods += count
    return gpus, pods


def _assigned_flavor(workload: JsonObject, resource: str) -> str | None:
    admission = (workload.get("status") or {}).get("admission") or {}
    for assignment in admission.get("podSetAssignments") or []:
        flavor = (assignment.get("flavors") or {}).get(resource)
        if flavor:
            return str(flavor)
    return None


def owner_of(workload: JsonObject) -> tuple[str | None, str | None]:
    """The Workload's controller owner (``Job``, ``JobSet``, ...); owned by several pods (a
    plain-pod group): ``PodGroup`` and the Workload's own name."""
    ref = controller_ref(workload)
    if ref is not None:
        return str(ref["kind"]), str(ref["name"])
    refs = [r for r in _meta(workload).get("ownerReferences") or [] if isinstance(r, Mapping)]
    if len(refs) > 1 and all(r.get("kind") == "Pod" for r in refs):
        return POD_GROUP_OWNER, _name(workload)
    if refs and refs[0].get("kind") and refs[0].get("name"):
        return str(refs[0]["kind"]), str(refs[0]["name"])
    return None, None


def workload_queue(workload: JsonObject, local_queues: Mapping[NamespacedName, str]) -> str | None:
    """The ClusterQueue that admitted it, else its LocalQueue's; None: unknown."""
    admitted = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue")
    if admitted:
        return str(admitted)
    local = _spec(workload).get("queueName")
    return local_queues.get((_namespace(workload), str(local))) if local else None


def parse_workload(
    workload: JsonObject, local_queues: Mapping[NamespacedName, str]
) -> dict[str, Any] | None:
    """A ``sched_workloads`` row (without ``last_seen_ts``); None when it asks for no GPU."""
    gpus, pods = pod_set_gpus(workload)
    if not +gpus:
        return None
    resource = max(gpus, key=lambda name: (gpus[name], name))
    state, admitted_ts, finished_ts = workload_state(workload)
    owner_kind, owner_name = owner_of(workload)
    meta = _meta(workload)
    return {
        "kind": KIND,
        "namespace": _namespace(workload),
        "name": _name(workload),
        "uid": str(meta.get("uid") or ""),
        "queue": workload_queue(workload, local_queues),
        "flavor": _assigned_flavor(workload, resource),
        "owner_kind": owner_kind,
        "owner_name": owner_name,
        "gpu_resource": resource,
        "gpus_requested": float(gpus[resource]),
        "pod_count": pods,
        "state": state,
        "created_ts": epoch_seconds(meta.get("creationTimestamp")),
        "admitted_ts": admitted_ts,
        "finished_ts": finished_ts,
        "evictions": evictions_of(workload),
    }


@dataclass(frozen=True)
class KueueParsed:
    """Kueue's objects as rows and the indices gangs are resolved with."""

    queue_flavors: list[dict[str, Any]]
    workloads: list[dict[str, Any]]
    local_queues: dict[NamespacedName, str]
    owners: dict[OwnerKey, GangFacts]
    groups: dict[NamespacedName, GangFacts]


def _what(kind: str, obj: JsonObject) -> str:
    namespace = _namespace(obj)
    return f"{kind} {namespace + '/' if namespace else ''}{_name(obj)}"


def parse_kueue(
    cluster_queues: Iterable[JsonObject],
    flavors: Iterable[JsonObject],
    local_queues: Iterable[JsonObject],
    workloads: Iterable[JsonObject],
) -> KueueParsed:
    """Rows and indices from listed Kueue objects; raises ValueError naming an object it cannot
    read. Of several Workloads of one owner, the newest stands for the owner's gang."""
    models = flavor_models(flavors)
    queues = local_queue_index(local_queues)
    quota_rows: list[dict[str, Any]] = []
    for cluster_queue in sorted(cluster_queues, key=_name):
        try:
            quota_rows.extend(parse_cluster_queue(cluster_queue, models))
        except ValueError as exc:
            raise ValueError(f"{_what('ClusterQueue', cluster_queue)}: {exc}") from exc
    rows: list[dict[str, Any]] = []
    owners: dict[OwnerKey, GangFacts] = {}
    groups: dict[NamespacedName, GangFacts] = {}
    for workload in sorted(workloads, key=_created_order):
        try:
            row = parse_workload(workload, queues)
            pods = pod_set_gpus(workload)[1]
        except ValueError as exc:
            raise ValueError(f"{_what('Workload', workload)}: {exc}") from exc
        facts = GangFacts(workload_queue(workload, queues), pods)
        namespace = _namespace(workload)
        owner_kind, owner_name = owner_of(workload)
        if owner_kind and owner_name:
            owners[(namespace, owner_kind, owner_name)] = facts
        groups[(namespace, _name(workload))] = facts
        if row is not None:
            rows.append(row)
    rows.sort(key=lambda r: (r["namespace"], r["name"], r["uid"]))
    return KueueParsed(quota_rows, rows, queues, owners, groups)


def _created_order(workload: JsonObject) -> tuple[str, str, str]:
    meta = _meta(workload)
    return str(meta.get("creationTimestamp") or ""), _namespace(workload), _name(workload)
