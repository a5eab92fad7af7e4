"""Pure parsers from Kubernetes API objects (plain JSON dicts) to the store's rows.

No I/O and no clock: :mod:`gpuwatch.collectors.kube` lists the objects and passes them in.

- GPUs a pod holds: ``nvidia.com/gpu``, ``nvidia.com/gpu.shared`` (time-slicing with
  ``renameByDefault``) or ``nvidia.com/mig-<profile>``, from limits (else requests), summed over
  containers, with init containers counted as the scheduler counts them (the max of any one init
  container, plus the sidecars started before it).
- Workload: the top owner by the ``controller: true`` ownerReferences, Pod → ReplicaSet →
  Deployment and Pod → Job → CronJob; other owners as themselves; a bare pod is kind ``Pod``.
- GPUs held through Dynamic Resource Allocation: the GPU devices of the ResourceClaims reserved
  for the pod (:mod:`gpuwatch.collectors.dra_parse`), for a pod asking for no device-plugin GPU.
- Nodes: :mod:`gpuwatch.collectors.kube_nodes`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gpuwatch.collectors.dra_parse import NOT_LISTED, DraState, consumer_gpus, dra_off
from gpuwatch.collectors.gangs import PodGang, job_facts, pod_gang
from gpuwatch.collectors.kube_nodes import (
    is_gpu_resource,
    node_has_gpus,
    offers_gpu_resources,
    parse_node,
    parse_quantity,
)
from gpuwatch.collectors.kube_nodes import labels_of as _labels
from gpuwatch.collectors.sched_state import SchedState
from gpuwatch.domain.allocation import DRA
from gpuwatch.domain.labels import UNASSIGNED_TEAM

JsonObject = Mapping[str, Any]
#: ``(namespace, name)`` of a ReplicaSet or Job → its controller ownerReference (None: no owner).
OwnerIndex = Mapping[tuple[str, str], JsonObject | None]

_FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


def _container_gpus(container: JsonObject) -> dict[str, int]:
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    gpus: dict[str, int] = {}
    for name in sorted({*limits, *requests}):
        if is_gpu_resource(name):
            gpus[name] = parse_quantity(limits[name] if name in limits else requests[name])
    return gpus


def pod_gpu_requests(pod: JsonObject) -> dict[str, int]:
    """Effective GPU count per GPU resource name, as the scheduler counts it (zeros left out).

    ``max(sum(containers) + sidecars, max over init containers of (init + sidecars before it))``,
    where sidecars are init containers with ``restartPolicy: Always``.
    """
    spec = pod.get("spec") or {}
    regular, sidecars, peak = Counter[str](), Counter[str](), Counter[str]()
    for container in spec.get("containers") or []:
        regular += Counter(_container_gpus(container))
    for container in spec.get("initContainers") or []:
        gpus = Counter(_container_gpus(container))
        if container.get("restartPolicy") == "Always":
            sidecars += gpus
            peak |= sidecars
        else:
            peak |= sidecars + gpus
    return dict(sorted(((regular + sidecars) | peak).items()))


def pod_gpu_request(pod: JsonObject) -> tuple[str | None, int]:
    """``(resource name, count)`` of the GPUs a pod requests; ``(None, 0)`` when it asks for none.

    A pod asking for several GPU resources (rare) reports the one with the largest count.
    """
    effective = pod_gpu_requests(pod)
    if not effective:
        return None, 0
    name = max(effective, key=lambda resource: (effective[resource], resource))
    return name, effective[name]


def team_of(
    pod_labels: Mapping[str, str] | None,
    namespace_labels: Mapping[str, str] | None,
    team_label: str,
) -> str:
    """The pod's ``team_label`` label, else its namespace's, else ``"unassigned"``."""
    for labels in (pod_labels, namespace_labels):
        value = (labels or {}).get(team_label)
        if value:
            return str(value)
    return UNASSIGNED_TEAM


def controller_ref(obj: JsonObject) -> JsonObject | None:
    """The ownerReference marked ``controller: true``, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") is True and ref.get("kind") and ref.get("name"):
            return dict(ref)
    return None


def owner_index(objects: Iterable[JsonObject]) -> dict[tuple[str, str], JsonObject | None]:
    """``(namespace, name)`` → controller ownerReference, for ReplicaSets or Jobs."""
    index: dict[tuple[str, str], JsonObject | None] = {}
    for obj in objects:
        meta = obj.get("metadata") or {}
        index[(str(meta.get("namespace") or ""), str(meta.get("name") or ""))] = controller_ref(obj)
    return index


def top_owner(pod: JsonObject, replicasets: OwnerIndex, jobs: OwnerIndex) -> tuple[str, str]:
    """``(kind, name)`` of the pod's workload: its controller, followed up one level.

    A ReplicaSet missing from ``replicasets`` whose name is ``<deployment>-<pod-template-hash>``
    (the Deployment controller's naming) is taken as that Deployment's.
    """
    meta = pod.get("metadata") or {}
    ref = controller_ref(pod)
    if ref is None:
        return "Pod", str(meta.get("name") or "")
    kind, name = str(ref["kind"]), str(ref["name"])
    group = str(ref.get("apiVersion") or "").split("/")[0]
    parents = {("ReplicaSet", "apps"): replicasets, ("Job", "batch"): jobs}.get((kind, group))
    if parents is None:
        return kind, name
    key = (str(meta.get("namespace") or ""), name)
    if key in parents:
        parent = parents[key]
        return (str(parent["kind"]), str(parent["name"])) if parent else (kind, name)
    template_hash = (meta.get("labels") or {}).get("pod-template-hash")
    if kind == "ReplicaSet" and template_hash and name.endswith(f"-{template_hash}"):
        return "Deployment", name[: -len(template_hash) - 1]
    return kind, name


def epoch_seconds(timestamp: str | None) -> int | None:
    """Whole epoch seconds of an RFC 3339 timestamp (``2026-11-16T00:00:00Z``); None stays None."""
    if not timestamp:
        return None
    try:
        parsed = datetime.fromisoformat(str(timestamp).replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"invalid timestamp {timestamp!r}: expected RFC 3339") from exc
    return int(parsed.replace(tzinfo=parsed.tzinfo or UTC).timestamp())  # the API speaks UTC


def _finished_ts(status: JsonObject) -> int | None:
    finished = [
        epoch_seconds(((cs.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for cs in status.get("containerStatuses") or []
    ]
    known = [ts for ts in finished if ts is not None]
    return max(known) if known else None


#: What a pod holds through ResourceClaims: (device class, GPU devices).
ClaimGpus = tuple[str | None, int]


def parse_pod(
    pod: JsonObject,
    owner: tuple[str, str],
    team: str,
    claim_gpus: ClaimGpus | None = None,
    gang: PodGang | None = None,
) -> dict[str, Any]:
    """A ``pods`` row (without ids; ``node_name`` for the caller to map to ``node_id``).

    A pod that asks for no device-plugin GPU but holds GPU devices through claims
    (``claim_gpus``) has its device class as ``gpu_resource``, its devices as ``gpu_count`` and
    ``allocation`` ``dra``; every other pod's ``allocation`` is None. ``gang``: its queue and
    gang (:mod:`gpuwatch.collectors.gangs`; None: neither).
    """
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    resource, count = pod_gpu_request(pod)
    allocation = None
    if resource is None and claim_gpus is not None and claim_gpus[1] > 0:
        (resource, count), allocation = claim_gpus, DRA
    phase = status.get("phase") or None
    return {
        "namespace": str(meta.get("namespace") or ""),
        "name": str(meta.get("name") or ""),
        "uid": str(meta.get("uid") or ""),
        "node_name": (pod.get("spec") or {}).get("nodeName") or None,
        "phase": phase,
        "workload_kind": owner[0],
        "workload_name": owner[1],
        "team": team,
        "gpu_resource": resource,
        "gpu_count": count,
        "allocation": allocation,
        "labels": _labels(pod),
        "created_ts": epoch_seconds(meta.get("creationTimestamp")),
        "started_ts": epoch_seconds(status.get("startTime")),
        "finished_ts": _finished_ts(status) if phase in _FINISHED_PHASES else None,
        **(gang or PodGang()).row(),
    }


@dataclass(frozen=True)
class KubeSnapshot:
    """What the Kubernetes API showed at ``taken_ts``.

    ``nodes``: nodes with GPUs (or hosting a GPU pod, or publishing GPU devices for DRA), as
    :func:`parse_node` rows.
    ``namespaces``: every namespace as ``{name, team, labels}`` (``team`` None without the label).
    ``gpu_pods``: pods requesting GPUs in any phase (Pending included), or holding GPU devices
    through ResourceClaims, as :func:`parse_pod` rows.
    ``non_gpu_pods``: ``(namespace, name)`` of pods requesting no GPU (they never hold one).
    ``pod_nodes``: pod name → node name for every scheduled pod (first in namespace order wins).
    ``dra``: what DRA showed (off, with its reason, when it was not read).
    ``sched``: queues, quotas and queued work (Kueue, Volcano; each off with its reason when
    not read).
    """

    nodes: list[dict[str, Any]]
    namespaces: list[dict[str, Any]]
    gpu_pods: list[dict[str, Any]]
    non_gpu_pods: frozenset[tuple[str, str]]
    pod_nodes: dict[str, str]
    taken_ts: int
    dra: DraState = field(default_factory=lambda: dra_off(NOT_LISTED))
    sched: SchedState = field(default_factory=SchedState)


def _sort_key(obj: JsonObject) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _namespace_rows(namespaces: Iterable[JsonObject], team_label: str) -> list[dict[str, Any]]:
    labelled = [(_sort_key(ns)[1], _labels(ns)) for ns in sorted(namespaces, key=_sort_key)]
    return [{"name": n, "team": lb.get(team_label) or None, "labels": lb} for n, lb in labelled]


def _claims_of(held: Mapping[tuple[str, str, str], ClaimGpus], pod: JsonObject) -> ClaimGpus | None:
    """What a pod holds through claims: consumers matched by namespace and name, and by uid
    where the claim's consumer reference gives one (a recreated pod's old claims are not its)."""
    namespace, name = _sort_key(pod)
    uid = str((pod.get("metadata") or {}).get("uid") or "")
    classes: Counter[str] = Counter()
    for consumer_uid in {uid, ""}:
        device_class, count = held.get((namespace, name, consumer_uid), (None, 0))
        classes[device_class or ""] += count
    if not +classes:
        return None
    device_class = min(classes, key=lambda cls: (-classes[cls], cls))
    return device_class or None, sum(classes.values())


def _has_claims(pod: JsonObject) -> bool:
    """Whether the pod references ResourceClaims (``spec.resourceClaims``)."""
    return bool((pod.get("spec") or {}).get("resourceClaims"))


def _node_rows(nodes: Iterable[JsonObject], used: set[str], dra: DraState) -> list[dict[str, Any]]:
    """Nodes with GPUs, hosting a GPU pod, or publishing GPU devices: those that publish them
    and offer no device-plugin GPU are ``dra`` nodes, their count and model from the slices
    where GFD gives none."""
    rows = []
    for node in sorted(nodes, key=_sort_key):
        name = _sort_key(node)[1]
        if not (node_has_gpus(node) or name in used or name in dra.gpu_nodes):
            continue
        row = parse_node(node)
        if name in dra.gpu_nodes and not offers_gpu_resources(node):
            row["gpu_sharing"] = DRA
            published = dra.nodes.get(name)
            if published is not None:
                row["gpu_count"] = row["gpu_count"] or published.gpu_count
                row["gpu_model"] = row["gpu_model"] or published.product
                row["gpu_memory_mib"] = row["gpu_memory_mib"] or published.memory_mib
        rows.append(row)
    return rows


def build_snapshot(
    pods: Iterable[JsonObject],
    nodes: Iterable[JsonObject],
    namespaces: Iterable[JsonObject],
    replicasets: Iterable[JsonObject],
    jobs: Iterable[JsonObject],
    team_label: str,
    taken_ts: int,
    dra: DraState | None = None,
    sched: SchedState | None = None,
) -> KubeSnapshot:
    """The snapshot from listed objects (and DRA's devices, queues and queued work, where read).
    Raises ValueError naming the object it cannot read."""
    dra = dra if dra is not None else dra_off(NOT_LISTED)
    sched = sched if sched is not None else SchedState()
    jobs = list(jobs)
    gang_jobs = job_facts(jobs)
    held = consumer_gpus(dra.devices)
    ns_rows = _namespace_rows(namespaces, team_label)
    ns_labels = {row["name"]: row["labels"] for row in ns_rows}
    rs_index, job_index = owner_index(replicasets), owner_index(jobs)
    gpu_pods: list[dict[str, Any]] = []
    non_gpu: set[tuple[str, str]] = set()
    pod_nodes: dict[str, str] = {}
    for pod in sorted(pods, key=_sort_key):
        namespace, name = _sort_key(pod)
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name:
            pod_nodes.setdefault(name, str(node_name))
        try:
            claims = _claims_of(held, pod)
            if pod_gpu_request(pod)[0] is None and claims is None:
                # Without DRA, a pod with claims may hold GPUs: not known to hold none, so
                # the GPUs its DCGM series name stay its (as a pod known from DCGM only).
                if dra.on or not _has_claims(pod):
                    non_gpu.add((namespace, name))
                continue
            owner = top_owner(pod, rs_index, job_index)
            team = team_of(_labels(pod), ns_labels.get(namespace), team_label)
            gang = pod_gang(pod, gang_jobs, sched)
            gpu_pods.append(parse_pod(pod, owner, team, claims, gang))
        except ValueError as exc:
            raise ValueError(f"pod {namespace}/{name}: {exc}") from exc
    used = {pod["node_name"] for pod in gpu_pods if pod["node_name"]}
    node_rows = _node_rows(nodes, used, dra)
    return KubeSnapshot(
        node_rows, ns_rows, gpu_pods, frozenset(non_gpu), pod_nodes, taken_ts, dra, sched
    )
