"""The Kubernetes source reading DRA through the real client, against an API on 127.0.0.1 that
serves the core lists and resource.k8s.io at chosen versions from tests/fixtures/dra."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.collectors.kube import DRA_RBAC_NEEDED, RBAC_NEEDED, KubeError, KubeSource
from gpuwatch.config import Settings
from gpuwatch.simulate.apiserver import kubeconfig_for
from tests.support.stub_http import StubServer

# the client builds its ApiException with urllib3's deprecated getheaders()
pytestmark = pytest.mark.filterwarnings("ignore:HTTPResponse.getheader:DeprecationWarning")

FIXTURES = Path(__file__).parent / "fixtures" / "dra"
GROUP_PATH = "/apis/resource.k8s.io"
DRA_LISTS = ("resourceclaims", "resourceslices", "deviceclasses")
NOW_TS = 1794830400
FORBIDDEN = (
    "forbidden: grant get, list on resourceclaims, resourceslices, deviceclasses (resource.k8s.io)"
)


def _pod(name: str, namespace: str, uid: str, node: str | None, **limits: str) -> dict[str, Any]:
    resources: dict[str, Any] = {"limits": limits} if limits else {"claims": [{"name": "gpu"}]}
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {"nodeName": node, "containers": [{"name": "main", "resources": resources}]},
        "status": {"phase": "Running" if node else "Pending"},
    }


CORE: dict[str, list[dict[str, Any]]] = {
    "/api/v1/pods": [
        _pod("trainer-0", "ml", "5f0c2a6e-0001-4d7a-9e1b-0000000000a1", "dra-h100-0"),
        _pod("llm-0", "inference", "5f0c2a6e-0002-4d7a-9e1b-0000000000a2", "dra-a100-mig-0"),
        _pod("worker-a", "ml", "5f0c2a6e-0003-4d7a-9e1b-0000000000a3", "dra-h100-0"),
        _pod("worker-b", "ml", "5f0c2a6e-0004-4d7a-9e1b-0000000000a4", "dra-h100-0"),
        _pod("notebook-0", "ml", "5f0c2a6e-0005-4d7a-9e1b-0000000000a5", "dra-h100-0"),
        _pod("net-only-0", "ml", "5f0c2a6e-0006-4d7a-9e1b-0000000000a6", "dra-h100-0"),
        _pod("waiting-0", "ml", "5f0c2a6e-0007-4d7a-9e1b-0000000000a7", None),
        _pod(
            "dp-0",
            "ml",
            "5f0c2a6e-0008-4d7a-9e1b-0000000000a8",
            "gpu-dp-0",
            **{"nvidia.com/gpu": "1"},
        ),
    ],
    "/api/v1/nodes": [
        {"metadata": {"name": "dra-h100-0", "labels": {}}, "status": {"allocatable": {}}},
        {"metadata": {"name": "dra-a100-mig-0", "labels": {}}, "status": {"allocatable": {}}},
        {
            "metadata": {"name": "gpu-dp-0", "labels": {"nvidia.com/gpu.count": "8"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}},
        },
    ],
    "/api/v1/namespaces": [{"metadata": {"name": n}} for n in ("inference", "ml")],
    "/apis/apps/v1/replicasets": [],
    "/apis/batch/v1/jobs": [],
}
DRA_PODS = {"trainer-0": 2, "llm-0": 1, "worker-a": 1, "worker-b": 1, "notebook-0": 1}


def _status(code: int, reason: str) -> tuple[int, bytes]:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason}
    return code, json.dumps({**body, "message": f"{reason.lower()}", "code": code}).encode()


class FakeApi:
    """Core lists and resource.k8s.io at ``served`` versions, paginated by ``limit`` (the
    continue token is the next offset); ``faults[path]`` answers the next requests of a path
    with those statuses, one each."""

    def __init__(self, served: tuple[str, ...]) -> None:
        self.served = served
        self.faults: dict[str, list[int]] = {}

    def answer(self, path: str, query: dict[str, str]) -> tuple[int, bytes]:
        path = path.rstrip("/")  # the client asks for the group as /apis/resource.k8s.io/
        faults = self.faults.get(path)
        if faults:
            code = faults.pop(0)
            return _status(code, {403: "Forbidden", 401: "Unauthorized"}.get(code, "Error"))
        if path == GROUP_PATH:
            return self._group()
        items, kind = self._items(path)
        if items is None:
            return _status(404, "NotFound")
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or len(items) or 1)
        metadata: dict[str, Any] = {"resourceVersion": "7"}
        if start + limit < len(items):
            metadata["continue"] = str(start + limit)
        page = {"kind": kind, "apiVersion": "v1", "metadata": metadata}
        return 200, json.dumps({**page, "items": items[start : start + limit]}).encode()

    def _group(self) -> tuple[int, bytes]:
        if not self.served:
            return _status(404, "NotFound")
        versions = [{"groupVersion": f"resource.k8s.io/{v}", "version": v} for v in self.served]
        group = {"kind": "APIGroup", "apiVersion": "v1", "name": "resource.k8s.io"}
        body = {**group, "versions": versions, "preferredVersion": versions[-1]}
        return 200, json.dumps(body).encode()

    def _items(self, path: str) -> tuple[list[dict[str, Any]] | None, str]:
        if path in CORE:
            return CORE[path], "List"
        parts = path.removeprefix(f"{GROUP_PATH}/").split("/")
        if len(parts) == 2 and parts[0] in self.served and parts[1] in DRA_LISTS:
            body = json.loads((FIXTURES / parts[0] / f"{parts[1]}.json").read_text())
            return list(body["items"]), str(body["kind"])
        return None, ""


@pytest.fixture(autouse=True)
def _no_ambient_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


def _serve(api: FakeApi) -> Iterator[StubServer]:
    with StubServer(api.answer) as stub:
        yield stub


def _source(stub: StubServer, tmp_path: Path, **kwargs: Any) -> KubeSource:
    config = kubeconfig_for(stub.url, tmp_path / "kubeconfig")
    settings: dict[str, Any] = {"timeout_s": 5.0, "retries": 2, "page_size": 500}
    return KubeSource(str(config), None, base_delay_s=0.0, **{**settings, **kwargs})


def _paths(stub: StubServer) -> list[str]:
    return [path.rstrip("/") for path, _ in stub.requests]


def _dra_pods(snap: Any) -> dict[str, int]:
    return {p["name"]: p["gpu_count"] for p in snap.gpu_pods if p["allocation"] == "dra"}


@pytest.mark.parametrize(
    ("served", "picked"),
    [
        (("v1beta1", "v1beta2"), "v1beta2"),
        (("v1beta1", "v1beta2", "v1"), "v1"),
        (("v1beta1",), "v1beta1"),
    ],
)
def test_the_best_served_version_is_read(
    tmp_path: Path, served: tuple[str, ...], picked: str
) -> None:
    api = FakeApi(served)
    for stub in _serve(api):
        with _source(stub, tmp_path) as kube:
            snap = kube.snapshot(NOW_TS)
        dra_paths = [p for p in _paths(stub) if p.startswith(GROUP_PATH)]
    assert dra_paths == [
        GROUP_PATH,
        f"{GROUP_PATH}/{picked}/resourceclaims",
        f"{GROUP_PATH}/{picked}/resourceslices",
        f"{GROUP_PATH}/{picked}/deviceclasses",
    ]
    assert (
        snap.dra.summary()
        == f"DRA attribution on (resource.k8s.io/{picked}): 5 devices in 4 claims"
    )
    assert _dra_pods(snap) == DRA_PODS
    gpu_pods = {p["name"]: (p["gpu_resource"], p["allocation"]) for p in snap.gpu_pods}
    assert gpu_pods["dp-0"] == ("nvidia.com/gpu", None)
    assert "net-only-0" not in gpu_pods and "waiting-0" not in gpu_pods
    sharing = {n["name"]: (n["gpu_sharing"], n["gpu_count"]) for n in snap.nodes}
    assert sharing == {
        "dra-h100-0": ("dra", 4),
        "dra-a100-mig-0": ("dra", 1),
        "gpu-dp-0": ("device-plugin", 8),
    }


def test_a_group_not_served_turns_dra_off(tmp_path: Path) -> None:
    for stub in _serve(FakeApi(())):
        with _source(stub, tmp_path) as kube:
            snap = kube.snapshot(NOW_TS)
        dra_paths = [p for p in _paths(stub) if p.startswith(GROUP_PATH)]
    assert dra_paths == [GROUP_PATH]  # asked once: a 404 is not retried
    assert snap.dra.summary() == "DRA attribution off: resource.k8s.io is not served"
    assert (snap.dra.on, snap.dra.api_version, snap.dra.devices) == (False, None, ())
    assert [p["name"] for p in snap.gpu_pods] == ["dp-0"]  # pods and nodes still read
    assert [n["name"] for n in snap.nodes] == ["gpu-dp-0"]


def test_only_unknown_versions_turn_dra_off(tmp_path: Path) -> None:
    for stub in _serve(FakeApi(("v1alpha3",))):
        with _source(stub, tmp_path) as kube:
            snap = kube.snapshot(NOW_TS)
    assert snap.dra.off_reason == (
        "resource.k8s.io serves none of v1, v1beta2, v1beta1 (served: v1alpha3)"
    )


@pytest.mark.parametrize(("status", "path"), [(403, "resourceclaims"), (401, "deviceclasses")])
def test_denied_dra_lists_turn_dra_off_and_the_collection_goes_on(
    tmp_path: Path, status: int, path: str
) -> None:
    api = FakeApi(("v1",))
    api.faults[f"{GROUP_PATH}/v1/{path}"] = [status]
    for stub in _serve(api):
        with _source(stub, tmp_path) as kube:
            snap = kube.snapshot(NOW_TS)
        asked = _paths(stub).count(f"{GROUP_PATH}/v1/{path}")
    assert asked == 1  # not retried
    assert snap.dra.off_reason == f"{FORBIDDEN} (HTTP {status} listing {path})"
    assert (snap.dra.on, snap.dra.api_version, snap.dra.devices) == (False, "v1", ())
    assert [p["name"] for p in snap.gpu_pods] == ["dp-0"]
    assert len(snap.nodes) == 1 and len(snap.namespaces) == 2


def test_a_dra_list_not_served_turns_dra_off(tmp_path: Path) -> None:
    api = FakeApi(("v1",))
    api.faults[f"{GROUP_PATH}/v1/resourceslices"] = [404]
    for stub in _serve(api):
        with _source(stub, tmp_path) as kube:
            snap = kube.snapshot(NOW_TS)
    assert snap.dra.summary() == (
        "DRA attribution off: resource.k8s.io/v1 resourceslices: not served"
    )
    assert [p["name"] for p in snap.gpu_pods] == ["dp-0"]


def test_the_dra_rbac_is_named_in_the_core_rbac() -> None:
    assert DRA_RBAC_NEEDED == (
        "get, list on resourceclaims, resourceslices, deviceclasses (resource.k8s.io)"
    )
    assert RBAC_NEEDED.endswith(f"; for DRA attribution also {DRA_RBAC_NEEDED}")


def test_resourceclaims_are_paginated(tmp_path: Path) -> None:
    for stub in _serve(FakeApi(("v1",))):
        with _source(stub, tmp_path, page_size=2) as kube:
            snap = kube.snapshot(NOW_TS)
        queries = [q for p, q in stub.requests if p == f"{GROUP_PATH}/v1/resourceclaims"]
    assert [q.get("continue") for q in queries] == [None, "2", "4", "6"]  # 7 claims
    assert all(q["limit"] == "2" for q in queries)
    assert len(snap.dra.devices) == 5 and _dra_pods(snap) == DRA_PODS


def test_transient_dra_errors_are_retried(tmp_path: Path) -> None:
    api = FakeApi(("v1beta2",))
    api.faults[f"{GROUP_PATH}/v1beta2/resourceslices"] = [503, 500]
    api.faults[GROUP_PATH] = [502]
    for stub in _serve(api):
        with _source(stub, tmp_path, retries=2) as kube:
            snap = kube.snapshot(NOW_TS)
        paths = _paths(stub)
    assert paths.count(f"{GROUP_PATH}/v1beta2/resourceslices") == 3
    assert paths.count(GROUP_PATH) == 2
    assert snap.dra.on and len(snap.dra.devices) == 5


def test_persistent_dra_5xx_fails_as_every_list_does(tmp_path: Path) -> None:
    api = FakeApi(("v1",))
    api.faults[f"{GROUP_PATH}/v1/resourceclaims"] = [500] * 10
    for stub in _serve(api):
        with _source(stub, tmp_path, retries=2) as kube, pytest.raises(KubeError) as info:
            kube.snapshot(NOW_TS)
        url = stub.url
    assert str(info.value) == (
        f"Kubernetes API at {url} failed listing resourceclaims after 3 attempts: "
        "HTTP 500 Internal Server Error (error)"
    )


def test_no_gpu_drivers_reads_no_dra(tmp_path: Path) -> None:
    for stub in _serve(FakeApi(("v1",))):
        with _source(stub, tmp_path, dra_gpu_drivers=()) as kube:
            snap = kube.snapshot(NOW_TS)
        paths = _paths(stub)
    assert not [p for p in paths if p.startswith(GROUP_PATH)]
    assert snap.dra.off_reason == "kubernetes.dra_gpu_drivers is empty"


def test_gpu_drivers_come_from_the_settings() -> None:
    assert KubeSource.from_settings(Settings()).dra_gpu_drivers == ("gpu.nvidia.com",)
    settings = Settings.model_validate(
        {"kubernetes": {"dra_gpu_drivers": ["gpu.nvidia.com", "dra.net"]}}
    )
    assert KubeSource.from_settings(settings).dra_gpu_drivers == ("gpu.nvidia.com", "dra.net")
