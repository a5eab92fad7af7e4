"""Pure parsers of GPU resource quantities and Node objects (plain JSON dicts).

- GPU resources: ``nvidia.com/gpu``, ``nvidia.com/gpu.shared`` (time-slicing or MPS with
  ``renameByDefault``) and ``nvidia.com/mig-<profile>`` (the mixed MIG strategy).
- Nodes: GPU Feature Discovery labels (model, count, memory, MIG, sharing) and the cloud
  providers' spot/preemptible labels. Physical GPUs come from GFD's ``nvidia.com/gpu.count``
  (under the single MIG strategy it counts MIG devices, so it is divided back), else from what
  the node offers: whole-GPU resources divided by the sharing replicas, plus the GPUs its MIG
  resources fill (``g`` of 7 slices each, A30: 4).
- How a node hands out its GPUs (``gpu_sharing``): ``mps`` (GFD
  ``nvidia.com/gpu.sharing-strategy=mps``), ``time-slice`` (``time-slicing``, or more than one
  replica), else ``device-plugin``; the snapshot marks DRA-only nodes ``dra``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity as k8s_quantity

from gpuwatch.domain.allocation import DEVICE_PLUGIN, MPS, TIME_SLICE
from gpuwatch.domain.providers import provider_from_node

JsonObject = Mapping[str, Any]

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
SPOT = "spot"
ON_DEMAND = "on_demand"
SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"

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

_MIG_PRODUCT = re.compile(r"^(?P<model>.+)-MIG-(?P<g>\d+)g\.\d+gb$", re.IGNORECASE)
_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-(?P<g>\d+)g\.")
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


def labels_of(obj: JsonObject) -> dict[str, str]:
    """An object's labels, as sorted strings."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {str(key): str(value) for key, value in sorted(labels.items())}


def is_gpu_resource(name: str) -> bool:
    """Whether a resource name is a GPU: whole, time-sliced (shared) or a MIG slice."""
    return name in (GPU_RESOURCE, SHARED_GPU_RESOURCE) or name.startswith(MIG_RESOURCE_PREFIX)


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


def _offered(status: JsonObject) -> dict[str, int]:
    """GPU resources a node offers (allocatable, else capacity), zeros left out."""
    names = {*(status.get("capacity") or {}), *(status.get("allocatable") or {})}
    counts = {str(n): _resource_count(status, str(n)) for n in names if is_gpu_resource(str(n))}
    return {name: count for name, count in sorted(counts.items()) if count > 0}


def _ceil_div(count: int, per: int) -> int:
    return -(-count // max(1, per))


def _offered_gpus(status: JsonObject, mig_g: int | None, replicas: int, slices: int) -> int:
    """Physical GPUs from the resources a node offers (no GFD count): whole GPUs less their
    sharing replicas (MIG devices of one profile under the single strategy), plus the GPUs
    the mixed strategy's MIG resources fill."""
    offered = _offered(status)
    whole = offered.get(GPU_RESOURCE) or offered.get(SHARED_GPU_RESOURCE, 0)
    if mig_g:
        return _ceil_div(whole, slices // mig_g)
    mig_slices = 0
    for name, count in offered.items():
        match = _MIG_RESOURCE.match(name)
        mig_slices += int(match["g"]) * count if match else 0
    return _ceil_div(whole, replicas) + _ceil_div(mig_slices, slices)


def _node_gpu_count(
    labels: Mapping[str, str],
    status: JsonObject,
    model: str | None,
    mig_g: int | None,
    replicas: int,
) -> int:
    """Physical GPUs: GFD's count (MIG devices under the single strategy), else what the node
    offers (:func:`_offered_gpus`)."""
    slices = 4 if model and "A30" in model.upper() else 7
    count = _label_int(labels, "nvidia.com/gpu.count")
    if count is None:
        return _offered_gpus(status, mig_g, replicas, slices)
    if mig_g:  # single strategy: identical MIG devices, slices // g of them per GPU
        return _ceil_div(count, slices // mig_g)
    return max(0, count)


def gpu_sharing(labels: Mapping[str, str]) -> str:
    """How the device plugin hands out a node's GPUs (see the module's docstring)."""
    strategy = labels.get(SHARING_STRATEGY_LABEL, "").strip().lower()
    if strategy == "mps":
        return MPS
    if strategy == "time-slicing" or (_label_int(labels, "nvidia.com/gpu.replicas") or 1) > 1:
        return TIME_SLICE
    return DEVICE_PLUGIN


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
    labels = labels_of(node)
    model, mig_g = _split_product(labels.get("nvidia.com/gpu.product"))
    replicas = max(1, _label_int(labels, "nvidia.com/gpu.replicas") or 1)
    return {
        "name": str(meta.get("name") or ""),
        "gpu_model": model,
        "gpu_count": _node_gpu_count(labels, node.get("status") or {}, model, mig_g, replicas),
        "gpu_memory_mib": None if mig_g else _label_int(labels, "nvidia.com/gpu.memory"),
        "capacity_type": capacity_type(labels),
        "instance_type": labels.get("node.kubernetes.io/instance-type")
        or labels.get("beta.kubernetes.io/instance-type"),
        "mig_capable": labels.get("nvidia.com/mig.capable", "").lower() == "true",
        "mig_strategy": labels.get("nvidia.com/mig.strategy") or None,
        "mig_config": labels.get("nvidia.com/mig.config") or None,
        "timeslice_replicas": replicas,
        "gpu_sharing": gpu_sharing(labels),
        "labels": _kept_node_labels(labels),
        "provider": provider_from_node((node.get("spec") or {}).get("providerID"), labels),
    }


def offers_gpu_resources(node: JsonObject) -> bool:
    """Whether a node offers a device-plugin GPU resource (whole, shared or MIG)."""
    return bool(_offered(node.get("status") or {}))


def node_has_gpus(node: JsonObject) -> bool:
    """Whether a node has GPUs: GFD says so, or it offers a GPU resource."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if str(labels.get("nvidia.com/gpu.present", "")).lower() == "true":
        return True
    if (_label_int(labels, "nvidia.com/gpu.count") or 0) > 0:
        return True
    return offers_gpu_resources(node)
