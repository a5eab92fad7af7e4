"""The ``resource.k8s.io`` objects of a simulated cluster, in the API version asked for.

``dra_objects(fleet, cluster, pods, running, version)`` returns the ``resourceclaims``,
``resourceslices`` and ``deviceclasses`` lists of one instant, shaped as ``v1``, ``v1beta2``
(requests under ``exactly``, devices flat) or ``v1beta1`` (requests flat, device fields under
``basic``); ``pod_claims`` adds a DRA pod's claim fields to its object. Device UUIDs are the
ones the simulated exporter labels. Pure.
"""

from __future__ import annotations

from typing import Any

from gpuwatch.domain.durations import rfc3339
from gpuwatch.simulate.api_resources import DRA_VERSIONS
from gpuwatch.simulate.dra import Claim, claim_name, claims_for, is_dra
from gpuwatch.simulate.dra_names import (
    DRIVER,
    GPU_CLASS,
    MIG_CLASS,
    POD_CLAIM,
    REQUEST,
    mig_uuid,
    template_name,
)
from gpuwatch.simulate.fleet import Fleet, GpuUnit, NodeSpec
from gpuwatch.simulate.noise import k8s_suffix, uuid_text
from gpuwatch.simulate.pods import PodInstance

DRA_RESOURCES = ("resourceclaims", "resourceslices", "deviceclasses")
#: When nodes, namespaces, controllers and named claims were created (2025-01-01).
FLEET_CREATED_TS = 1_735_689_600
_ARCHITECTURES = {"hopper": ("Hopper", "9.0.0"), "ampere": ("Ampere", "8.0.0")}
_ARCHITECTURES |= {"ada-lovelace": ("Ada Lovelace", "8.9.0"), "turing": ("Turing", "7.5.0")}
_CLASS_TYPES = {GPU_CLASS: "gpu", MIG_CLASS: "mig"}


def pod_claims(fleet: Fleet, inst: PodInstance, pod: dict[str, Any], phase: str) -> None:
    """Make ``pod`` hold its GPUs through its claim: ``spec.resourceClaims``, the container's
    ``resources.claims`` instead of a GPU limit, and (for a template's claim, once made)
    ``status.resourceClaimStatuses``."""
    spec = fleet.workloads[inst.workload]
    source = (
        {"resourceClaimName": spec.claim}
        if spec.claim
        else {"resourceClaimTemplateName": template_name(spec.name)}
    )
    pod["spec"]["resourceClaims"] = [{"name": POD_CLAIM, **source}]
    for container in pod["spec"]["containers"]:
        resources = container["resources"]
        for part in ("limits", "requests"):
            resources[part].pop(spec.gpu_resource, None)
        resources["claims"] = [{"name": POD_CLAIM}]
    if not spec.claim:
        name = claim_name(fleet, inst)
        pod["status"]["resourceClaimStatuses"] = [{"name": POD_CLAIM, "resourceClaimName": name}]
    if phase == "Pending":
        message = "0/1 nodes are available: 1 cannot allocate all claims."
        pod["status"]["conditions"][0]["message"] = message


def dra_objects(
    fleet: Fleet, cluster: str, pods: list[PodInstance], running: set[str], version: str
) -> dict[str, list[dict[str, Any]]]:
    """The claims of the DRA pods in ``pods`` (reserved for the ``running`` ones, by uid), a
    ResourceSlice per DRA node and the driver's DeviceClasses (when the cluster has DRA nodes)."""
    if version not in DRA_VERSIONS:
        raise ValueError(f"unknown resource.k8s.io version {version!r}: one of {DRA_VERSIONS}")
    claims = claims_for(fleet, [i for i in pods if is_dra(fleet, i)], running)
    nodes = [n for n in fleet.nodes if n.cluster == cluster and n.gpu_sharing == "dra"]
    return {
        "resourceclaims": [_claim(fleet, claim, version) for claim in claims],
        "resourceslices": [_slice(fleet, node, version) for node in nodes],
        "deviceclasses": [_device_class(fleet, cluster, c) for c in _CLASS_TYPES] if nodes else [],
    }


def _claim(fleet: Fleet, claim: Claim, version: str) -> dict[str, Any]:
    spec = claim.workload
    meta: dict[str, Any] = {
        "name": claim.name,
        "namespace": claim.namespace,
        "uid": claim.uid,
        "creationTimestamp": rfc3339(claim.owner.created_ts if claim.owner else FLEET_CREATED_TS),
    }
    if claim.owner is not None:
        owner = claim.owner
        meta["annotations"] = {"resource.kubernetes.io/pod-claim-name": POD_CLAIM}
        meta["ownerReferences"] = [
            {
                **{"apiVersion": "v1", "kind": "Pod", "name": owner.name, "uid": owner.uid},
                **{"controller": True, "blockOwnerDeletion": True},
            }
        ]
    request: dict[str, Any] = {
        "deviceClassName": spec.gpu_resource,
        "allocationMode": "ExactCount",
        "count": len(claim.devices),
    }
    profile = fleet.units[claim.devices[0]].mig_profile
    if profile is not None:
        expression = f"device.attributes['{DRIVER}'].profile == '{profile}'"
        request["selectors"] = [{"cel": {"expression": expression}}]
    nested = (
        {"name": REQUEST, **request}
        if version == "v1beta1"
        else {"name": REQUEST, "exactly": request}
    )
    body = {"metadata": meta, "spec": {"devices": {"requests": [nested]}}, "status": {}}
    if claim.consumers:
        body["status"] = _claim_status(fleet, claim)
    return body


def _claim_status(fleet: Fleet, claim: Claim) -> dict[str, Any]:
    units = [fleet.units[i] for i in claim.devices]
    results = [
        {"request": REQUEST, "driver": DRIVER, "pool": u.node, "device": u.dra_device}
        for u in units
    ]
    field = {"key": "metadata.name", "operator": "In", "values": [units[0].node]}
    return {
        "allocation": {
            "devices": {"results": results},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [field]}]},
        },
        "reservedFor": [
            {"resource": "pods", "name": pod.name, "uid": pod.uid} for pod in claim.consumers
        ],
    }


def _slice(fleet: Fleet, node: NodeSpec, version: str) -> dict[str, Any]:
    name = f"{node.name}-{DRIVER}-{k8s_suffix(5, fleet.seed, node.cluster, node.name, DRIVER)}"
    devices = [
        _device(fleet, node, unit, version)
        for unit in fleet.units
        if (unit.cluster, unit.node) == (node.cluster, node.name) and unit.slot == 0
    ]
    return {
        "metadata": {
            "name": name,
            "uid": uuid_text(fleet.seed, node.cluster, "ResourceSlice", name),
            "creationTimestamp": rfc3339(FLEET_CREATED_TS),
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node.name, "controller": True}
                | {"uid": uuid_text(fleet.seed, node.cluster, "Node", "", node.name)}
            ],
        },
        "spec": {
            "driver": DRIVER,
            "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
            "nodeName": node.name,
            "devices": devices,
        },
    }


def _device(fleet: Fleet, node: NodeSpec, unit: GpuUnit, version: str) -> dict[str, Any]:
    architecture, compute = _ARCHITECTURES.get(
        node.labels.get("nvidia.com/gpu.family", ""), ("", "0.0.0")
    )
    attributes: dict[str, dict[str, Any]] = {
        "type": {"string": "gpu" if unit.mig_profile is None else "mig"},
        "uuid": {"string": unit.uuid},
        "productName": {"string": unit.model_name},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": architecture},
        "index": {"int": unit.gpu_index},
        "minor": {"int": unit.gpu_index},
        "cudaComputeCapability": {"version": compute},
        "driverVersion": {"version": _semver(node.driver_version)},
    }
    if unit.mig_profile is not None:
        attributes["uuid"] = {
            "string": mig_uuid(fleet.seed, unit.cluster, unit.uuid, unit.mig_gi_id)
        }
        attributes["parentUUID"] = {"string": unit.uuid}
        attributes["profile"] = {"string": unit.mig_profile}
    fields = {
        "attributes": attributes,
        "capacity": {"memory": {"value": quantity_mib(unit.memory_total_mib)}},
    }
    if version == "v1beta1":
        return {"name": unit.dra_device, "basic": fields}
    return {"name": unit.dra_device, **fields}


def _device_class(fleet: Fleet, cluster: str, name: str) -> dict[str, Any]:
    expression = (
        f"device.driver == '{DRIVER}' && "
        f"device.attributes['{DRIVER}'].type == '{_CLASS_TYPES[name]}'"
    )
    return {
        "metadata": {
            "name": name,
            "uid": uuid_text(fleet.seed, cluster, "DeviceClass", name),
            "creationTimestamp": rfc3339(FLEET_CREATED_TS),
        },
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def quantity_mib(mib: int) -> str:
    """A memory size as Kubernetes writes the quantity (``80Gi``, ``81559Mi``)."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def _semver(version: str) -> str:
    """A driver version as the semver the driver publishes (``550.127.08`` → ``550.127.8``)."""
    return ".".join(str(int(part)) for part in version.split("."))
