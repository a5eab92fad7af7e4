"""Volcano's objects of the simulated fleet at one instant, as ``scheduling.volcano.sh/v1beta1``
lists them.

``volcano_objects(fleet, now_ts, cluster)`` gives Queues (``root``, ``default`` and the GPU
queue of :mod:`volcano_decl`) and PodGroups keyed by resource plural, shaped as Volcano's CRDs.
A gang's PodGroup is created with its pods (``Inqueue`` until they all start), is ``Running``
with its ``Scheduled`` condition from then, ``Completed`` once they finish, and is deleted a day
later. Pure: the same fleet and instant always give the same objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwatch.domain.durations import DAY_S, rfc3339
from gpuwatch.domain.scheduling import VOLCANO_GROUP, VOLCANO_VERSIONS
from gpuwatch.simulate.fleet import Fleet, WorkloadSpec
from gpuwatch.simulate.kube_dra import FLEET_CREATED_TS
from gpuwatch.simulate.noise import uuid_text
from gpuwatch.simulate.pods import PodInstance, pod_group_name
from gpuwatch.simulate.volcano_decl import (
    GPU,
    QUEUES,
    SCHEDULER_NAME,
    VOLCANO_CLUSTER,
    VOLCANO_RESOURCES,
    VolcanoQueueDecl,
)

API_VERSION = f"{VOLCANO_GROUP}/{VOLCANO_VERSIONS[0]}"
#: A completed PodGroup stays listed this long (then its owner team's cleanup deletes it).
POD_GROUP_TTL_S = DAY_S
#: What each pod asks for besides GPUs (as the simulated pods do).
POD_CPU, POD_MEMORY_GI = 4, 32


@dataclass(frozen=True)
class GangRun:
    """One cycle of a Volcano gang: its PodGroup's name and times."""

    spec: WorkloadSpec
    cycle: int
    name: str
    uid: str
    created_ts: int
    started_ts: int
    finished_ts: int

    @property
    def queue(self) -> str:
        return self.spec.volcano.queue if self.spec.volcano else ""

    @property
    def gpus(self) -> int:
        return sum(len(units) for units in self.spec.pods)

    def phase_at(self, ts: int) -> str:
        """The PodGroup's ``status.phase`` at ``ts``."""
        if ts < self.started_ts:
            return "Inqueue"
        return "Running" if ts < self.finished_ts else "Completed"


def gang_runs(
    fleet: Fleet, start_ts: int, end_ts: int, keep_s: int = 0, cluster: str | None = None
) -> list[GangRun]:
    """Cycles of Volcano gangs whose PodGroup exists in ``[start_ts, end_ts)``, kept ``keep_s``
    after they finish; in workload order."""
    found = []
    for spec in fleet.workloads:
        if spec.volcano is None or (cluster is not None and spec.cluster != cluster):
            continue
        for k in spec.schedule.cycles(start_ts - keep_s, end_ts):
            created, started, finished = spec.schedule.bounds(k, spec.key)
            if created >= end_ts or finished + keep_s <= start_ts:
                continue
            name = pod_group_name(fleet.seed, spec, k)
            uid = uuid_text(fleet.seed, spec.cluster, "PodGroup", spec.namespace, name)
            found.append(GangRun(spec, k, name, uid, created, started, finished))
    return found


def volcano_objects(
    fleet: Fleet, now_ts: int, cluster: str = VOLCANO_CLUSTER
) -> dict[str, list[dict[str, Any]]]:
    """Volcano's objects in ``cluster`` at ``now_ts`` by resource plural (none elsewhere)."""
    objects: dict[str, list[dict[str, Any]]] = {name: [] for name in VOLCANO_RESOURCES}
    if cluster != VOLCANO_CLUSTER:
        return objects
    runs = [
        run
        for run in gang_runs(fleet, now_ts, now_ts + 1, POD_GROUP_TTL_S, cluster)
        if run.created_ts <= now_ts
    ]
    objects["queues"] = [_queue(fleet, decl, runs, now_ts) for decl in QUEUES]
    objects["podgroups"] = [_pod_group(run, now_ts) for run in runs]
    return objects


def _resources(gpus: int, pods: int) -> dict[str, str]:
    return {"cpu": str(pods * POD_CPU), "memory": f"{pods * POD_MEMORY_GI}Gi", GPU: str(gpus)}


def _quota(gpus: int) -> dict[str, str]:
    """A queue's share: the GPUs with the CPU and memory of their node (12 vCPU, 48 GiB each)."""
    return {"cpu": str(gpus * 12), "memory": f"{gpus * 48}Gi", GPU: str(gpus)}


def _queue(fleet: Fleet, decl: VolcanoQueueDecl, runs: list[GangRun], ts: int) -> dict[str, Any]:
    uid = uuid_text(fleet.seed, VOLCANO_CLUSTER, "Queue", "", decl.name)
    meta = {"name": decl.name, "uid": uid, "creationTimestamp": rfc3339(FLEET_CREATED_TS)}
    spec: dict[str, Any] = {"weight": decl.weight, "reclaimable": decl.reclaimable}
    if decl.capability_gpus is not None:
        spec["capability"] = _quota(decl.capability_gpus)
    if decl.deserved_gpus is not None:
        spec["deserved"] = _quota(decl.deserved_gpus)
    mine = [run for run in runs if run.queue == decl.name]
    phases = [run.phase_at(ts) for run in mine]
    running = [run for run in mine if run.phase_at(ts) == "Running"]
    pods = sum(len(run.spec.pods) for run in running)
    status = {
        "state": "Open",
        "pending": phases.count("Pending"),
        "inqueue": phases.count("Inqueue"),
        "running": phases.count("Running"),
        "completed": phases.count("Completed"),
        "allocated": _resources(sum(run.gpus for run in running), pods),
    }
    return {"apiVersion": API_VERSION, "kind": "Queue", "metadata": meta, "spec": spec} | {
        "status": status
    }


def _pod_group(run: GangRun, ts: int) -> dict[str, Any]:
    """A PodGroup the team creates with its pods: all of them are needed (``minMember``)."""
    spec, pods = run.spec, len(run.spec.pods)
    meta = {
        "name": run.name,
        "namespace": spec.namespace,
        "uid": run.uid,
        "creationTimestamp": rfc3339(run.created_ts),
        "generation": 1,
        "labels": {"app": spec.name},
    }
    body = {"minMember": pods, "minResources": _resources(run.gpus, pods), "queue": run.queue}
    phase = run.phase_at(ts)
    status: dict[str, Any] = {"phase": phase}
    transition = uuid_text(run.uid, "transition", phase == "Inqueue")
    if phase == "Inqueue":
        message = f"{pods}/{pods} tasks in gang unschedulable: pod group is not ready"
        status["conditions"] = [
            _condition("Unschedulable", "NotEnoughResources", message, transition, run.created_ts)
        ]
    else:
        reason = "tasks in gang are ready to be scheduled"
        status["conditions"] = [_condition("Scheduled", reason, "", transition, run.started_ts)]
        status["running" if phase == "Running" else "succeeded"] = pods
    return {"apiVersion": API_VERSION, "kind": "PodGroup", "metadata": meta, "spec": body} | {
        "status": status
    }


def _condition(kind: str, reason: str, message: str, transition: str, ts: int) -> dict[str, Any]:
    condition = {"type": kind, "status": "True", "reason": reason, "transitionID": transition}
    if message:
        condition["message"] = message
    return condition | {"lastTransitionTime": rfc3339(ts)}


def volcano_pod(fleet: Fleet, inst: PodInstance, pod: dict[str, Any]) -> None:
    """Volcano's marks on a gang's pod: scheduled by ``volcano``, annotated with its PodGroup."""
    if fleet.workloads[inst.workload].volcano is None:
        return
    pod["metadata"]["annotations"] = dict(inst.annotations)
    pod["spec"]["schedulerName"] = SCHEDULER_NAME
