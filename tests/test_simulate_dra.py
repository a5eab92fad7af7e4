"""The simulated DRA node pool and MPS node: layout, Kubernetes objects, exporter, demo frames.

Expected names and values are written out for seed 7 (read once from the simulation and checked
by hand against the shapes Kubernetes, NVIDIA's DRA driver and dcgm-exporter use).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pytest
from kubernetes.client import ApiClient

from gpuwatch.simulate.apiserver import KubeApiServer
from gpuwatch.simulate.exposition import render
from gpuwatch.simulate.fleet import Fleet, build_fleet
from gpuwatch.simulate.generate import SimulatedData, generate, sample_at
from gpuwatch.simulate.kube_objects import kube_objects

PROD = "prod-us-east"
TS = int(datetime(2026, 11, 16, 14, 10, tzinfo=UTC).timestamp())
END_TS = int(datetime(2026, 11, 17, tzinfo=UTC).timestamp())
HD0 = "ip-10-230-113-3.ec2.internal"  # whole H100s through DRA
HD1 = "ip-10-113-107-99.ec2.internal"  # H100 MIG devices through DRA
L10 = "ip-10-193-30-236.ec2.internal"  # L4, MPS with 4 replicas
GPU7 = "GPU-67c6fecf-506c-b47a-5a95-b814aa49e01a"  # hd0's GPU in the shared claim
SHARED_PODS = ("embedder-shared-hpzxnbkq9z-rg7zh", "embedder-shared-hpzxnbkq9z-w2c9w")
SHARED_UIDS = ("5525ef14-c6df-5683-315e-f5ea2177026d", "bad3fb3c-e11b-a434-7d0a-d6fb36496079")
DRA_PREFIX = {"v1": "V1", "v1beta2": "V1beta2", "v1beta1": "V1beta1"}


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return build_fleet(7)


def _node(objects: dict[str, list[dict[str, Any]]], name: str) -> dict[str, Any]:
    return next(n for n in objects["nodes"] if n["metadata"]["name"] == name)


def test_layout_has_dra_nodes_and_an_mps_node(fleet: Fleet) -> None:
    shared = {
        (n.alias, n.name, n.gpu_sharing) for n in fleet.nodes if n.gpu_sharing != "device-plugin"
    }
    assert {s for s in shared if s[2] in ("dra", "mps")} == {
        ("hd0", HD0, "dra"),
        ("hd1", HD1, "dra"),
        ("l10", L10, "mps"),
    }
    objects = kube_objects(fleet, TS, PROD)
    hd0 = _node(objects, HD0)
    assert hd0["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert hd0["metadata"]["labels"]["nvidia.com/gpu.deploy.device-plugin"] == "false"
    assert not any(k.startswith("nvidia.com/") for k in hd0["status"]["allocatable"])
    l10 = _node(objects, L10)
    labels = l10["metadata"]["labels"]
    assert labels["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert labels["nvidia.com/gpu.replicas"] == "4"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-L4-SHARED"
    assert l10["status"]["allocatable"]["nvidia.com/gpu"] == "16"


def test_dra_units_are_named_as_the_driver_names_devices(fleet: Fleet) -> None:
    hd0 = [(u.gpu_index, u.slot, u.dra_device, u.share) for u in fleet.units if u.node == HD0]
    assert hd0 == [
        *((i, 0, f"gpu-{i}", 1.0) for i in range(7)),
        (7, 0, "gpu-7", 0.5),
        (7, 1, "gpu-7", 0.5),
    ]
    gpu0 = [(u.mig_gi_id, u.dra_device) for u in fleet.units if u.node == HD1 and u.gpu_index == 0]
    assert gpu0 == [
        (1, "gpu-0-mig-9-4-4"),
        (7, "gpu-0-mig-19-0-1"),
        (8, "gpu-0-mig-19-1-1"),
        (9, "gpu-0-mig-19-2-1"),
        (10, "gpu-0-mig-19-3-1"),
    ]
    assert {u.sharing for u in fleet.units if u.node in (HD0, HD1)} == {"dra"}
    assert {u.sharing for u in fleet.units if u.node == L10} == {"mps"}


# -- the API server ---------------------------------------------------------------------------


def _server(fleet: Fleet, version: str) -> KubeApiServer:
    return KubeApiServer(kube_objects(fleet, TS, PROD, version), dra_version=version)


def _get(server: KubeApiServer, path: str) -> tuple[int, dict[str, Any]]:
    status, body = server.respond(path, None)
    return status, json.loads(body)


def _list_all(server: KubeApiServer, path: str) -> dict[str, Any]:
    """Every item of a list, read in pages of 5 (the last page's body, with all items)."""
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        status, body = _get(server, f"{path}?limit=5" + (f"&continue={token}" if token else ""))
        assert status == 200, body
        items += body["items"]
        token = body["metadata"].get("continue", "")
        if not token:
            return {**body, "items": items}


@pytest.mark.parametrize("version", ["v1", "v1beta2", "v1beta1"])
def test_discovery_names_only_the_served_version(fleet: Fleet, version: str) -> None:
    server = _server(fleet, version)
    status, group = _get(server, "/apis/resource.k8s.io")
    gv = {"groupVersion": f"resource.k8s.io/{version}", "version": version}
    assert status == 200
    assert group == {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": "resource.k8s.io",
        "versions": [gv],
        "preferredVersion": gv,
    }
    groups = {g["name"]: g for g in _get(server, "/apis")[1]["groups"]}
    assert groups["resource.k8s.io"]["versions"] == [gv]
    resources = _get(server, f"/apis/resource.k8s.io/{version}")[1]["resources"]
    assert {r["name"]: r["namespaced"] for r in resources} == {
        "resourceclaims": True,
        "resourceslices": False,
        "deviceclasses": False,
    }
    other = next(v for v in DRA_PREFIX if v != version)
    assert _get(server, f"/apis/resource.k8s.io/{other}/resourceclaims")[0] == 404


@pytest.mark.parametrize("version", ["v1", "v1beta2", "v1beta1"])
def test_dra_lists_deserialize_through_the_kubernetes_client(fleet: Fleet, version: str) -> None:
    server = _server(fleet, version)
    client, prefix = ApiClient(), DRA_PREFIX[version]
    base = f"/apis/resource.k8s.io/{version}"
    claims = client._ApiClient__deserialize(  # type: ignore[attr-defined]
        _list_all(server, f"{base}/resourceclaims"), f"{prefix}ResourceClaimList"
    )
    assert len(claims.items) == 13
    shared = next(c for c in claims.items if c.metadata.name == "embedder-shared-gpu")
    assert [(r.resource, r.name, r.uid) for r in shared.status.reserved_for] == [
        ("pods", SHARED_PODS[0], SHARED_UIDS[0]),
        ("pods", SHARED_PODS[1], SHARED_UIDS[1]),
    ]
    (result,) = shared.status.allocation.devices.results
    assert (result.request, result.driver, result.pool, result.device) == (
        "gpu",
        "gpu.nvidia.com",
        HD0,
        "gpu-7",
    )
    request = shared.spec.devices.requests[0]
    exact = request if version == "v1beta1" else request.exactly
    assert (exact.device_class_name, exact.count) == ("gpu.nvidia.com", 1)
    slices = client._ApiClient__deserialize(  # type: ignore[attr-defined]
        _list_all(server, f"{base}/resourceslices"), f"{prefix}ResourceSliceList"
    )
    by_node = {s.spec.node_name: s for s in slices.items}
    assert set(by_node) == {HD0, HD1}
    assert (by_node[HD0].spec.pool.name, by_node[HD0].spec.pool.resource_slice_count) == (HD0, 1)
    gpu7 = next(d for d in by_node[HD0].spec.devices if d.name == "gpu-7")
    fields = gpu7.basic if version == "v1beta1" else gpu7
    assert fields.attributes["uuid"].string == GPU7
    assert fields.attributes["type"].string == "gpu"
    assert fields.capacity["memory"].value == "81559Mi"
    classes = client._ApiClient__deserialize(  # type: ignore[attr-defined]
        _list_all(server, f"{base}/deviceclasses"), f"{prefix}DeviceClassList"
    )
    assert {c.metadata.name for c in classes.items} == {"gpu.nvidia.com", "mig.nvidia.com"}


def test_mig_devices_carry_parent_uuid_and_profile(fleet: Fleet) -> None:
    server = _server(fleet, "v1")
    slices = _list_all(server, "/apis/resource.k8s.io/v1/resourceslices")["items"]
    hd1 = next(s for s in slices if s["spec"]["nodeName"] == HD1)
    device = next(d for d in hd1["spec"]["devices"] if d["name"] == "gpu-0-mig-19-0-1")
    assert device["attributes"]["type"] == {"string": "mig"}
    assert device["attributes"]["uuid"] == {"string": "MIG-ef6e2851-27a3-da5a-ca2c-0c771894de23"}
    assert device["attributes"]["parentUUID"] == {
        "string": "GPU-0e47968f-88ca-bc87-6277-12835b52cdc7"
    }
    assert device["attributes"]["profile"] == {"string": "1g.10gb"}
    assert device["attributes"]["driverVersion"] == {"version": "550.127.8"}
    assert device["capacity"] == {"memory": {"value": "9856Mi"}}
    mine = _list_all(server, "/apis/resource.k8s.io/v1/namespaces/speech/resourceclaims")
    claim = next(
        c
        for c in mine["items"]
        if c["metadata"]["name"].startswith("asr-streaming-v84hkkjc4q-4ggdd")
    )
    selector = claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]
    assert selector == {
        "cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}
    }
    assert len(mine["items"]) == 6


def test_forbidden_group_answers_403_to_lists_only(fleet: Fleet) -> None:
    server = _server(fleet, "v1")
    server.forbid_group("resource.k8s.io")
    status, body = _get(server, "/apis/resource.k8s.io/v1/resourceclaims")
    assert status == 403 and body["reason"] == "Forbidden"
    assert 'cannot list resource "resourceclaims" in API group "resource.k8s.io"' in body["message"]
    assert _get(server, "/apis/resource.k8s.io/v1/namespaces/speech/resourceclaims")[0] == 403
    assert _get(server, "/apis/resource.k8s.io/v1/deviceclasses")[0] == 403
    assert _get(server, "/apis/resource.k8s.io")[0] == 200
    assert _get(server, "/api/v1/pods")[0] == 200
    server.clear_faults()
    assert _get(server, "/apis/resource.k8s.io/v1/resourceclaims")[0] == 200


def test_dra_pods_hold_gpus_through_claims(fleet: Fleet) -> None:
    pods = {p["metadata"]["name"]: p for p in kube_objects(fleet, TS, PROD)["pods"]}
    cache = pods["semantic-cache-xzhqqpfgcs-rlszl"]
    assert cache["spec"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": "semantic-cache-gpu"}
    ]
    resources = cache["spec"]["containers"][0]["resources"]
    assert resources["claims"] == [{"name": "gpu"}]
    assert "nvidia.com/gpu" not in resources["limits"]
    assert cache["status"]["resourceClaimStatuses"] == [
        {"name": "gpu", "resourceClaimName": "semantic-cache-xzhqqpfgcs-rlszl-gpu-g8569"}
    ]
    for name in SHARED_PODS:
        spec = pods[name]["spec"]
        assert spec["resourceClaims"] == [
            {"name": "gpu", "resourceClaimName": "embedder-shared-gpu"}
        ]
        assert "resourceClaimStatuses" not in pods[name]["status"]
    spec = ApiClient()._ApiClient__deserialize(cache["spec"], "V1PodSpec")  # type: ignore[attr-defined]
    assert spec.resource_claims[0].resource_claim_template_name == "semantic-cache-gpu"
    assert spec.containers[0].resources.claims[0].name == "gpu"
    mps = pods["intent-router-lsgtl2c4d6-h4xnt"]["spec"]["containers"][0]["resources"]["limits"]
    assert mps["nvidia.com/gpu"] == "1"


# -- the exporter -----------------------------------------------------------------------------


def _util_series(fleet: Fleet, node: str) -> list[dict[str, str]]:
    """Labels (and ``value``) of the utilization series the node's exporter serves at TS."""
    found = []
    for line in render(fleet, TS, sample_at(fleet, TS), PROD, node).splitlines():
        if line.startswith("DCGM_FI_PROF_GR_ENGINE_ACTIVE{"):
            labels, value = line.removeprefix("DCGM_FI_PROF_GR_ENGINE_ACTIVE{").split("} ")
            pairs = (item.split("=", 1) for item in labels.split('",'))
            found.append({k: v.strip('"') for k, v in pairs} | {"value": value})
    return found


def test_exporter_labels_dra_devices(fleet: Fleet) -> None:
    series = _util_series(fleet, HD0)
    gpu4 = next(s for s in series if s["gpu"] == "4")
    assert {
        k: v
        for k, v in gpu4.items()
        if k in ("pod", "namespace", "container") or k.startswith("dra_")
    } == {
        "pod": "semantic-cache-xzhqqpfgcs-rlszl",
        "namespace": "search-prod",
        "container": "semantic-cache",
        "dra_claim_name": "semantic-cache-xzhqqpfgcs-rlszl-gpu-g8569",
        "dra_claim_namespace": "search-prod",
        "dra_device_name": "gpu-4",
        "dra_driver_name": "gpu.nvidia.com",
        "dra_pool_name": HD0,
    }
    gpu6 = [s for s in series if s["gpu"] == "6"]
    assert len(gpu6) == 1 and not any(k == "pod" or k.startswith("dra_") for k in gpu6[0])
    gpu7 = [s for s in series if s["gpu"] == "7"]
    assert sorted(s["pod"] for s in gpu7) == list(SHARED_PODS)
    assert {s["dra_claim_name"] for s in gpu7} == {"embedder-shared-gpu"}
    assert len({s["value"] for s in gpu7}) == 1 and not any("vgpu" in s for s in gpu7)
    assert {s["UUID"] for s in gpu7} == {GPU7}


def test_exporter_labels_dra_mig_devices(fleet: Fleet) -> None:
    series = _util_series(fleet, HD1)
    gi7 = next(s for s in series if (s["gpu"], s["GPU_I_ID"]) == ("0", "7"))
    assert gi7["pod"] == "asr-streaming-v84hkkjc4q-4ggdd"
    assert gi7["dra_device_name"] == "gpu-0-mig-19-0-1"
    assert gi7["dra_mig_profile"] == "1g.10gb"
    assert gi7["dra_mig_device_uuid"] == "MIG-ef6e2851-27a3-da5a-ca2c-0c771894de23"
    unheld = [s for s in series if "pod" not in s]
    assert len(unheld) == 40 - 9 and not any(k.startswith("dra_") for s in unheld for k in s)


def test_mps_slots_export_like_time_slices(fleet: Fleet) -> None:
    series = _util_series(fleet, L10)
    slots = [s for s in series if "vgpu" in s]
    assert len(slots) == 10 and len(series) == 10 + 4  # held slots and one device series per GPU
    h4xnt = next(s for s in slots if s["pod"] == "intent-router-lsgtl2c4d6-h4xnt")
    assert (h4xnt["gpu"], h4xnt["vgpu"]) == ("0", "1")


# -- the demo frames --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def data(fleet: Fleet) -> SimulatedData:
    return generate(fleet, END_TS - 12 * 3600, END_TS, 1800)


def test_frames_carry_sharing_modes(data: SimulatedData) -> None:
    nodes = data.nodes.set_index("node")["gpu_sharing"]
    assert (nodes[HD0], nodes[HD1], nodes[L10]) == ("dra", "dra", "mps")
    assert nodes.value_counts().to_dict() == {
        "device-plugin": 48,  # with the 8 nodes of the Kueue pools
        "dra": 2,
        "mps": 1,
        "time-slice": 1,
    }
    assert data.gpus["sharing"].value_counts().to_dict() == {
        "device-plugin": 236 + 48,  # 4 × 8 H100 and 4 × 4 L40S in the Kueue pools
        "dra": 49,
        "mig": 40,
        "mps": 16,
        "time-slice": 16,
    }
    gpu7 = data.gpus[data.gpus["uuid"] == GPU7]
    assert gpu7[["slot", "timeslice_replicas"]].values.tolist() == [[0, 2], [1, 2]]
    assert set(data.gpus.loc[data.gpus["node"] == L10, "timeslice_replicas"]) == {4}
    pods = data.pods.set_index("pod")
    assert tuple(
        pods.loc["dra-finetune-5ss7q-9wjwd", ["allocation", "gpu_resource", "gpu_count"]]
    ) == (
        "dra",
        "gpu.nvidia.com",
        4,
    )
    assert tuple(pods.loc["asr-streaming-v84hkkjc4q-4ggdd", ["allocation", "gpu_resource"]]) == (
        "dra",
        "mig.nvidia.com",
    )
    assert pd.isna(pods.loc["intent-router-lsgtl2c4d6-h4xnt", "allocation"])


def test_shared_claim_slots_read_the_device_and_split_its_hours(data: SimulatedData) -> None:
    rows = data.samples[data.samples["uuid"] == GPU7]
    per_ts = rows.groupby("ts")
    assert (per_ts["util_ratio"].nunique() == 1).all()
    assert (per_ts["fb_used_mib"].nunique() == 1).all()
    assert set(rows["pod"].astype(str)) == set(SHARED_PODS)


def test_dra_devices_rows(data: SimulatedData) -> None:
    devices = data.dra_devices
    assert len(devices) == 16
    shared = devices[devices["claim_name"] == "embedder-shared-gpu"].iloc[0]
    assert (shared["claim_namespace"], shared["device"], shared["pool"], shared["node"]) == (
        "llm-serving",
        "gpu-7",
        HD0,
        HD0,
    )
    assert (shared["gpu_uuid"], shared["memory_mib"], shared["driver"]) == (
        GPU7,
        81559,
        "gpu.nvidia.com",
    )
    assert shared["consumers"] == [
        ["llm-serving", SHARED_PODS[0], SHARED_UIDS[0]],
        ["llm-serving", SHARED_PODS[1], SHARED_UIDS[1]],
    ]
    finetune = devices[devices["claim_name"] == "dra-finetune-5ss7q-9wjwd-gpu-b6wml"]
    assert finetune["device"].tolist() == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert set(finetune["last_seen_ts"]) == {1794857993}  # the Job's pod finished then
    mig = devices[devices["device"] == "gpu-0-mig-19-0-1"].iloc[0]
    assert (mig["mig_profile"], mig["memory_mib"], mig["gpu_uuid"]) == (
        "1g.10gb",
        9856,
        "GPU-0e47968f-88ca-bc87-6277-12835b52cdc7",
    )
    assert "gpu-6" not in set(devices["device"])  # hd0's free GPU
