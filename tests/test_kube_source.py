"""The Kubernetes source through the real client, against the API stand-in on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import stat
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from gpuwatch.collectors.kube import RBAC_NEEDED, KubeConfigError, KubeError, KubeSource
from gpuwatch.collectors.kube_parse import build_snapshot
from gpuwatch.config import Settings
from gpuwatch.simulate.apiserver import KubeApiServer, kubeconfig_for

# the client builds its ApiException with urllib3's deprecated getheaders()
pytestmark = pytest.mark.filterwarnings("ignore:HTTPResponse.getheader:DeprecationWarning")

FIXTURES = Path(__file__).parent / "fixtures" / "kube"
RESOURCES = ("pods", "nodes", "namespaces", "replicasets", "jobs")
NOW_TS = 1794830400


def load(resource: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads((FIXTURES / f"{resource}.json").read_text())["items"]
    return items


@pytest.fixture
def objects() -> dict[str, list[dict[str, Any]]]:
    return {resource: load(resource) for resource in RESOURCES}


@pytest.fixture
def server(objects: dict[str, list[dict[str, Any]]]) -> Iterator[KubeApiServer]:
    with KubeApiServer(objects) as api:
        yield api


@pytest.fixture
def kubeconfig(server: KubeApiServer, tmp_path: Path) -> Path:
    return kubeconfig_for(server.url, tmp_path / "kubeconfig")


@pytest.fixture(autouse=True)
def _no_ambient_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No developer kubeconfig or service account leaks into a test."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))


def source(kubeconfig: Path | str | None, **kwargs: Any) -> KubeSource:
    settings: dict[str, Any] = {
        "timeout_s": 5.0,
        "retries": 3,
        "page_size": 2,
        "team_label": "team",
        "base_delay_s": 0.0,
    }
    settings.update(kwargs)
    return KubeSource(str(kubeconfig) if kubeconfig else None, None, **settings)


def list_requests(server: KubeApiServer, path: str) -> list[dict[str, str]]:
    return [r.query for r in server.requests if r.path == path]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- reading ---------------------------------------------------------------------------------


def test_snapshot_through_the_real_client_equals_the_parsed_objects(
    server: KubeApiServer, kubeconfig: Path, objects: dict[str, list[dict[str, Any]]]
) -> None:
    with source(kubeconfig) as kube:
        snap = kube.snapshot(NOW_TS)
    expected = build_snapshot(*(objects[r] for r in RESOURCES), "team", NOW_TS)
    assert snap.gpu_pods == expected.gpu_pods
    assert snap.nodes == expected.nodes
    assert snap.namespaces == expected.namespaces
    assert snap.non_gpu_pods == expected.non_gpu_pods
    assert snap.pod_nodes == expected.pod_nodes
    assert len(snap.gpu_pods) == 9 and snap.taken_ts == NOW_TS


@pytest.mark.parametrize(
    ("path", "count"),
    [
        ("/api/v1/pods", 13),
        ("/api/v1/nodes", 8),
        ("/api/v1/namespaces", 6),
        ("/apis/apps/v1/replicasets", 4),
        ("/apis/batch/v1/jobs", 3),
    ],
)
def test_every_list_is_paginated(
    server: KubeApiServer, kubeconfig: Path, path: str, count: int
) -> None:
    with source(kubeconfig, page_size=2) as kube:
        kube.snapshot(NOW_TS)
    queries = list_requests(server, path)
    assert len(queries) == -(-count // 2)
    assert all(q["limit"] == "2" for q in queries)
    assert "continue" not in queries[0]
    assert all(q.get("continue") for q in queries[1:])
    assert len({q.get("continue") for q in queries}) == len(queries)


def test_one_page_when_the_page_is_large(server: KubeApiServer, kubeconfig: Path) -> None:
    with source(kubeconfig, page_size=500) as kube:
        snap = kube.snapshot(NOW_TS)
    assert len(list_requests(server, "/api/v1/pods")) == 1
    assert len(snap.gpu_pods) == 9


def test_workloads_pending_pods_and_teams(server: KubeApiServer, kubeconfig: Path) -> None:
    with source(kubeconfig) as kube:
        snap = kube.snapshot(NOW_TS)
    pods = {p["name"]: p for p in snap.gpu_pods}
    workloads = {name: (p["workload_kind"], p["workload_name"]) for name, p in pods.items()}
    assert workloads == {
        "trainer-7d9f8b6c5d-x2x7k": ("Deployment", "trainer"),
        "llm-server-5f6d7c8b9-abcde": ("Deployment", "llm-server"),
        "ghost-trainer-6b8d9c7f5-zt6wq": ("Deployment", "ghost-trainer"),
        "orphan-rs-q8w7e": ("ReplicaSet", "orphan-rs"),
        "nightly-embed-29380440-h4k2p": ("CronJob", "nightly-embed"),
        "backfill-2026-8zq9t": ("Job", "backfill-2026"),
        "sweep-lr-p2m8d": ("Job", "sweep-lr"),
        "dist-train-0": ("StatefulSet", "dist-train"),
        "jupyter-alice": ("Pod", "jupyter-alice"),
    }
    assert pods["sweep-lr-p2m8d"]["phase"] == "Pending"
    assert pods["sweep-lr-p2m8d"]["node_name"] is None
    assert pods["dist-train-0"]["gpu_count"] == 8  # its init container asks for 8
    assert pods["llm-server-5f6d7c8b9-abcde"]["gpu_resource"] == "nvidia.com/mig-3g.40gb"
    assert pods["jupyter-alice"]["gpu_resource"] == "nvidia.com/gpu.shared"
    assert pods["trainer-7d9f8b6c5d-x2x7k"]["team"] == "vision"  # pod label
    assert pods["llm-server-5f6d7c8b9-abcde"]["team"] == "platform"  # namespace label
    assert pods["nightly-embed-29380440-h4k2p"]["team"] == "unassigned"
    assert ("gpu-operator", "nvidia-dcgm-exporter-7k2lp") in snap.non_gpu_pods
    assert "nvidia-dcgm-exporter-7k2lp" not in pods
    assert snap.pod_nodes["nvidia-dcgm-exporter-7k2lp"] == "gpu-h100-0"


def test_nodes_carry_gfd_facts_and_spot_labels(server: KubeApiServer, kubeconfig: Path) -> None:
    with source(kubeconfig) as kube:
        nodes = {n["name"]: n for n in kube.snapshot(NOW_TS).nodes}
    assert {name: n["capacity_type"] for name, n in nodes.items()} == {
        "aks-a10-spot": "spot",  # kubernetes.azure.com/scalesetpriority
        "gke-l4-spot": "spot",  # cloud.google.com/gke-spot
        "gke-t4-preemptible": "spot",  # cloud.google.com/gke-preemptible
        "gpu-a100-spot": "spot",  # eks.amazonaws.com/capacityType=SPOT
        "karpenter-a10g-spot": "spot",  # karpenter.sh/capacity-type=spot
        "gpu-a100-mig-single": "on_demand",
        "gpu-h100-0": "on_demand",  # karpenter.sh/capacity-type=on-demand
    }
    h100 = nodes["gpu-h100-0"]
    assert {k: v for k, v in h100.items() if k != "labels"} == {
        "name": "gpu-h100-0",
        "gpu_model": "NVIDIA-H100-80GB-HBM3",
        "gpu_count": 8,
        "gpu_memory_mib": 81559,
        "capacity_type": "on_demand",
        "instance_type": "p5.48xlarge",
        "mig_capable": True,
        "mig_strategy": "none",
        "mig_config": None,
        "timeslice_replicas": 1,
        "gpu_sharing": "device-plugin",
        "provider": "aws",  # spec.providerID aws:///us-east-1a/i-…
    }
    assert h100["labels"]["topology.kubernetes.io/zone"] == "us-east-1a"
    assert "kubernetes.io/hostname" not in h100["labels"]
    assert nodes["gke-t4-preemptible"]["timeslice_replicas"] == 4
    assert nodes["gke-l4-spot"]["instance_type"] == "g2-standard-8"


# -- failures --------------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "words"), [(401, "401 Unauthorized"), (403, "403 Forbidden")])
def test_denied_fails_at_once_naming_the_rbac_needed(
    server: KubeApiServer, kubeconfig: Path, status: int, words: str
) -> None:
    server.deny(status)
    with source(kubeconfig) as kube, pytest.raises(KubeError) as info:
        kube.snapshot(NOW_TS)
    message = str(info.value)
    assert words in message and "listing pods" in message
    assert RBAC_NEEDED in message
    for needed in (
        "get, list",
        "pods",
        "nodes",
        "namespaces (core)",
        "replicasets",
        "deployments",
        "statefulsets",
        "daemonsets (apps)",
        "jobs",
        "cronjobs (batch)",
    ):
        assert needed in message
    assert "\n" not in message
    assert len(server.requests) == 1  # not retried


def test_bearer_token_is_sent_and_never_shown(
    objects: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    with KubeApiServer(objects, token="s3cret-token") as api:
        good = kubeconfig_for(api.url, tmp_path / "good", token="s3cret-token")
        bad = kubeconfig_for(api.url, tmp_path / "bad", token="wrong-token-1234")
        with source(good) as kube:
            assert len(kube.snapshot(NOW_TS).gpu_pods) == 9
        with source(bad) as kube, pytest.raises(KubeError, match="401") as info:
            kube.snapshot(NOW_TS)
    assert "wrong-token-1234" not in str(info.value)


@pytest.mark.parametrize("status", [500, 503, 429])
def test_transient_errors_are_retried(server: KubeApiServer, kubeconfig: Path, status: int) -> None:
    server.fail_next("/api/v1/pods", status=status, times=2)
    with source(kubeconfig, retries=3) as kube:
        snap = kube.snapshot(NOW_TS)
    assert len(snap.gpu_pods) == 9
    first_pages = [q for q in list_requests(server, "/api/v1/pods") if "continue" not in q]
    assert len(first_pages) == 3  # two failures, then the page


def test_a_failing_later_list_is_retried(server: KubeApiServer, kubeconfig: Path) -> None:
    server.fail_next("/apis/batch/v1/jobs", status=500, times=1)
    with source(kubeconfig, retries=1) as kube:
        assert len(kube.snapshot(NOW_TS).gpu_pods) == 9
    assert len(list_requests(server, "/apis/batch/v1/jobs")) == 3  # 2 pages + 1 retry


def test_persistent_5xx_gives_up_after_the_retries(server: KubeApiServer, kubeconfig: Path) -> None:
    server.fail_next("/api/v1/pods", status=500, times=1000)
    with source(kubeconfig, retries=3) as kube, pytest.raises(KubeError) as info:
        kube.snapshot(NOW_TS)
    message = str(info.value)
    assert message == (
        f"Kubernetes API at {server.url} failed listing pods after 4 attempts: "
        "HTTP 500 Internal Server Error"
    )
    assert len(list_requests(server, "/api/v1/pods")) == 4


def test_other_client_errors_are_not_retried(server: KubeApiServer, kubeconfig: Path) -> None:
    server.fail_next("/api/v1/nodes", status=404, times=1)
    with source(kubeconfig) as kube, pytest.raises(KubeError, match="refused listing nodes") as e:
        kube.snapshot(NOW_TS)
    assert "HTTP 404" in str(e.value) and "\n" not in str(e.value)
    assert len(list_requests(server, "/api/v1/nodes")) == 1


def test_malformed_json_names_the_resource(server: KubeApiServer, kubeconfig: Path) -> None:
    server.fail_next("/apis/apps/v1/replicasets", malformed=True)
    with source(kubeconfig) as kube, pytest.raises(KubeError) as info:
        kube.snapshot(NOW_TS)
    message = str(info.value)
    assert message.startswith(
        f"Kubernetes API at {server.url} returned malformed JSON listing replicasets"
    )
    assert "\n" not in message


def test_connection_refused_after_retries(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    path = kubeconfig_for(url, tmp_path / "kubeconfig")
    with source(path, retries=3) as kube, pytest.raises(KubeError) as info:
        kube.snapshot(NOW_TS)
    assert str(info.value) == (
        f"Kubernetes API at {url} unreachable after 4 attempts: Connection refused"
    )


def test_a_silent_server_times_out(tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        path = kubeconfig_for(url, tmp_path / "kubeconfig")
        with source(path, retries=1, timeout_s=0.2) as kube, pytest.raises(KubeError) as info:
            kube.snapshot(NOW_TS)
    assert str(info.value) == f"Kubernetes API at {url} unreachable after 2 attempts: timed out"


def test_an_expired_continue_token_restarts_the_list(
    server: KubeApiServer, kubeconfig: Path
) -> None:
    server.expire_next_continue("/api/v1/pods", times=1)
    with source(kubeconfig) as kube:
        snap = kube.snapshot(NOW_TS)
    assert len(snap.gpu_pods) == 9  # nothing lost, nothing doubled
    assert len({(p["namespace"], p["name"]) for p in snap.gpu_pods}) == 9
    first_pages = [q for q in list_requests(server, "/api/v1/pods") if "continue" not in q]
    assert len(first_pages) == 2


def test_a_list_that_keeps_expiring_fails(server: KubeApiServer, kubeconfig: Path) -> None:
    server.expire_next_continue("/api/v1/pods", times=1000)
    with source(kubeconfig, retries=2) as kube, pytest.raises(KubeError, match="kept expiring"):
        kube.snapshot(NOW_TS)


# -- client configuration --------------------------------------------------------------------


def test_explicit_kubeconfig_must_exist(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match=r"kubeconfig .*missing not found"):
        source(tmp_path / "missing").snapshot(NOW_TS)


def test_kubeconfig_from_the_environment(
    server: KubeApiServer, kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'absent'}:{kubeconfig}")
    with source(None) as kube:
        assert len(kube.snapshot(NOW_TS).gpu_pods) == 9
        assert kube.url == server.url


def test_kubeconfig_environment_naming_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(KubeConfigError, match=r"\$KUBECONFIG"):
        source(None).snapshot(NOW_TS)


def test_kubeconfig_from_home(server: KubeApiServer, tmp_path: Path) -> None:
    kubeconfig_for(server.url, Path.home() / ".kube" / "config")
    with source(None) as kube:
        assert len(kube.snapshot(NOW_TS).gpu_pods) == 9


def test_no_configuration_at_all() -> None:
    with pytest.raises(KubeConfigError) as info:
        source(None).snapshot(NOW_TS)
    message = str(info.value)
    assert message.startswith("no Kubernetes configuration found")
    assert "$KUBECONFIG" in message and "\n" not in message


def test_context_selects_the_cluster(server: KubeApiServer, tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "dead", "cluster": {"server": f"http://127.0.0.1:{closed_port()}"}},
            {"name": "live", "cluster": {"server": server.url}},
        ],
        "users": [{"name": "u", "user": {}}],
        "contexts": [
            {"name": "dead", "context": {"cluster": "dead", "user": "u"}},
            {"name": "live", "context": {"cluster": "live", "user": "u"}},
        ],
        "current-context": "dead",
    }
    path.write_text(yaml.safe_dump(document))
    with KubeSource(str(path), "live", 5.0, 0, 50, "team") as kube:
        assert len(kube.snapshot(NOW_TS).gpu_pods) == 9
    with pytest.raises(KubeConfigError, match="nowhere"):
        KubeSource(str(path), "nowhere", 5.0, 0, 50, "team").snapshot(NOW_TS)


def test_from_settings() -> None:
    settings = Settings.model_validate(
        {
            "kubernetes": {
                "kubeconfig": "/k/config",
                "context": "prod",
                "timeout": "12s",
                "retries": 5,
                "page_size": 250,
            },
            "labels": {"team": "squad"},
        }
    )
    kube = KubeSource.from_settings(settings)
    assert (kube.kubeconfig, kube.context, kube.timeout_s, kube.retries) == (
        "/k/config",
        "prod",
        12.0,
        5,
    )
    assert (kube.page_size, kube.team_label) == (250, "squad")


# -- the API stand-in ------------------------------------------------------------------------


def test_lists_have_the_real_shape(server: KubeApiServer) -> None:
    status, raw = server.respond("/api/v1/pods?limit=5", None)
    body = json.loads(raw)
    assert status == 200
    assert (body["kind"], body["apiVersion"]) == ("PodList", "v1")
    assert body["metadata"]["remainingItemCount"] == 8
    assert body["metadata"]["resourceVersion"].isdigit()
    assert [i["metadata"]["name"] for i in body["items"]][:2] == [
        "backfill-2026-8zq9t",
        "nightly-embed-29380440-h4k2p",
    ]  # ordered by namespace, then name
    assert all("kind" not in item for item in body["items"])
    status, raw = server.respond(
        f"/api/v1/pods?limit=5&continue={body['metadata']['continue']}", None
    )
    assert len(json.loads(raw)["items"]) == 5
    _, raw = server.respond("/apis/apps/v1/replicasets", None)
    whole = json.loads(raw)
    assert (whole["kind"], whole["apiVersion"]) == ("ReplicaSetList", "apps/v1")
    assert "continue" not in whole["metadata"] and len(whole["items"]) == 4


def test_the_client_models_accept_the_lists(server: KubeApiServer, kubeconfig: Path) -> None:
    api = config.new_client_from_config(str(kubeconfig))
    try:
        core, apps, batch = client.CoreV1Api(api), client.AppsV1Api(api), client.BatchV1Api(api)
        pods = core.list_namespaced_pod("ml-training")
        assert sorted(p.metadata.name for p in pods.items) == [
            "dist-train-0",
            "ghost-trainer-6b8d9c7f5-zt6wq",
            "sweep-lr-p2m8d",
            "trainer-7d9f8b6c5d-x2x7k",
        ]
        trainer = next(p for p in pods.items if p.metadata.name.startswith("trainer"))
        assert trainer.spec.containers[0].resources.limits["nvidia.com/gpu"] == "4"
        assert trainer.metadata.owner_references[0].kind == "ReplicaSet"
        assert len(core.list_node().items) == 8
        assert core.list_namespace(limit=4).metadata._continue
        rs = apps.list_namespaced_replica_set("inference").items
        assert [r.metadata.name for r in rs] == ["llm-server-5f6d7c8b9", "orphan-rs"]
        assert len(batch.list_job_for_all_namespaces().items) == 3
        assert client.VersionApi(api).get_code().git_version.startswith("v1.")
    finally:
        api.close()


def test_stale_and_bad_continue_tokens(
    server: KubeApiServer, objects: dict[str, list[dict[str, Any]]]
) -> None:
    _, raw = server.respond("/api/v1/nodes?limit=3", None)
    token = json.loads(raw)["metadata"]["continue"]
    server.set_objects(objects)  # a new resourceVersion
    status, raw = server.respond(f"/api/v1/nodes?limit=3&continue={token}", None)
    assert (status, json.loads(raw)["reason"]) == (410, "Expired")
    status, raw = server.respond("/api/v1/nodes?continue=not-a-token", None)
    assert (status, json.loads(raw)["kind"]) == (400, "Status")


def test_unknown_paths_and_selectors(server: KubeApiServer) -> None:
    status, raw = server.respond("/api/v1/secrets", None)
    assert (status, json.loads(raw)["reason"]) == (404, "NotFound")
    status, _ = server.respond("/api/v1/pods?labelSelector=app%3Dx", None)
    assert status == 400
    status, raw = server.respond("/apis", None)
    groups = {g["name"] for g in json.loads(raw)["groups"]}
    assert (status, groups) == (200, {"apps", "batch", "resource.k8s.io"})


def test_http_errors_carry_a_status_body(server: KubeApiServer) -> None:
    server.fail_next("/api/v1/pods", status=503)
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{server.url}/api/v1/pods", timeout=5)
    body = json.loads(info.value.read())
    assert (info.value.code, body["kind"], body["code"]) == (503, "Status", 503)
    with urllib.request.urlopen(f"{server.url}/healthz", timeout=5) as ok:
        assert ok.status == 200


def test_server_rejects_misuse(objects: dict[str, list[dict[str, Any]]]) -> None:
    with pytest.raises(ValueError, match="secrets"):
        KubeApiServer({"secrets": []})
    api = KubeApiServer(objects)
    with pytest.raises(ValueError, match="401, 403"):
        api.deny(500)
    with pytest.raises(RuntimeError, match="not started"):
        _ = api.url


def test_kubeconfig_for_writes_a_private_file(tmp_path: Path) -> None:
    path = kubeconfig_for("http://127.0.0.1:8001", tmp_path / "sub" / "config", token="t0k")
    document = yaml.safe_load(path.read_text())
    assert document["clusters"][0]["cluster"]["server"] == "http://127.0.0.1:8001"
    assert document["users"][0]["user"] == {"token": "t0k"}
    assert document["current-context"] == document["contexts"][0]["name"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
