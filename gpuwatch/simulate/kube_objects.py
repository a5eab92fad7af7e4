"""The Kubernetes objects of one simulated cluster at one instant, as the API would list them.

``kube_objects(fleet, ts, cluster)`` returns plain JSON-shaped dicts keyed by resource name
(``pods``, ``nodes``, ``namespaces``, ``replicasets``, ``deployments``, ``statefulsets``,
``daemonsets``, ``jobs``, ``cronjobs``, and ``resource.k8s.io``'s ``resourceclaims``,
``resourceslices``, ``deviceclasses`` in the version asked for), ready for
:class:`gpuwatch.simulate.apiserver.KubeApiServer`. Pure: the same fleet and instant always give
the same objects.

What they contain:

- the pods that exist at ``ts`` (Pending ones without a node), each container asking for its GPUs
  in ``resources.limits`` (``nvidia.com/gpu``, ``nvidia.com/gpu.shared`` or
  ``nvidia.com/mig-<profile>``), or on DRA nodes through a ResourceClaim (``spec.resourceClaims``,
  container ``resources.claims``; see :mod:`kube_dra`), with the owner chain its controller
  would write: ReplicaSet → Deployment, Job → CronJob, StatefulSet, or none for a bare pod;
- pods of Jobs that finished within ``JOB_TTL_S`` (``Succeeded``, kept until their Job's
  ``ttlSecondsAfterFinished``), so a collection over the recent past still finds their owners;
- the dcgm-exporter DaemonSet's pod on every GPU node, in ``gpu-operator``, asking for no GPU;
- GPU nodes with their GPU Feature Discovery and capacity-type labels and GPU capacity (none on
  DRA nodes; ``nvidia.com/gpu`` = GPUs × replicas on the MPS node), plus one CPU-only node;
- namespaces with their ``team`` label, and the controllers the pods name;
- Kueue's ResourceFlavors, ClusterQueues, LocalQueues and Workloads (:mod:`kube_queues`), its
  Jobs labelled with their LocalQueue and Indexed (suspended while their Workload waits);
- Volcano's Queues and PodGroups (:mod:`kube_volcano`, in ``research-eu`` only), the gang's pods
  annotated with their PodGroup and scheduled by ``volcano``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from gpuwatch.domain.allocation import DRA, MPS, TIME_SLICE
from gpuwatch.domain.durations import DAY_S, HOUR_S, rfc3339
from gpuwatch.simulate.dra import is_dra
from gpuwatch.simulate.fleet import Fleet, NodeSpec, WorkloadSpec
from gpuwatch.simulate.kube_dra import DRA_RESOURCES, FLEET_CREATED_TS, dra_objects, pod_claims
from gpuwatch.simulate.kube_queues import kueue_job, kueue_pod, queue_objects, suspended_jobs
from gpuwatch.simulate.kube_volcano import volcano_objects, volcano_pod
from gpuwatch.simulate.kueue_decl import QUEUE_RESOURCES
from gpuwatch.simulate.noise import k8s_suffix, uuid_text
from gpuwatch.simulate.pods import PodInstance, pod_instances
from gpuwatch.simulate.volcano_decl import VOLCANO_RESOURCES

#: Finished Job pods stay listed this long (the Jobs' ``ttlSecondsAfterFinished``).
JOB_TTL_S = DAY_S
EXPORTER_NAMESPACE = "gpu-operator"
EXPORTER_DAEMONSET = "nvidia-dcgm-exporter"
EXPORTER_CONTAINER = "nvidia-dcgm-exporter"
_EXPORTER_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04"
_FLEET_CREATED_TS = FLEET_CREATED_TS  # nodes, namespaces and controllers predate any ts
_JOB_KINDS = ("Job", "CronJob")
_IMAGES = {
    "Deployment": "registry.example.com/serving/{name}:1.4.2",
    "StatefulSet": "quay.io/jupyter/pytorch-notebook:cuda12-2024-11-11",
    "Job": "registry.example.com/training/{name}:2024.11",
    "CronJob": "registry.example.com/batch/{name}:2024.11",
    "Pod": "nvcr.io/nvidia/pytorch:24.10-py3",
}
RESOURCES = (
    "pods",
    "nodes",
    "namespaces",
    "replicasets",
    "deployments",
    "statefulsets",
    "daemonsets",
    "jobs",
    "cronjobs",
    *DRA_RESOURCES,
    *QUEUE_RESOURCES,
    *VOLCANO_RESOURCES,
)


def container_name(spec: WorkloadSpec) -> str:
    """The name of the container holding a workload's GPUs (the exporter's ``container``)."""
    return "notebook" if spec.kind == "StatefulSet" else spec.name


def _meta(
    fleet: Fleet, cluster: str, kind: str, namespace: str | None, name: str, created_ts: int
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "uid": uuid_text(fleet.seed, cluster, kind, namespace or "", name),
        "creationTimestamp": rfc3339(created_ts),
    }
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _owner(fleet: Fleet, cluster: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
    group = "batch/v1" if kind in _JOB_KINDS else "apps/v1"
    return {
        "apiVersion": group,
        "kind": kind,
        "name": name,
        "uid": uuid_text(fleet.seed, cluster, kind, namespace, name),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def kube_objects(
    fleet: Fleet, ts: int, cluster: str, dra_version: str = "v1", kueue_version: str = "v1beta1"
) -> dict[str, list[dict[str, Any]]]:
    """Every object of ``cluster`` the API lists at instant ``ts``, by resource name
    (``resource.k8s.io`` objects shaped as ``dra_version``, Kueue's as ``kueue_version``)."""
    if cluster not in fleet.clusters:
        raise ValueError(f"no simulated cluster {cluster!r}: choose one of {list(fleet.clusters)}")
    objects: dict[str, list[dict[str, Any]]] = {name: [] for name in RESOURCES}
    nodes = [node for node in fleet.nodes if node.cluster == cluster]
    listed = listed_pods(fleet, ts, cluster)
    for instance in listed:
        _add_pod(fleet, objects, instance, ts)
    # Generated claims of terminated pods are deleted by the resourceclaim controller.
    alive = [i for i in listed if phase_at(i, ts) != "Succeeded"]
    running = {i.uid for i in alive if phase_at(i, ts) == "Running"}
    objects.update(dra_objects(fleet, cluster, alive, running, dra_version))
    for node in nodes:
        objects["nodes"].append(node_object(fleet, node))
        objects["pods"].append(exporter_pod(fleet, node))
    objects["nodes"].append(_system_node(fleet, cluster))
    objects["namespaces"] = _namespaces(fleet, cluster)
    objects["daemonsets"].append(_exporter_daemonset(fleet, cluster, len(nodes)))
    for spec in fleet.workloads:
        if spec.cluster == cluster and spec.kind in ("Deployment", "StatefulSet", "CronJob"):
            objects[spec.kind.lower() + "s"].append(_controller(fleet, spec))
    objects["jobs"].extend(suspended_jobs(fleet, ts, cluster))
    objects.update(queue_objects(fleet, ts, cluster, kueue_version))
    objects.update(volcano_objects(fleet, ts, cluster))
    for name in ("replicasets", "jobs"):
        unique = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects[name]}
        objects[name] = [unique[key] for key in sorted(unique)]
    return objects


def listed_pods(fleet: Fleet, ts: int, cluster: str) -> list[PodInstance]:
    """The workload pods the API lists at ``ts``: those created and not yet finished, and Job
    pods that finished within ``JOB_TTL_S`` (other finished pods are deleted at once)."""
    found = []
    for inst in pod_instances(fleet, ts - JOB_TTL_S, ts + 1):
        kind = fleet.workloads[inst.workload].kind
        if inst.cluster != cluster:
            continue
        if inst.finished_ts <= ts and kind not in _JOB_KINDS:
            continue
        found.append(inst)
    return found


def phase_at(inst: PodInstance, ts: int) -> str:
    """The pod's phase as the API shows it at ``ts`` (as in ``pods_frame`` as of ``ts + 1``)."""
    if inst.started_ts > ts:
        return "Pending"
    return "Running" if inst.finished_ts > ts + 1 else "Succeeded"


def _add_pod(
    fleet: Fleet, objects: dict[str, list[dict[str, Any]]], inst: PodInstance, ts: int
) -> None:
    spec = fleet.workloads[inst.workload]
    objects["pods"].append(pod_object(fleet, inst, ts))
    if inst.owner_kind == "ReplicaSet" and inst.owner_name:
        objects["replicasets"].append(_replicaset(fleet, spec, inst))
    elif inst.owner_kind == "Job" and inst.owner_name:
        objects["jobs"].append(_job(fleet, spec, inst, ts))


def pod_object(fleet: Fleet, inst: PodInstance, ts: int) -> dict[str, Any]:
    """A workload pod as listed at ``ts``."""
    spec = fleet.workloads[inst.workload]
    meta = _meta(fleet, inst.cluster, "Pod", inst.namespace, inst.name, inst.created_ts)
    meta["uid"] = inst.uid
    meta["labels"] = dict(inst.labels)
    if inst.owner_kind and inst.owner_name:
        meta["ownerReferences"] = [
            _owner(fleet, inst.cluster, inst.owner_kind, inst.namespace, inst.owner_name)
        ]
    count = str(len(inst.units))
    container = {
        "name": container_name(spec),
        "image": _IMAGES[spec.kind].format(name=spec.name),
        "resources": {
            "limits": {spec.gpu_resource: count, "memory": "32Gi"},
            "requests": {spec.gpu_resource: count, "cpu": "4", "memory": "32Gi"},
        },
    }
    restart = "Never" if spec.kind in _JOB_KINDS else "Always"
    pod_spec: dict[str, Any] = {"containers": [container], "restartPolicy": restart}
    phase = phase_at(inst, ts)
    if phase != "Pending":
        pod_spec["nodeName"] = inst.node
    pod = {"metadata": meta, "spec": pod_spec, "status": _pod_status(spec, inst, phase)}
    if is_dra(fleet, inst):
        pod_claims(fleet, inst, pod, phase)
    if spec.kueue is not None:
        kueue_pod(fleet, inst, pod)
    volcano_pod(fleet, inst, pod)
    return pod


def _pod_status(spec: WorkloadSpec, inst: PodInstance, phase: str) -> dict[str, Any]:
    if phase == "Pending":
        reason = f"0/1 nodes are available: 1 Insufficient {spec.gpu_resource}."
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        return {"phase": phase, "conditions": [{**condition, "message": reason}]}
    started = rfc3339(inst.started_ts)
    if phase == "Running":
        state: dict[str, Any] = {"running": {"startedAt": started}}
    else:
        finished = rfc3339(inst.finished_ts)
        state = {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": started,
                "finishedAt": finished,
            }
        }
    status = {"name": container_name(spec), "ready": phase == "Running", "state": state}
    return {"phase": phase, "startTime": started, "containerStatuses": [status]}


def exporter_pod(fleet: Fleet, node: NodeSpec) -> dict[str, Any]:
    """The dcgm-exporter DaemonSet's pod on ``node``: it requests no GPU."""
    meta = _meta(
        fleet, node.cluster, "Pod", EXPORTER_NAMESPACE, node.exporter_pod, _FLEET_CREATED_TS
    )
    meta["labels"] = {"app": EXPORTER_DAEMONSET, "app.kubernetes.io/name": "dcgm-exporter"}
    meta["ownerReferences"] = [
        _owner(fleet, node.cluster, "DaemonSet", EXPORTER_NAMESPACE, EXPORTER_DAEMONSET)
    ]
    container = {
        "name": EXPORTER_CONTAINER,
        "image": _EXPORTER_IMAGE,
        "env": [{"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"}],
        "ports": [{"name": "metrics", "containerPort": 9400}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
    }
    started = rfc3339(_FLEET_CREATED_TS)
    running = {
        "name": EXPORTER_CONTAINER,
        "ready": True,
        "state": {"running": {"startedAt": started}},
    }
    return {
        "metadata": meta,
        "spec": {"nodeName": node.name, "containers": [container], "restartPolicy": "Always"},
        "status": {"phase": "Running", "startTime": started, "containerStatuses": [running]},
    }


def _gpu_capacity(node: NodeSpec) -> dict[str, str]:
    """Extended resources the device plugin advertises on the node."""
    labels = node.labels
    if node.gpu_sharing == DRA:
        return {}
    if node.gpu_sharing == MPS:
        return {"nvidia.com/gpu": str(node.gpu_count * node.timeslice_replicas)}
    if node.mig_strategy == "mixed":
        capacity = {"nvidia.com/gpu": "0"}
        for key, value in sorted(labels.items()):
            if key.startswith("nvidia.com/mig-") and key.endswith(".count"):
                capacity[key.removesuffix(".count")] = value
        return capacity
    if node.gpu_sharing == TIME_SLICE:
        shared = str(node.gpu_count * node.timeslice_replicas)
        return {"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": shared}
    return {"nvidia.com/gpu": str(node.gpu_count)}


def provider_id(cluster: str, name: str, labels: Mapping[str, str]) -> str:
    """The node's ``spec.providerID`` as its cloud writes it (EC2 and GKE node names)."""
    zone = labels.get("topology.kubernetes.io/zone", "zone-a")
    digest = hashlib.sha256(f"{cluster}/{name}".encode()).hexdigest()
    if name.endswith(".ec2.internal"):
        return f"aws:///{zone}/i-{digest[:17]}"
    if name.startswith("gke-"):
        return f"gce://gpuwatch-sim/{zone}/{name}"
    return f"sim:///{cluster}/{name}"


def node_object(fleet: Fleet, node: NodeSpec) -> dict[str, Any]:
    """A GPU node with its labels and GPU capacity."""
    meta = _meta(fleet, node.cluster, "Node", None, node.name, _FLEET_CREATED_TS)
    meta["labels"] = dict(node.labels)
    cpu = 96 if node.gpu_count == 8 else 48
    capacity = {"cpu": str(cpu), "memory": f"{cpu * 8}Gi", "pods": "110", **_gpu_capacity(node)}
    return {
        "metadata": meta,
        "spec": {"providerID": provider_id(node.cluster, node.name, node.labels)},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {"kubeletVersion": "v1.34.1", "architecture": "amd64"},
        },
    }


def _system_node(fleet: Fleet, cluster: str) -> dict[str, Any]:
    name = f"system-{k8s_suffix(5, fleet.seed, cluster, 'system')}"
    meta = _meta(fleet, cluster, "Node", None, name, _FLEET_CREATED_TS)
    meta["labels"] = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "m6i.2xlarge",
    }
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    return {"metadata": meta, "status": {"capacity": capacity, "allocatable": dict(capacity)}}


def _namespaces(fleet: Fleet, cluster: str) -> list[dict[str, Any]]:
    rows = [(ns.name, dict(ns.labels)) for ns in fleet.namespaces if ns.cluster == cluster]
    rows.append((EXPORTER_NAMESPACE, {"kubernetes.io/metadata.name": EXPORTER_NAMESPACE}))
    rows.append(("kube-system", {"kubernetes.io/metadata.name": "kube-system"}))
    out = []
    for name, labels in sorted(rows):
        meta = _meta(fleet, cluster, "Namespace", None, name, _FLEET_CREATED_TS)
        meta["labels"] = labels
        out.append({"metadata": meta, "status": {"phase": "Active"}})
    return out


def _replicaset(fleet: Fleet, spec: WorkloadSpec, inst: PodInstance) -> dict[str, Any]:
    name = str(inst.owner_name)
    meta = _meta(fleet, spec.cluster, "ReplicaSet", spec.namespace, name, inst.created_ts)
    meta["labels"] = dict(inst.labels)
    meta["ownerReferences"] = [_owner(fleet, spec.cluster, "Deployment", spec.namespace, spec.name)]
    replicas = len(spec.pods)
    return {
        "metadata": meta,
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas, "readyReplicas": replicas},
    }


def _job(fleet: Fleet, spec: WorkloadSpec, inst: PodInstance, ts: int) -> dict[str, Any]:
    name = str(inst.owner_name)
    meta = _meta(fleet, spec.cluster, "Job", spec.namespace, name, inst.created_ts)
    meta["labels"] = {"app": spec.name}
    if spec.kind == "CronJob":
        meta["ownerReferences"] = [
            _owner(fleet, spec.cluster, "CronJob", spec.namespace, spec.name)
        ]
    parallel = len(spec.pods)
    job_spec = {
        "parallelism": parallel,
        "completions": parallel,
        "ttlSecondsAfterFinished": JOB_TTL_S,
    }
    status: dict[str, Any] = {"startTime": rfc3339(inst.created_ts)}
    if inst.finished_ts <= ts:
        status |= {"succeeded": parallel, "completionTime": rfc3339(inst.finished_ts)}
    else:
        status["active"] = parallel
    job = {"metadata": meta, "spec": job_spec, "status": status}
    kueue_job(spec, job)
    return job


def _controller(fleet: Fleet, spec: WorkloadSpec) -> dict[str, Any]:
    """The Deployment, StatefulSet or CronJob of a workload (they exist at every instant)."""
    meta = _meta(fleet, spec.cluster, spec.kind, spec.namespace, spec.name, _FLEET_CREATED_TS)
    meta["labels"] = {"app": spec.name}
    if spec.kind == "CronJob":
        minute, hour = _cron_time(spec)
        schedule = f"{minute} {hour} * * *"
        return {"metadata": meta, "spec": {"schedule": schedule, "suspend": False}}
    replicas = len(spec.pods)
    return {"metadata": meta, "spec": {"replicas": replicas}, "status": {"replicas": replicas}}


def _cron_time(spec: WorkloadSpec) -> tuple[str, str]:
    """Minute and hour fields of the CronJob's schedule (``*/6`` style for sub-daily ones)."""
    schedule = spec.schedule
    first = (schedule.offset_s + schedule.start_s) % DAY_S
    minute = str(first % HOUR_S // 60)
    if schedule.period_s >= DAY_S:
        return minute, str(first // HOUR_S)
    return minute, f"{first // HOUR_S}-23/{schedule.period_s // HOUR_S}"


def _exporter_daemonset(fleet: Fleet, cluster: str, nodes: int) -> dict[str, Any]:
    meta = _meta(
        fleet, cluster, "DaemonSet", EXPORTER_NAMESPACE, EXPORTER_DAEMONSET, _FLEET_CREATED_TS
    )
    meta["labels"] = {"app": EXPORTER_DAEMONSET}
    selector = {"nvidia.com/gpu.deploy.dcgm-exporter": "true"}
    return {
        "metadata": meta,
        "spec": {"template": {"spec": {"nodeSelector": selector}}},
        "status": {"desiredNumberScheduled": nodes, "numberReady": nodes},
    }
