"""DRA parsers: ResourceClaims, ResourceSlices and DeviceClasses of every version read, and the
snapshot's pods and nodes that hold or publish GPU devices through them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient

from gpuwatch.collectors.dra_parse import (
    DraDevice,
    DraState,
    claim_devices,
    consumer_gpus,
    dra_off,
    parse_dra,
    pick_version,
    pod_claim_gpus,
    request_classes,
)
from gpuwatch.collectors.dra_slices import DraNode, published_devices
from gpuwatch.collectors.kube_parse import build_snapshot

FIXTURES = Path(__file__).parent / "fixtures" / "dra"
VERSIONS = ("v1", "v1beta2", "v1beta1")
LISTS = {
    "resourceclaims": "ResourceClaimList",
    "resourceslices": "ResourceSliceList",
    "deviceclasses": "DeviceClassList",
}
NVIDIA = ("gpu.nvidia.com",)

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
UID_TRAINER = "5f0c2a6e-0001-4d7a-9e1b-0000000000a1"
UID_LLM = "5f0c2a6e-0002-4d7a-9e1b-0000000000a2"
UID_WORKER_A = "5f0c2a6e-0003-4d7a-9e1b-0000000000a3"
UID_WORKER_B = "5f0c2a6e-0004-4d7a-9e1b-0000000000a4"
UID_NOTEBOOK = "5f0c2a6e-0005-4d7a-9e1b-0000000000a5"


def load_body(version: str, resource: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((FIXTURES / version / f"{resource}.json").read_text())
    return body


def load(version: str, resource: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = load_body(version, resource)["items"]
    return items


def state(version: str, drivers: tuple[str, ...] = NVIDIA) -> DraState:
    return parse_dra(
        load(version, "resourceclaims"),
        load(version, "resourceslices"),
        load(version, "deviceclasses"),
        version,
        drivers,
    )


# -- the fixtures have the real shapes --------------------------------------------------------


def _round_trip(body: dict[str, Any], model: str) -> Any:
    api = ApiClient()
    obj = api._ApiClient__deserialize(body, model)  # type: ignore[attr-defined]
    return api.sanitize_for_serialization(obj)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("resource", sorted(LISTS))
def test_fixtures_are_what_the_client_models_read_and_write(version: str, resource: str) -> None:
    """Every key of every fixture is a field of the kubernetes client's model of that version
    (the model writes back exactly what it read), and required fields are present."""
    body = load_body(version, resource)
    model = f"{version[0].upper()}{version[1:]}{LISTS[resource]}"
    assert _round_trip(body, model) == body
    assert body["apiVersion"] == f"resource.k8s.io/{version}"


def test_the_round_trip_catches_a_shape_of_another_version() -> None:
    v1beta1_slices = load_body("v1beta1", "resourceslices")
    assert _round_trip(v1beta1_slices, "V1ResourceSliceList") != v1beta1_slices  # "basic"
    v1_claims = load_body("v1", "resourceclaims")
    assert _round_trip(v1_claims, "V1beta1ResourceClaimList") != v1_claims  # "exactly"


# -- claims and slices, per version -----------------------------------------------------------


def _device(claim: tuple[str, str, str], request: str, pool: str, device: str, **rest: Any) -> Any:
    return DraDevice(
        claim_namespace=claim[0],
        claim_name=claim[1],
        claim_uid=claim[2],
        request=request,
        driver="gpu.nvidia.com",
        pool=pool,
        device=device,
        **rest,
    )


TRAINER = ("ml", "trainer-0-gpus-x7k2q", "c1a1e000-0001-4a00-8000-000000000001")
H100_DEVICE = {"node": "dra-h100-0", "mig_profile": None, "mig_uuid": None, "product": H100}
EXPECTED = (
    _device(
        ("inference", "llm-0-mig-p2w9d", "c1a1e000-0002-4a00-8000-000000000002"),
        "mig",
        "dra-a100-mig-0",
        "gpu-0-mig-19-0-1",
        node="dra-a100-mig-0",
        gpu_uuid="GPU-e1d2c3b4-a596-4877-8695-a4b3c2d1e0f9",  # the parent GPU
        mig_profile="1g.10gb",
        mig_uuid="MIG-8d2e4f60-1b3c-5d7e-9f10-2a3b4c5d6e7f",
        product=A100,
        memory_mib=9728,
        device_class="mig.nvidia.com",
        consumers=(("inference", "llm-0", UID_LLM),),
    ),
    _device(
        ("ml", "notebook-0-gpu-h4n8r", "c1a1e000-0004-4a00-8000-000000000004"),
        "gpu/big",  # a firstAvailable sub-request
        "dra-h100-0",
        "gpu-2",
        gpu_uuid=None,  # its slice gives no uuid
        memory_mib=81559,
        device_class="gpu.nvidia.com",
        consumers=(("ml", "notebook-0", UID_NOTEBOOK),),
        **H100_DEVICE,
    ),
    _device(
        ("ml", "shared-gpu", "c1a1e000-0003-4a00-8000-000000000003"),
        "gpu",
        "dra-h100-0",
        "gpu-3",
        gpu_uuid="GPU-4c3d2e1f-7a6b-4c5d-8e9f-0a1b2c3d4e73",
        memory_mib=81559,
        device_class="gpu.nvidia.com",
        consumers=(("ml", "worker-a", UID_WORKER_A), ("ml", "worker-b", UID_WORKER_B)),
        **H100_DEVICE,
    ),
    _device(
        TRAINER,
        "gpus",
        "dra-h100-0",
        "gpu-0",
        gpu_uuid="GPU-2b8c3f1e-6a2d-4c1b-9f0e-7d5a4b3c2a10",
        memory_mib=81559,
        device_class="gpu.nvidia.com",
        consumers=(("ml", "trainer-0", UID_TRAINER),),
        **H100_DEVICE,
    ),
    _device(
        TRAINER,
        "gpus",
        "dra-h100-0",
        "gpu-1",
        gpu_uuid="GPU-9a7e1c54-3f2b-4d8a-8c6e-1b2a3c4d5e61",
        memory_mib=81559,
        device_class="gpu.nvidia.com",
        consumers=(("ml", "trainer-0", UID_TRAINER),),
        **H100_DEVICE,
    ),
)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_gives_the_same_devices(version: str) -> None:
    dra = state(version)
    assert dra.devices == EXPECTED
    assert (dra.on, dra.off_reason, dra.api_version) == (True, "", version)


@pytest.mark.parametrize("version", VERSIONS)
def test_nodes_and_classes_of_gpu_drivers(version: str) -> None:
    dra = state(version)
    assert dra.gpu_nodes == {"dra-h100-0", "dra-a100-mig-0"}
    assert dict(dra.nodes) == {
        "dra-h100-0": DraNode(gpu_count=4, product=H100, memory_mib=81559),
        # two MIG devices of one GPU; a MIG device's memory is not its GPU's
        "dra-a100-mig-0": DraNode(gpu_count=1, product=A100, memory_mib=None),
    }
    assert dra.gpu_classes == {"gpu.nvidia.com", "mig.nvidia.com"}


def test_summary_lines() -> None:
    assert state("v1").summary() == (
        "DRA attribution on (resource.k8s.io/v1): 5 devices in 4 claims"
    )
    one = dataclasses.replace(state("v1beta2"), devices=EXPECTED[:1])
    assert one.summary() == "DRA attribution on (resource.k8s.io/v1beta2): 1 device in 1 claim"
    off = dra_off("resource.k8s.io is not served")
    assert off.summary() == "DRA attribution off: resource.k8s.io is not served"
    assert (off.on, off.devices, off.gpu_nodes) == (False, (), frozenset())


@pytest.mark.parametrize("version", VERSIONS)
def test_pending_and_deallocated_claims_give_no_device(version: str) -> None:
    claims = {c["metadata"]["name"]: c for c in load(version, "resourceclaims")}
    published = published_devices(load(version, "resourceslices"), NVIDIA)
    assert claim_devices(claims["waiting-0-gpu-z5t1c"], published, NVIDIA) == []
    assert claim_devices(claims["finished-0-gpu-b3v6m"], published, NVIDIA) == []


@pytest.mark.parametrize("version", VERSIONS)
def test_devices_of_other_drivers_only_when_named_gpu_drivers(version: str) -> None:
    assert all(d.driver == "gpu.nvidia.com" for d in state(version).devices)
    both = state(version, ("gpu.nvidia.com", "dra.net"))
    nic = [d for d in both.devices if d.driver == "dra.net"]
    assert [(d.device, d.device_class, d.gpu_uuid, d.consumers[0][1]) for d in nic] == [
        ("eth1", "nic.dra.net", None, "net-only-0")
    ]
    assert both.gpu_classes == {"gpu.nvidia.com", "mig.nvidia.com", "nic.dra.net"}


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("v1", {"gpus": "gpu.nvidia.com"}),
        ("v1beta1", {"gpus": "gpu.nvidia.com"}),
    ],
)
def test_request_classes_of_exact_requests(version: str, expected: dict[str, str]) -> None:
    (trainer,) = [c for c in load(version, "resourceclaims") if c["metadata"]["name"] == TRAINER[1]]
    assert request_classes(trainer) == expected


def test_request_classes_of_first_available() -> None:
    (notebook,) = [c for c in load("v1", "resourceclaims") if "notebook" in c["metadata"]["name"]]
    assert request_classes(notebook) == {"gpu/big": "gpu.nvidia.com", "gpu/small": "mig.nvidia.com"}


# -- attribute names, typed values, pools, admin access --------------------------------------


def _slice(devices: list[dict[str, Any]], generation: int = 1, pool: str = "n-1") -> dict[str, Any]:
    return {
        "metadata": {"name": f"{pool}-{generation}"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n-1",
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _claim(results: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ns", "uid": "u-1"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "k"}}]}},
        "status": {
            "allocation": {"devices": {"results": results}},
            "reservedFor": [
                {"resource": "pods", "name": "p", "uid": "pu"},
                {"resource": "jobs", "apiGroup": "batch", "name": "j", "uid": "ju"},  # not a pod
            ],
        },
    }


def _result(device: str, **extra: Any) -> dict[str, Any]:
    return {"request": "r", "driver": "gpu.nvidia.com", "pool": "n-1", "device": device, **extra}


def test_qualified_and_unqualified_attribute_names() -> None:
    device = {
        "name": "gpu-0",
        "attributes": {
            "gpu.nvidia.com/uuid": {"string": "GPU-aaaa"},
            "gpu.nvidia.com/productName": {"string": "NVIDIA L4"},
            "example.com/type": {"string": "mig"},  # another domain's: not the driver's type
            "type": {"string": "gpu"},
        },
        "capacity": {"gpu.nvidia.com/memory": {"value": "23034Mi"}},
    }
    (got,) = parse_dra([_claim([_result("gpu-0")])], [_slice([device])], [], "v1").devices
    assert (got.gpu_uuid, got.product, got.memory_mib, got.mig_profile) == (
        "GPU-aaaa",
        "NVIDIA L4",
        23034,
        None,
    )
    assert (got.device_class, got.consumers) == ("k", (("ns", "p", "pu"),))


def test_a_mig_device_is_known_by_its_uuid_without_a_type() -> None:
    device = {
        "name": "gpu-0-mig-14-0-2",
        "attributes": {
            "uuid": {"string": "MIG-bbbb"},
            "parentUUID": {"string": "GPU-cccc"},
            "profile": {"string": "2g.20gb"},
        },
        "capacity": {"memory": {"value": "19968Mi"}},
    }
    (got,) = parse_dra([_claim([_result(device["name"])])], [_slice([device])], [], "v1").devices
    assert (got.gpu_uuid, got.mig_uuid, got.mig_profile, got.memory_mib) == (
        "GPU-cccc",
        "MIG-bbbb",
        "2g.20gb",
        19968,
    )


@pytest.mark.parametrize(
    ("quantity", "mib"),
    [({"value": "80Gi"}, 81920), ({"value": "85899345920"}, 81920), ("40Gi", 40960), ("x", None)],
)
def test_memory_quantities(quantity: object, mib: int | None) -> None:
    device = {"name": "gpu-0", "basic": {"attributes": {}, "capacity": {"memory": quantity}}}
    (got,) = parse_dra([_claim([_result("gpu-0")])], [_slice([device])], [], "v1beta1").devices
    assert got.memory_mib == mib


def test_admin_access_results_are_not_held() -> None:
    claim = _claim([_result("gpu-0", adminAccess=True), _result("gpu-1")])
    got = parse_dra([claim], [], [], "v1").devices
    assert [d.device for d in got] == ["gpu-1"]
    assert (got[0].gpu_uuid, got[0].node) == (None, None)  # no slice published it


def test_slices_of_an_older_pool_generation_are_ignored() -> None:
    old = _slice([{"name": "gpu-0", "attributes": {"uuid": {"string": "GPU-old"}}}], 1)
    new = _slice([{"name": "gpu-0", "attributes": {"uuid": {"string": "GPU-new"}}}], 2)
    (got,) = parse_dra([_claim([_result("gpu-0")])], [new, old], [], "v1").devices
    assert got.gpu_uuid == "GPU-new"


# -- version discovery ------------------------------------------------------------------------


def _group(*versions: str, preferred: str | None = None) -> dict[str, Any]:
    listed = [{"groupVersion": f"resource.k8s.io/{v}", "version": v} for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": "resource.k8s.io",
        "versions": listed,
        "preferredVersion": listed[0] if preferred is None else {"version": preferred},
    }


@pytest.mark.parametrize(
    ("group", "version"),
    [
        (_group("v1beta2", "v1beta1"), "v1beta2"),
        (_group("v1beta1", "v1", preferred="v1beta1"), "v1"),
        (_group("v1beta1"), "v1beta1"),
        (_group("v1alpha3"), None),
        ({"kind": "APIGroup", "name": "resource.k8s.io"}, None),
    ],
)
def test_pick_version(group: dict[str, Any], version: str | None) -> None:
    assert pick_version(group) == version


# -- pods -------------------------------------------------------------------------------------


def test_pod_claim_gpus_counts_a_shared_device_once_for_each_pod() -> None:
    assert pod_claim_gpus(EXPECTED) == {
        ("inference", "llm-0"): ("mig.nvidia.com", 1),
        ("ml", "notebook-0"): ("gpu.nvidia.com", 1),
        ("ml", "trainer-0"): ("gpu.nvidia.com", 2),
        ("ml", "worker-a"): ("gpu.nvidia.com", 1),
        ("ml", "worker-b"): ("gpu.nvidia.com", 1),
    }


def test_pod_claim_gpus_of_several_classes_names_the_most_held() -> None:
    trainer = EXPECTED[3]
    mig = dataclasses.replace(EXPECTED[0], consumers=trainer.consumers)
    assert pod_claim_gpus([trainer, mig, EXPECTED[4]]) == {
        ("ml", "trainer-0"): ("gpu.nvidia.com", 3)
    }
    no_class = dataclasses.replace(trainer, device_class=None)
    assert pod_claim_gpus([no_class]) == {("ml", "trainer-0"): ("gpu.nvidia.com", 1)}  # driver
    assert pod_claim_gpus([]) == {}


def test_consumer_gpus_keeps_the_pod_uid() -> None:
    assert consumer_gpus(EXPECTED[3:]) == {("ml", "trainer-0", UID_TRAINER): ("gpu.nvidia.com", 2)}


def _pod(namespace: str, name: str, uid: str, node: str | None, limits: dict[str, str]) -> Any:
    container: dict[str, Any] = {"name": "main", "resources": {"limits": limits}}
    if not limits:
        container["resources"] = {"claims": [{"name": "gpu"}]}
    return {
        "metadata": {"namespace": namespace, "name": name, "uid": uid},
        "spec": {
            "nodeName": node,
            "containers": [container],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}],
        },
        "status": {"phase": "Running"},
    }


def _node(name: str, labels: dict[str, str], allocatable: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable}}


def test_snapshot_pods_holding_gpus_through_claims() -> None:
    pods = [
        _pod("ml", "trainer-0", UID_TRAINER, "dra-h100-0", {}),
        _pod("ml", "worker-a", UID_WORKER_A, "dra-h100-0", {}),
        _pod("ml", "worker-b", "recreated-uid", "dra-h100-0", {}),  # not the claim's pod
        _pod("inference", "llm-0", UID_LLM, "dra-a100-mig-0", {"nvidia.com/gpu": "1"}),
        _pod("ml", "cpu-0", "u-cpu", "cpu-1", {}),
    ]
    snap = build_snapshot(pods, [], [], [], [], "team", 0, state("v1"))
    got = {p["name"]: (p["gpu_resource"], p["gpu_count"], p["allocation"]) for p in snap.gpu_pods}
    assert got == {
        "trainer-0": ("gpu.nvidia.com", 2, "dra"),
        "worker-a": ("gpu.nvidia.com", 1, "dra"),
        # asks for a device-plugin GPU: that request stands
        "llm-0": ("nvidia.com/gpu", 1, None),
    }
    assert snap.non_gpu_pods == {("ml", "worker-b"), ("ml", "cpu-0")}
    assert snap.dra.devices == EXPECTED


def test_snapshot_consumers_without_a_uid_match_by_name() -> None:
    device = dataclasses.replace(EXPECTED[3], consumers=(("ml", "trainer-0", ""),))
    dra = dataclasses.replace(state("v1"), devices=(device,))
    snap = build_snapshot([_pod("ml", "trainer-0", "any", None, {})], [], [], [], [], "t", 0, dra)
    assert [(p["gpu_count"], p["allocation"]) for p in snap.gpu_pods] == [(1, "dra")]


def test_snapshot_nodes_publishing_gpu_devices_are_dra_nodes() -> None:
    nodes = [
        _node("dra-h100-0", {}, {"cpu": "96"}),  # no GFD, no device plugin
        _node(
            "dra-a100-mig-0",
            {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "1"},
            {},
        ),
        _node("both-0", {"nvidia.com/gpu.count": "8"}, {"nvidia.com/gpu": "8"}),
        _node("cpu-1", {}, {"cpu": "8"}),
    ]
    dra = state("v1")
    dra = dataclasses.replace(
        dra,
        gpu_nodes=dra.gpu_nodes | {"both-0"},
        nodes={**dra.nodes, "both-0": DraNode(8, H100, 81559)},
    )
    snap = build_snapshot([], nodes, [], [], [], "team", 0, dra)
    got = {n["name"]: (n["gpu_sharing"], n["gpu_count"], n["gpu_model"]) for n in snap.nodes}
    assert got == {
        "dra-h100-0": ("dra", 4, H100),  # count and model from its slices
        "dra-a100-mig-0": ("dra", 1, "NVIDIA-A100-SXM4-80GB"),  # GFD's where it has them
        "both-0": ("device-plugin", 8, None),  # offers nvidia.com/gpu: the device plugin's
    }
    memory = {n["name"]: n["gpu_memory_mib"] for n in snap.nodes}
    assert memory == {"dra-h100-0": 81559, "dra-a100-mig-0": None, "both-0": None}


def test_snapshot_gpu_nodes_without_published_facts_are_dra_nodes() -> None:
    dra = DraState("v1", "", (), frozenset({"n-dra"}))
    nodes = [_node("n-dra", {"nvidia.com/gpu.count": "2"}, {}), _node("n-cpu", {}, {})]
    snap = build_snapshot([], nodes, [], [], [], "team", 0, dra)
    assert [(n["name"], n["gpu_sharing"], n["gpu_count"]) for n in snap.nodes] == [
        ("n-dra", "dra", 2)
    ]


def test_snapshot_without_dra_says_it_was_not_listed() -> None:
    snap = build_snapshot([], [], [], [], [], "team", 0)
    assert snap.dra == dra_off("not listed")
    assert snap.dra.summary() == "DRA attribution off: not listed"


def test_without_dra_a_pod_with_claims_is_not_known_to_hold_no_gpu() -> None:
    """DRA off (no access, not served): a pod referencing claims may hold GPUs, so it is not
    among the pods that never hold one; a pod without claims or GPU requests still is."""
    pods = [
        _pod("ml", "trainer-0", UID_TRAINER, "dra-h100-0", {}),
        _pod("ml", "cpu-0", "u-cpu", "cpu-1", {}),
    ]
    pods[1]["spec"].pop("resourceClaims")
    snap = build_snapshot(pods, [], [], [], [], "team", 0, dra_off("forbidden"))
    assert snap.gpu_pods == []
    assert snap.non_gpu_pods == {("ml", "cpu-0")}
