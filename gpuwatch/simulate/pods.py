"""The pods of a simulated fleet over a window: names, owners, lifetimes and GPU units.

A pod instance is a pure function of (fleet, workload, cycle, replica): a live API server asking
about any instant sees the same pods the bulk generator stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from gpuwatch.domain.labels import UNASSIGNED_TEAM
from gpuwatch.domain.scheduling import (
    KUEUE_POD_GROUP_LABEL,
    KUEUE_POD_GROUP_SIZE_ANNOTATION,
    KUEUE_QUEUE_LABEL,
    VOLCANO_GROUP_ANNOTATION,
)
from gpuwatch.simulate.fleet import Fleet, WorkloadSpec
from gpuwatch.simulate.kueue_decl import cluster_queue_of
from gpuwatch.simulate.noise import k8s_suffix, uuid_text

_JOB_KINDS = ("Job", "CronJob")


@dataclass(frozen=True)
class PodInstance:
    """One pod: it waits from ``created_ts``, holds ``units`` over ``[started_ts, finished_ts)``."""

    workload: int
    replica: int
    cycle: int
    cluster: str
    namespace: str
    name: str
    uid: str
    node: str
    units: tuple[int, ...]
    created_ts: int
    started_ts: int
    finished_ts: int
    owner_kind: str | None
    owner_name: str | None
    labels: Mapping[str, str]
    team: str
    annotations: Mapping[str, str] = field(default_factory=dict)


def pod_instances(fleet: Fleet, start_ts: int, end_ts: int) -> list[PodInstance]:
    """Every pod that exists at some instant of ``[start_ts, end_ts)``, in workload order."""
    teams = {(ns.cluster, ns.name): ns.team for ns in fleet.namespaces}
    found: list[PodInstance] = []
    for index, spec in enumerate(fleet.workloads):
        team = spec.team_label or teams.get((spec.cluster, spec.namespace), UNASSIGNED_TEAM)
        for k in spec.schedule.cycles(start_ts, end_ts):
            created, started, finished = spec.schedule.bounds(k, spec.key)
            if created >= end_ts or finished <= start_ts:
                continue
            for replica in range(len(spec.pods)):
                found.append(
                    _instance(fleet, index, spec, k, replica, (created, started, finished), team)
                )
    return found


def _instance(
    fleet: Fleet,
    index: int,
    spec: WorkloadSpec,
    k: int,
    replica: int,
    times: tuple[int, int, int],
    team: str,
) -> PodInstance:
    name, owner_kind, owner_name, labels = _naming(fleet.seed, spec, k, replica, times[0])
    if spec.team_label:
        labels["team"] = spec.team_label
    annotations = _kueue_marks(fleet.seed, spec, k, replica, labels)
    if spec.volcano is not None:
        annotations[VOLCANO_GROUP_ANNOTATION] = pod_group_name(fleet.seed, spec, k)
    delay = spec.kueue.start_delay_s(replica) if spec.kueue else 0
    units = spec.pods[replica]
    return PodInstance(
        workload=index,
        replica=replica,
        cycle=k,
        cluster=spec.cluster,
        namespace=spec.namespace,
        name=name,
        uid=uuid_text(fleet.seed, spec.cluster, spec.namespace, name, k, replica),
        node=fleet.units[units[0]].node,
        units=units,
        created_ts=times[0],
        started_ts=times[1] + delay,
        finished_ts=times[2],
        owner_kind=owner_kind,
        owner_name=owner_name,
        labels=labels,
        team=team,
        annotations=annotations,
    )


def _naming(
    seed: int, spec: WorkloadSpec, k: int, replica: int, created_ts: int
) -> tuple[str, str | None, str | None, dict[str, str]]:
    """``(pod, direct owner kind, direct owner name, labels)``, named the way controllers do."""
    name = spec.name
    suffix = k8s_suffix(5, seed, spec.key, k, replica)
    if spec.kind == "Deployment":
        template_hash = k8s_suffix(10, seed, spec.key, k)
        owner = f"{name}-{template_hash}"
        labels = {"app": name, "pod-template-hash": template_hash}
        return f"{owner}-{suffix}", "ReplicaSet", owner, labels
    if spec.kind == "StatefulSet":
        pod = f"{name}-{replica}"
        revision = f"{name}-{k8s_suffix(10, seed, spec.key, k)}"
        labels = {
            "app": name,
            "controller-revision-hash": revision,
            "statefulset.kubernetes.io/pod-name": pod,
        }
        return pod, "StatefulSet", name, labels
    if spec.kind in _JOB_KINDS:
        # A CronJob names its Jobs after the scheduled time in minutes since the epoch.
        tail = str(created_ts // 60) if spec.kind == "CronJob" else k8s_suffix(5, seed, spec.key, k)
        job = f"{name}-{tail}"
        labels = {"app": name, "job-name": job, "batch.kubernetes.io/job-name": job}
        if spec.kueue is not None:  # Kueue's Jobs are Indexed: pods <job>-<index>-<suffix>
            labels["batch.kubernetes.io/job-completion-index"] = str(replica)
            return f"{job}-{replica}-{suffix}", "Job", job, labels
        return f"{job}-{suffix}", "Job", job, labels
    grouped = spec.volcano is not None or (spec.kueue is not None and spec.kueue.pod_group)
    if grouped:  # pods named after their group
        return f"{pod_group_name(seed, spec, k)}-{replica}", None, None, {"app": name}
    pod = name if len(spec.pods) == 1 else f"{name}-{replica}"
    return pod, None, None, {"app": name}


def owner_job(seed: int, spec: WorkloadSpec, k: int, created_ts: int) -> str | None:
    """The Job that runs cycle ``k`` of a Job or CronJob workload (created at ``created_ts``)."""
    return _naming(seed, spec, k, 0, created_ts)[2]


def pod_group_name(seed: int, spec: WorkloadSpec, k: int) -> str:
    """The Kueue pod group or Volcano PodGroup of cycle ``k`` of a workload of plain pods."""
    return f"{spec.name}-{k8s_suffix(5, seed, spec.key, k, 'group')}"


def _kueue_marks(
    seed: int, spec: WorkloadSpec, k: int, replica: int, labels: dict[str, str]
) -> dict[str, str]:
    """Add Kueue's labels to a pod of a Kueue workload; its annotations."""
    if spec.kueue is None:
        return {}
    labels[KUEUE_QUEUE_LABEL] = spec.kueue.local_queue
    if not spec.kueue.pod_group:
        return {"batch.kubernetes.io/job-completion-index": str(replica)}
    labels[KUEUE_POD_GROUP_LABEL] = pod_group_name(seed, spec, k)
    labels["kueue.x-k8s.io/managed"] = "true"
    return {KUEUE_POD_GROUP_SIZE_ANNOTATION: str(len(spec.pods))}


def gang_of(inst: PodInstance, spec: WorkloadSpec) -> dict[str, object]:
    """The pod's ``queue``, ``gang_kind``, ``gang_name`` and ``gang_size`` (docs/cost-model.md)."""
    size = len(spec.pods)
    if spec.kueue is not None:
        group = inst.labels.get(KUEUE_POD_GROUP_LABEL)
        name = group or f"job/{inst.owner_name}"
        queue = cluster_queue_of(spec.namespace, spec.kueue.local_queue)
        return {"queue": queue, "gang_kind": "kueue", "gang_name": name, "gang_size": size}
    if spec.volcano is not None:
        group = inst.annotations.get(VOLCANO_GROUP_ANNOTATION)
        return {"queue": spec.volcano.queue, "gang_kind": "volcano", "gang_name": group} | {
            "gang_size": size
        }
    if inst.owner_kind == "Job" and size > 1:
        return {"queue": None, "gang_kind": "job", "gang_name": inst.owner_name, "gang_size": size}
    return {"queue": None, "gang_kind": None, "gang_name": None, "gang_size": None}


def pods_at(fleet: Fleet, ts: int) -> pd.DataFrame:
    """The pods that exist at instant ``ts``, as the API shows them then (for a live API)."""
    return pods_frame(fleet, pod_instances(fleet, ts, ts + 1), ts + 1)


def pods_frame(fleet: Fleet, instances: list[PodInstance], as_of_ts: int) -> pd.DataFrame:
    """The pods as the API shows them just before ``as_of_ts``: Pending (no node, no start)
    until they start, Running (no finish) until they finish, then Succeeded. Timestamps after
    ``as_of_ts`` are not known yet and are left empty."""
    rows = []
    for inst in instances:
        spec = fleet.workloads[inst.workload]
        pending = inst.started_ts >= as_of_ts
        running = not pending and inst.finished_ts > as_of_ts
        phase = "Pending" if pending else "Running" if running else "Succeeded"
        rows.append(
            {
                "cluster": inst.cluster,
                "namespace": inst.namespace,
                "pod": inst.name,
                "uid": inst.uid,
                "node": None if pending else inst.node,
                "phase": phase,
                "workload_kind": spec.kind,
                # A bare pod is its own workload (a pod group's pods each one).
                "workload_name": inst.name if spec.kind == "Pod" else spec.name,
                "team": inst.team,
                "gpu_resource": spec.gpu_resource,
                "gpu_count": len(inst.units),
                "allocation": spec.allocation,
                "labels": dict(inst.labels),
                "owner_kind": inst.owner_kind,
                "owner_name": inst.owner_name,
                "created_ts": inst.created_ts,
                "started_ts": None if pending else inst.started_ts,
                "finished_ts": None if pending or running else inst.finished_ts,
                **gang_of(inst, spec),
            }
        )
    frame = pd.DataFrame(rows, columns=POD_COLUMNS)
    types = {"created_ts": "int64", "started_ts": "Int64", "finished_ts": "Int64"}
    return frame.astype(types | {"gang_size": "Int64"})


POD_COLUMNS = [
    "cluster",
    "namespace",
    "pod",
    "uid",
    "node",
    "phase",
    "workload_kind",
    "workload_name",
    "team",
    "gpu_resource",
    "gpu_count",
    "allocation",
    "labels",
    "owner_kind",
    "owner_name",
    "created_ts",
    "started_ts",
    "finished_ts",
    "queue",
    "gang_kind",
    "gang_name",
    "gang_size",
]
