"""Kueue's objects of the simulated fleet at one instant, as ``kueue.x-k8s.io`` lists them.

``queue_objects(fleet, now_ts)`` gives ResourceFlavors, ClusterQueues (one cohort), LocalQueues
and Workloads keyed by resource plural, shaped as Kueue's CRDs in ``v1beta1`` (the default) or
``v1beta2`` (where the cohort is ``spec.cohortName``). A Workload exists from its Job's creation
(pending, without ``status.admission``, while Kueue keeps the Job suspended) through admission
(``status.admission`` with the flavor each resource got) to its Job's deletion a day after it
finished. Pure: the same fleet and instant always give the same objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwatch.domain.durations import DAY_S, rfc3339
from gpuwatch.domain.scheduling import KUEUE_GROUP
from gpuwatch.simulate.fleet import Fleet, WorkloadSpec
from gpuwatch.simulate.kube_dra import FLEET_CREATED_TS
from gpuwatch.simulate.kueue_decl import (
    CLUSTER_QUEUES,
    COHORT,
    FLAVORS,
    GPU,
    KUEUE_CLUSTER,
    LOCAL_QUEUES,
    QUEUE_RESOURCES,
    ClusterQueueDecl,
    cluster_queue_of,
    flavor,
    queue_flavor,
)
from gpuwatch.simulate.noise import k8s_suffix, uuid_text
from gpuwatch.simulate.pods import PodInstance, owner_job, pod_group_name

KUEUE_VERSIONS = ("v1beta1", "v1beta2")
#: A finished Workload goes with its Job (the Jobs' ``ttlSecondsAfterFinished``).
WORKLOAD_TTL_S = DAY_S
#: What each pod asks for besides GPUs (as the simulated pods do).
POD_CPU, POD_MEMORY_GI = 4, 32


@dataclass(frozen=True)
class QueuedRun:
    """One cycle of a Kueue workload: its Workload's name, queue, flavor and times."""

    spec: WorkloadSpec
    cycle: int
    name: str
    uid: str
    owner_kind: str | None
    owner_name: str
    cluster_queue: str
    flavor: str | None
    created_ts: int
    admitted_ts: int
    all_started_ts: int
    finished_ts: int

    @property
    def gpus(self) -> int:
        return sum(len(units) for units in self.spec.pods)

    def state_at(self, ts: int) -> str:
        """``pending``, ``admitted`` or ``finished`` at ``ts`` (``gpuwatch.domain.scheduling``)."""
        if ts < self.admitted_ts:
            return "pending"
        return "admitted" if ts < self.finished_ts else "finished"


def queued_runs(
    fleet: Fleet, start_ts: int, end_ts: int, keep_s: int = 0, cluster: str | None = None
) -> list[QueuedRun]:
    """Runs of Kueue workloads whose Workload exists in ``[start_ts, end_ts)``, kept ``keep_s``
    after they finish; in workload order."""
    found = []
    for spec in fleet.workloads:
        if spec.kueue is None or (cluster is not None and spec.cluster != cluster):
            continue
        queued_s = spec.kueue.queued_s
        for k in spec.schedule.cycles(start_ts - keep_s, end_ts + queued_s):
            run = _run(fleet, spec, k)
            if run.created_ts < end_ts and run.finished_ts + keep_s > start_ts:
                found.append(run)
    return found


def _run(fleet: Fleet, spec: WorkloadSpec, k: int) -> QueuedRun:
    assert spec.kueue is not None
    created, started, finished = spec.schedule.bounds(k, spec.key)
    delay = max(spec.kueue.start_delay_s(r) for r in range(len(spec.pods)))
    if spec.kueue.pod_group:
        owner_kind, owner = None, pod_group_name(fleet.seed, spec, k)
        name = owner
    else:
        owner_kind, owner = "Job", str(owner_job(fleet.seed, spec, k, created))
        name = f"job-{owner}-{k8s_suffix(5, fleet.seed, 'workload', owner)}"
    queue = str(cluster_queue_of(spec.namespace, spec.kueue.local_queue))
    node = fleet.units[spec.pods[0][0]].node
    product = fleet.node(spec.cluster, node).labels["nvidia.com/gpu.product"]
    return QueuedRun(
        spec=spec,
        cycle=k,
        name=name,
        uid=uuid_text(fleet.seed, spec.cluster, "Workload", spec.namespace, name),
        owner_kind=owner_kind,
        owner_name=owner,
        cluster_queue=queue,
        flavor=queue_flavor(queue, product),
        created_ts=created - spec.kueue.queued_s,
        admitted_ts=created,
        all_started_ts=started + delay,
        finished_ts=finished,
    )


def queue_objects(
    fleet: Fleet, now_ts: int, cluster: str = KUEUE_CLUSTER, version: str = "v1beta1"
) -> dict[str, list[dict[str, Any]]]:
    """Kueue's objects in ``cluster`` at ``now_ts`` by resource plural (none elsewhere)."""
    if version not in KUEUE_VERSIONS:
        raise ValueError(f"unknown {KUEUE_GROUP} version {version!r}: one of {KUEUE_VERSIONS}")
    objects: dict[str, list[dict[str, Any]]] = {name: [] for name in QUEUE_RESOURCES}
    if cluster != KUEUE_CLUSTER:
        return objects
    api = f"{KUEUE_GROUP}/{version}"
    runs = [
        run
        for run in queued_runs(fleet, now_ts, now_ts + 1, WORKLOAD_TTL_S, cluster)
        if run.created_ts <= now_ts
    ]
    meta = _Meta(fleet, cluster)
    objects["resourceflavors"] = [
        {"apiVersion": api, "kind": "ResourceFlavor", "metadata": meta(f.name)}
        | {"spec": {"nodeLabels": f.labels}}
        for f in FLAVORS
    ]
    objects["clusterqueues"] = [
        _cluster_queue(api, meta(q.name), q, runs, now_ts, version) for q in CLUSTER_QUEUES
    ]
    objects["localqueues"] = [
        _local_queue(api, meta(name, ns), queue, runs, now_ts) for ns, name, queue in LOCAL_QUEUES
    ]
    objects["workloads"] = [_workload(api, fleet, run, now_ts) for run in runs]
    return objects


@dataclass(frozen=True)
class _Meta:
    fleet: Fleet
    cluster: str

    def __call__(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        uid = uuid_text(self.fleet.seed, self.cluster, "kueue", namespace or "", name)
        meta = {"name": name, "uid": uid, "creationTimestamp": rfc3339(FLEET_CREATED_TS)}
        return meta if namespace is None else {**meta, "namespace": namespace}


def _quantity_gi(gi: int) -> str:
    return f"{gi}Gi"


def _cluster_queue(
    api: str,
    meta: dict[str, Any],
    decl: ClusterQueueDecl,
    runs: list[QueuedRun],
    ts: int,
    version: str,
) -> dict[str, Any]:
    flavors = []
    for quota in decl.quotas:
        gpu: dict[str, Any] = {"name": GPU, "nominalQuota": str(quota.nominal_gpus)}
        if quota.borrowing_limit_gpus is not None:
            gpu["borrowingLimit"] = str(quota.borrowing_limit_gpus)
        if quota.lending_limit_gpus is not None:
            gpu["lendingLimit"] = str(quota.lending_limit_gpus)
        cpu = {"name": "cpu", "nominalQuota": str(quota.nominal_gpus * 12)}
        memory = {"name": "memory", "nominalQuota": _quantity_gi(quota.nominal_gpus * 128)}
        flavors.append({"name": quota.flavor, "resources": [cpu, memory, gpu]})
    spec: dict[str, Any] = {
        "cohortName" if version == "v1beta2" else "cohort": decl.cohort or COHORT,
        "namespaceSelector": {},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"},
        "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": flavors}],
    }
    mine = [r for r in runs if r.cluster_queue == decl.name]
    usage = [_flavor_usage(q.flavor, mine, ts) for q in decl.quotas]
    status = _counts(mine, ts) | {"flavorsReservation": usage, "flavorsUsage": usage}
    status["conditions"] = [_condition("Active", True, "Ready", "Can admit new workloads", 0)]
    return {"apiVersion": api, "kind": "ClusterQueue", "metadata": meta, "spec": spec} | {
        "status": status
    }


def _flavor_usage(flavor: str, runs: list[QueuedRun], ts: int) -> dict[str, Any]:
    held = [r for r in runs if r.flavor == flavor and r.state_at(ts) == "admitted"]
    pods = sum(len(r.spec.pods) for r in held)
    totals = {
        "cpu": str(pods * POD_CPU),
        "memory": _quantity_gi(pods * POD_MEMORY_GI),
        GPU: str(sum(r.gpus for r in held)),
    }
    resources = [{"name": n, "total": total, "borrowed": "0"} for n, total in totals.items()]
    return {"name": flavor, "resources": resources}


def _counts(runs: list[QueuedRun], ts: int) -> dict[str, int]:
    states = [r.state_at(ts) for r in runs]
    admitted = states.count("admitted")
    return {
        "pendingWorkloads": states.count("pending"),
        "reservingWorkloads": admitted,
        "admittedWorkloads": admitted,
    }


def _local_queue(
    api: str, meta: dict[str, Any], queue: str, runs: list[QueuedRun], ts: int
) -> dict[str, Any]:
    mine = [r for r in runs if (r.spec.namespace, r.cluster_queue) == (meta["namespace"], queue)]
    status = _counts(mine, ts) | {
        "conditions": [_condition("Active", True, "Ready", "Can submit new workloads", 0)]
    }
    spec = {"clusterQueue": queue, "stopPolicy": "None"}
    return {"apiVersion": api, "kind": "LocalQueue", "metadata": meta, "spec": spec} | {
        "status": status
    }


def _condition(kind: str, status: bool, reason: str, message: str, ts: int) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": rfc3339(ts or FLEET_CREATED_TS),
    }


def _workload(api: str, fleet: Fleet, run: QueuedRun, ts: int) -> dict[str, Any]:
    """A Workload: its pod set, and its admission and conditions as of ``ts``."""
    spec, count = run.spec, len(run.spec.pods)
    per_pod = len(spec.pods[0])
    meta = {
        "name": run.name,
        "namespace": spec.namespace,
        "uid": run.uid,
        "creationTimestamp": rfc3339(run.created_ts),
        "labels": {"kueue.x-k8s.io/queue-name": str(spec.kueue and spec.kueue.local_queue)},
        "ownerReferences": _owners(fleet, run),
    }
    requests = {GPU: str(per_pod), "cpu": str(POD_CPU), "memory": _quantity_gi(POD_MEMORY_GI)}
    container = {
        "name": spec.name,
        "resources": {"requests": requests, "limits": {GPU: str(per_pod)}},
    }
    template = {"spec": {"containers": [container], "restartPolicy": "Never"}}
    body = {
        "active": True,
        "queueName": spec.kueue.local_queue if spec.kueue else "",
        "priority": 0,
        "podSets": [{"name": "main", "count": count, "template": template}],
    }
    status = _workload_status(run, ts)
    return {"apiVersion": api, "kind": "Workload", "metadata": meta, "spec": body} | {
        "status": status
    }


def _owners(fleet: Fleet, run: QueuedRun) -> list[dict[str, Any]]:
    """A Job's Workload is owned by the Job; a pod group's by its pods."""
    spec, seed = run.spec, fleet.seed
    if run.owner_kind == "Job":
        uid = uuid_text(seed, spec.cluster, "Job", spec.namespace, run.owner_name)
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": run.owner_name, "uid": uid}
        return [owner | {"controller": True, "blockOwnerDeletion": True}]
    owners = []
    for replica in range(len(spec.pods)):
        pod = f"{run.owner_name}-{replica}"
        uid = uuid_text(seed, spec.cluster, spec.namespace, pod, run.cycle, replica)
        owners.append({"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid})
    return owners


def _workload_status(run: QueuedRun, ts: int) -> dict[str, Any]:
    state = run.state_at(ts)
    if state == "pending":
        message = (
            f"couldn't assign flavors to pod set main: insufficient unused quota for {GPU} in "
            f"flavor {run.flavor}, {run.gpus} more needed"
        )
        return {
            "conditions": [_condition("QuotaReserved", False, "Pending", message, run.created_ts)]
        }
    queue, admitted = run.cluster_queue, run.admitted_ts
    conditions = [
        _condition(
            "QuotaReserved",
            True,
            "QuotaReserved",
            f"Quota reserved in ClusterQueue {queue}",
            admitted,
        ),
        _condition("Admitted", True, "Admitted", "The workload is admitted", admitted),
    ]
    ready = ts >= run.all_started_ts
    reason, message = (
        ("PodsReady", "All pods reached readiness and the workload is running")
        if ready
        else ("WaitForStart", "Not all pods are ready or succeeded")
    )
    conditions.append(
        _condition("PodsReady", ready, reason, message, run.all_started_ts if ready else admitted)
    )
    if state == "finished":
        conditions.append(
            _condition("Finished", True, "Succeeded", "Job finished successfully", run.finished_ts)
        )
    pods = len(run.spec.pods)
    assignment = {
        "name": "main",
        "count": pods,
        "flavors": dict.fromkeys(("cpu", "memory", GPU), run.flavor),
        "resourceUsage": {
            "cpu": str(pods * POD_CPU),
            "memory": _quantity_gi(pods * POD_MEMORY_GI),
            GPU: str(run.gpus),
        },
    }
    admission = {"clusterQueue": queue, "podSetAssignments": [assignment]}
    return {"admission": admission, "conditions": conditions}


def kueue_pod(fleet: Fleet, inst: PodInstance, pod: dict[str, Any]) -> None:
    """Kueue's marks on an admitted pod: its annotations, and its flavor's node labels in the
    nodeSelector (Kueue injects them at admission)."""
    spec = fleet.workloads[inst.workload]
    if inst.annotations:
        pod["metadata"]["annotations"] = dict(inst.annotations)
    queue = cluster_queue_of(spec.namespace, spec.kueue.local_queue) if spec.kueue else None
    product = fleet.node(inst.cluster, inst.node).labels["nvidia.com/gpu.product"]
    name = queue_flavor(queue, product) if queue else None
    if name is not None:
        pod["spec"]["nodeSelector"] = flavor(name).labels


def kueue_job(spec: WorkloadSpec, job: dict[str, Any], suspended: bool = False) -> None:
    """A Kueue Job: labelled with its LocalQueue, Indexed, suspended until admitted."""
    if spec.kueue is None:
        return
    job["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = spec.kueue.local_queue
    job["spec"] |= {"completionMode": "Indexed", "suspend": suspended}


def suspended_jobs(fleet: Fleet, ts: int, cluster: str) -> list[dict[str, Any]]:
    """The Jobs whose Workloads wait for admission at ``ts``: suspended, without pods."""
    jobs = []
    for run in queued_runs(fleet, ts, ts + 1, 0, cluster):
        if run.owner_kind != "Job" or run.state_at(ts) != "pending" or run.created_ts > ts:
            continue
        spec, count = run.spec, len(run.spec.pods)
        uid = uuid_text(fleet.seed, spec.cluster, "Job", spec.namespace, run.owner_name)
        meta: dict[str, Any] = {"name": run.owner_name, "namespace": spec.namespace, "uid": uid}
        meta |= {"creationTimestamp": rfc3339(run.created_ts), "labels": {"app": spec.name}}
        body = {"parallelism": count, "completions": count, "ttlSecondsAfterFinished": DAY_S}
        job = {"metadata": meta, "spec": body, "status": {}}
        kueue_job(spec, job, suspended=True)
        jobs.append(job)
    return jobs
