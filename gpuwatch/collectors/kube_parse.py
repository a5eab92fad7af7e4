"""Pure parsers from Kubernetes API objects (plain JSON dicts) to the store's rows.

No I/O and no clock: :mod:`gpuwatch.collectors.kube` lists the objects and passes them in.

- GPUs a pod holds: ``nvidia.com/gpu``, ``nvidia.com/gpu.shared`` (time-slicing with
  ``renameByDefault``) or ``nvidia.com/mig-<profile>``, from limits (else requests), summed over
  containers, with init containers counted as the scheduler counts them (the max of any one init
  container, plus the sidecars started before it).
- Workload: the top owner by the ``controller: true`` ownerReferences, Pod → ReplicaSet →
  Deployment and Pod → Job → CronJob; other owners as themselves; a bare pod is kind ``Pod``.
- Nodes: GPU Feature Discovery labels (model, count, memory, MIG, time-slicing replicas) and the
  cloud providers' spot/preemptible labels.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity as k8s_quantity

from gpuwatch.domain.providers import provider_from_node

JsonObject = Mapping[str, Any]
#: ``(namespace, name)`` of a ReplicaSet or Job → its controller ownerReference (None: no owner).
OwnerIndex = Mapping[tuple[str, str], JsonObject | None]

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
UNASSIGNED_TEAM = "unassigned"
SPOT = "spot"
ON_DEMAND = "on_demand"

#: Node labels meaning spot/preemptible capacity, with the value that says so (case-insensitive).
SPOT_LABELS: dict[str, str] = {
    "karpenter.sh/capacity-type": "spot",
    "eks.amazonaws.com/capacityType": "spot",
    "cloud.google.com/gke-spot": "true",
    "cloud.google.com/gke-preemptible": "true",
    "kubernetes.azure.com/scalesetpriority": "spot",
}
_KEPT_LABEL_PREFIXES = ("nvidia.com/", "node.kubernetes.io/", "topology.kubernetes.io/")
_DROPPED_LABELS = frozenset({"nvidia.com/gfd.timestamp"})  # changes on every GFD run
_FINISHED_PHASES = frozenset({"Succeeded", "Failed"})

_MIG_PRODUCT = re.compile(r"^(?P<model>.+)-MIG-(?P<g>\d+)g\.\d+gb$", re.IGNORECASE)
_SHARED_SUFFIX = "-SHARED"


def parse_quantity(value: object) -> int:
    """A GPU count from a Kubernetes quantity (``2``, ``"2"``, ``"1k"``, ``"2e0"``), read by
    the client's own parser (``kubernetes.utils.parse_quantity``).

    GPUs are whole, non-negative numbers: anything else raises ValueError naming the value.
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"invalid GPU quantity {value!r}: expected a whole number like '2'")
    try:
        number = Decimal(k8s_quantity(str(value).strip()))
    except (ValueError, ArithmeticError):
        raise ValueError(f"invalid GPU quantity {value!r}: not a Kubernetes quantity") from None
    if number < 0 or number != number.to_integral_value():
        raise ValueError(
            f"invalid GPU quantity {value!r}: GPUs come in whole, non-negative numbers"
        )
    return int(number)


def _labels(obj: JsonObject) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {str(key): str(value) for key, value in sorted(labels.items())}


def is_gpu_resource(name: str) -> bool:
    """Whether a resource name is a GPU: whole, time-sliced (shared) or a MIG slice."""
    return name in (GPU_RESOURCE, SHARED_GPU_RESOURCE) or name.startswith(MIG_RESOURCE_PREFIX)


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


def capacity_type(labels: Mapping[str, str]) -> str:
    """``"spot"`` when any provider's spot/preemptible label says so, else ``"on_demand"``."""
    for key, spot_value in SPOT_LABELS.items():
        if str(labels.get(key, "")).lower() == spot_value:
            return SPOT
    return ON_DEMAND


def _label_int(labels: Mapping[str, str], key: str) -> int | None:
    value = labels.get(key)
    try:
        return int(str(value).strip()) if value is not None else None
    except ValueError:
        return None  # a hand-edited label: ignored, like a missing one


def _split_product(product: str | None) -> tuple[str | None, int | None]:
    """GFD product without sharing suffixes, and ``g`` of a single-strategy MIG product."""
    if not product:
        return None, None
    if product.upper().endswith(_SHARED_SUFFIX):
        product = product[: -len(_SHARED_SUFFIX)]
    match = _MIG_PRODUCT.match(product)
    if match is None:
        return product, None
    return match["model"], int(match["g"])


def _resource_count(status: JsonObject, resource: str) -> int:
    """Allocatable, else capacity, of a resource (0 when absent or unreadable)."""
    value = (status.get("allocatable") or {}).get(resource)
    value = (status.get("capacity") or {}).get(resource) if value is None else value
    try:
        return parse_quantity(value) if value is not None else 0
    except ValueError:
        return 0


def _node_gpu_count(
    labels: Mapping[str, str], status: JsonObject, model: str | None, mig_g: int | None
) -> int:
    """Physical GPUs: GFD's count (MIG devices under the single strategy), else allocatable."""
    count = _label_int(labels, "nvidia.com/gpu.count")
    if count is None:
        return _resource_count(status, GPU_RESOURCE)
    if mig_g:  # single strategy: identical MIG devices, slices // g of them per GPU
        slices = 4 if model and "A30" in model.upper() else 7
        per_gpu = max(1, slices // mig_g)
        return -(-count // per_gpu)
    return max(0, count)


def _kept_node_labels(labels: Mapping[str, str]) -> dict[str, str]:
    return {
        key: str(value)
        for key, value in sorted(labels.items())
        if (key.startswith(_KEPT_LABEL_PREFIXES) or key in SPOT_LABELS)
        and key not in _DROPPED_LABELS
    }


def parse_node(node: JsonObject) -> dict[str, Any]:
    """A ``nodes`` row (without ids and seen times) from a Node object.

    ``gpu_model`` is GFD's product with the ``-SHARED`` / ``-MIG-<profile>`` suffixes the device
    plugin adds removed; under the MIG single strategy ``gpu_count`` counts physical GPUs and
    ``gpu_memory_mib`` is None (GFD reports one MIG device's memory there).
    """
    meta = node.get("metadata") or {}
    labels = _labels(node)
    model, mig_g = _split_product(labels.get("nvidia.com/gpu.product"))
    replicas = _label_int(labels, "nvidia.com/gpu.replicas") or 1
    return {
        "name": str(meta.get("name") or ""),
        "gpu_model": model,
        "gpu_count": _node_gpu_count(labels, node.get("status") or {}, model, mig_g),
        "gpu_memory_mib": None if mig_g else _label_int(labels, "nvidia.com/gpu.memory"),
        "capacity_type": capacity_type(labels),
        "instance_type": labels.get("node.kubernetes.io/instance-type")
        or labels.get("beta.kubernetes.io/instance-type"),
        "mig_capable": labels.get("nvidia.com/mig.capable", "").lower() == "true",
        "mig_strategy": labels.get("nvidia.com/mig.strategy") or None,
        "mig_config": labels.get("nvidia.com/mig.config") or None,
        "timeslice_replicas": max(1, replicas),
        "labels": _kept_node_labels(labels),
        "provider": provider_from_node((node.get("spec") or {}).get("providerID"), labels),
    }


def node_has_gpus(node: JsonObject) -> bool:
    """Whether a node has GPUs: GFD says so, or it offers a GPU resource."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if str(labels.get("nvidia.com/gpu.present", "")).lower() == "true":
        return True
    if (_label_int(labels, "nvidia.com/gpu.count") or 0) > 0:
        return True
    status = node.get("status") or {}
    resources = {**(status.get("capacity") or {}), **(status.get("allocatable") or {})}
    return any(
        is_gpu_resource(str(name)) and _resource_count(status, name) > 0 for name in resources
    )


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


def parse_pod(pod: JsonObject, owner: tuple[str, str], team: str) -> dict[str, Any]:
    """A ``pods`` row (without ids; ``node_name`` for the caller to map to ``node_id``)."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    resource, count = pod_gpu_request(pod)
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
        "labels": _labels(pod),
        "created_ts": epoch_seconds(meta.get("creationTimestamp")),
        "started_ts": epoch_seconds(status.get("startTime")),
        "finished_ts": _finished_ts(status) if phase in _FINISHED_PHASES else None,
    }


@dataclass(frozen=True)
class KubeSnapshot:
    """What the Kubernetes API showed at ``taken_ts``.

    ``nodes``: nodes with GPUs (or hosting a GPU pod), as :func:`parse_node` rows.
    ``namespaces``: every namespace as ``{name, team, labels}`` (``team`` None without the label).
    ``gpu_pods``: pods requesting GPUs in any phase (Pending included), as :func:`parse_pod` rows.
    ``non_gpu_pods``: ``(namespace, name)`` of pods requesting no GPU (they never hold one).
    ``pod_nodes``: pod name → node name for every scheduled pod (first in namespace order wins).
    """

    nodes: list[dict[str, Any]]
    namespaces: list[dict[str, Any]]
    gpu_pods: list[dict[str, Any]]
    non_gpu_pods: frozenset[tuple[str, str]]
    pod_nodes: dict[str, str]
    taken_ts: int


def _sort_key(obj: JsonObject) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _namespace_rows(namespaces: Iterable[JsonObject], team_label: str) -> list[dict[str, Any]]:
    labelled = [(_sort_key(ns)[1], _labels(ns)) for ns in sorted(namespaces, key=_sort_key)]
    return [{"name": n, "team": lb.get(team_label) or None, "labels": lb} for n, lb in labelled]


def build_snapshot(
    pods: Iterable[JsonObject],
    nodes: Iterable[JsonObject],
    namespaces: Iterable[JsonObject],
    replicasets: Iterable[JsonObject],
    jobs: Iterable[JsonObject],
    team_label: str,
    taken_ts: int,
) -> KubeSnapshot:
    """The snapshot from listed objects. Raises ValueError naming the object it cannot read."""
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
            if pod_gpu_request(pod)[0] is None:
                non_gpu.add((namespace, name))
                continue
            owner = top_owner(pod, rs_index, job_index)
            team = team_of(_labels(pod), ns_labels.get(namespace), team_label)
            gpu_pods.append(parse_pod(pod, owner, team))
        except ValueError as exc:
            raise ValueError(f"pod {namespace}/{name}: {exc}") from exc
    used = {pod["node_name"] for pod in gpu_pods if pod["node_name"]}
    node_rows = [
        parse_node(node)
        for node in sorted(nodes, key=_sort_key)
        if node_has_gpus(node) or _sort_key(node)[1] in used
    ]
    return KubeSnapshot(node_rows, ns_rows, gpu_pods, frozenset(non_gpu), pod_nodes, taken_ts)
