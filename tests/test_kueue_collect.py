"""Queues, quotas and gangs read through the real ``kubernetes`` client from the simulated API
server (Kueue in v1beta1, in v1beta2, not served, forbidden; Volcano), and stored by a
collection: twice gives the same rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.collectors.collect import Window, collect
from gpuwatch.collectors.kube import KubeError, KubeSource
from gpuwatch.collectors.kube_parse import KubeSnapshot
from gpuwatch.collectors.kube_queues import Read, sched_state
from gpuwatch.domain.labels import LabelVariants
from gpuwatch.simulate.apiserver import KubeApiServer, kubeconfig_for
from gpuwatch.store.repository_scheduling import load_queue_flavors, load_sched_workloads

# the client builds its ApiException with urllib3's deprecated getheaders()
pytestmark = pytest.mark.filterwarnings("ignore:HTTPResponse.getheader:DeprecationWarning")

FIXTURES = Path(__file__).parent / "fixtures"
NOW_TS = 1794830400  # 2026-11-16T12:00:00Z
KUEUE_LISTS = ("clusterqueues", "resourceflavors", "localqueues", "workloads")
NOT_SERVED = (
    "Queues: Kueue off: kueue.x-k8s.io is not served; "
    "Volcano off: scheduling.volcano.sh is not served"
)


def _fixture(path: str) -> list[dict[str, Any]]:
    return list(json.loads((FIXTURES / path).read_text())["items"])


def _pod(name: str, namespace: str, gpus: int, node: str | None, **meta: Any) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)}
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", **meta},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": limits}}]},
        "status": {"phase": "Running" if node else "Pending"},
    }


def _core() -> dict[str, list[dict[str, Any]]]:
    job_ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "train-a", "controller": True}
    group = {"kueue.x-k8s.io/pod-group-name": "infer-group", "kueue.x-k8s.io/queue-name": "default"}
    labels = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "8"}
    return {
        "pods": [
            _pod("train-a-0", "team-a", 2, "gpu-0", ownerReferences=[job_ref]),
            _pod("train-a-1", "team-a", 2, None, ownerReferences=[job_ref]),
            _pod("infer-0", "team-b", 1, "gpu-0", labels=group),
            _pod(
                "train-vc-worker-0",
                "research",
                2,
                "gpu-0",
                annotations={"scheduling.k8s.io/group-name": "train-vc-6c1d2e3f"},
            ),
            _pod("plain-0", "team-b", 1, "gpu-0"),
        ],
        "nodes": [{"metadata": {"name": "gpu-0", "labels": labels}, "status": {}}],
        "namespaces": [{"metadata": {"name": n}} for n in ("research", "team-a", "team-b")],
        "jobs": [
            {
                "metadata": {
                    "name": "train-a",
                    "namespace": "team-a",
                    "labels": {"kueue.x-k8s.io/queue-name": "train"},
                },
                "spec": {"parallelism": 4, "completions": 4, "completionMode": "Indexed"},
            }
        ],
    }


def _objects(kueue_version: str | None, volcano: bool) -> dict[str, list[dict[str, Any]]]:
    objects = _core()
    if kueue_version is not None:
        for name in KUEUE_LISTS:
            objects[name] = _fixture(f"kueue/{kueue_version}/{name}.json")
    if volcano:
        for name in ("queues", "podgroups"):
            objects[name] = _fixture(f"volcano/v1beta1/{name}.json")
    return objects


@pytest.fixture(autouse=True)
def _no_ambient_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


def _serve(kueue_version: str | None, volcano: bool = True) -> KubeApiServer:
    objects = _objects(kueue_version, volcano)
    return KubeApiServer(objects, kueue_version=kueue_version, volcano=volcano)


def _source(server: KubeApiServer, tmp_path: Path, **kwargs: Any) -> KubeSource:
    config = kubeconfig_for(server.url, tmp_path / "kubeconfig")
    settings: dict[str, Any] = {"timeout_s": 5.0, "retries": 0, "page_size": 2}
    return KubeSource(str(config), None, base_delay_s=0.0, **{**settings, **kwargs})


def _snapshot(server: KubeApiServer, tmp_path: Path) -> KubeSnapshot:
    with _source(server, tmp_path) as source:
        return source.snapshot(NOW_TS)


def _gangs(snap: KubeSnapshot) -> dict[str, tuple[Any, ...]]:
    keys = ("queue", "gang_kind", "gang_name", "gang_size")
    return {pod["name"]: tuple(pod[k] for k in keys) for pod in snap.gpu_pods}


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_kueue_is_read_in_the_version_served(version: str, tmp_path: Path) -> None:
    with _serve(version) as server:
        snap = _snapshot(server, tmp_path)
        requests = server.requests
    assert snap.sched.summary() == (
        f"Queues: Kueue on (kueue.x-k8s.io/{version}); Volcano on (scheduling.volcano.sh/v1beta1)"
        "; 9 GPU quotas, 8 queued workloads asking for GPUs"
    )
    assert _gangs(snap) == {
        "infer-0": ("team-b-cq", "kueue", "infer-group", 2),
        "plain-0": (None, None, None, None),
        "train-a-0": ("team-a-cq", "kueue", "job/train-a", 4),
        "train-a-1": ("team-a-cq", "kueue", "job/train-a", 4),
        "train-vc-worker-0": ("research", "volcano", "train-vc-6c1d2e3f", 4),
    }
    workloads = f"/apis/kueue.x-k8s.io/{version}/workloads"
    pages = [r.query for r in requests if r.path == workloads]
    assert len(pages) == 3 and pages[0]["limit"] == "2"  # 6 Workloads, 2 a page
    assert "continue" in pages[1] and "continue" in pages[2]
    assert any(r.path == "/apis/kueue.x-k8s.io" for r in requests)


def _collect(engine: Engine, server: KubeApiServer, tmp_path: Path, now_ts: int) -> Any:
    window = Window(now_ts, now_ts, 60, 3600)  # no samples: the snapshot alone
    with _source(server, tmp_path) as source:
        return collect(engine, "lab", window, _NoSamples(), source, LabelVariants(), now_ts)


class _NoSamples:
    def fetch_page(self, start_ts: int, end_ts: int, step_s: int) -> dict[str, Any]:
        raise AssertionError("an empty window fetches nothing")


def _stored_pods(engine: Engine) -> list[tuple[Any, ...]]:
    sql = "SELECT name, queue, gang_kind, gang_name, gang_size FROM pods ORDER BY name"
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(sa.text(sql))]


def test_without_kueue_or_volcano_the_collection_goes_on(
    migrated_engine: Engine, tmp_path: Path
) -> None:
    with _serve(None, volcano=False) as server:
        stats = _collect(migrated_engine, server, tmp_path, NOW_TS)
    assert stats.queues == NOT_SERVED
    # the Job still names its LocalQueue: a Kueue gang whose queue is unknown
    assert _stored_pods(migrated_engine) == [
        ("infer-0", None, "kueue", "infer-group", None),
        ("plain-0", None, None, None, None),
        ("train-a-0", None, "kueue", "job/train-a", 4),
        ("train-a-1", None, "kueue", "job/train-a", 4),
        ("train-vc-worker-0", None, "volcano", "train-vc-6c1d2e3f", None),
    ]
    assert load_queue_flavors(migrated_engine).empty
    assert load_sched_workloads(migrated_engine, 0, NOW_TS + 1).empty


def test_forbidden_kueue_is_off_with_the_access_to_grant(tmp_path: Path) -> None:
    with _serve("v1beta2") as server:
        server.forbid_group("kueue.x-k8s.io")
        snap = _snapshot(server, tmp_path)
    assert snap.sched.kueue.off_reason == (
        "forbidden: grant get, list on clusterqueues, resourceflavors, localqueues, workloads "
        "(kueue.x-k8s.io) (HTTP 403 listing clusterqueues)"
    )
    assert snap.sched.volcano.on
    assert [r["kind"] for r in snap.sched.queue_flavors] == ["volcano"] * 3
    assert len(snap.gpu_pods) == 5


def test_a_server_error_on_kueue_fails_as_every_list_does(tmp_path: Path) -> None:
    with _serve("v1beta2") as server:
        server.fail_next("/apis/kueue.x-k8s.io/v1beta2/localqueues", status=503, times=2)
        with _source(server, tmp_path, retries=1) as source, pytest.raises(KubeError) as info:
            source.snapshot(NOW_TS)
    assert "failed listing localqueues after 2 attempts" in str(info.value)


def _table(engine: Engine, table: str) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT * FROM {table}")).all()
    return sorted(tuple(row[1:]) for row in rows)  # without the id


def test_collecting_twice_stores_the_same_rows(migrated_engine: Engine, tmp_path: Path) -> None:
    with _serve("v1beta2") as server:
        _collect(migrated_engine, server, tmp_path, NOW_TS)
        quotas = _table(migrated_engine, "queue_flavors")
        work = _table(migrated_engine, "sched_workloads")
        _collect(migrated_engine, server, tmp_path, NOW_TS)
        assert _table(migrated_engine, "queue_flavors") == quotas
        assert _table(migrated_engine, "sched_workloads") == work
        later = _collect(migrated_engine, server, tmp_path, NOW_TS + 600)
    assert later.queues.startswith("Queues: Kueue on (kueue.x-k8s.io/v1beta2)")
    frame = load_queue_flavors(migrated_engine)
    assert len(frame) == 9
    # since the queues' creation (Volcano's at 00:00, Kueue's at 00:05 on 2026-11-01), not the
    # first collection: a backfill knows the quota existed before it
    assert set(frame["first_seen_ts"]) == {1_793_491_200, 1_793_491_500}
    assert set(frame["last_seen_ts"]) == {NOW_TS + 600}
    team_a = frame[(frame["queue"] == "team-a-cq") & (frame["flavor"] == "a100-80gb")].iloc[0]
    assert (team_a["cohort"], team_a["nominal_gpus"], team_a["borrowing_limit_gpus"]) == (
        "research",
        8.0,
        4.0,
    )
    work_frame = load_sched_workloads(migrated_engine, NOW_TS, NOW_TS + 601)
    assert len(work_frame) == 8 and set(work_frame["last_seen_ts"]) == {NOW_TS + 600}
    pending = work_frame[work_frame["state"] == "pending"]
    assert sorted(zip(pending["name"], pending["gpus_requested"], strict=True)) == [
        ("jobset-llm-pretrain-9a1b2", 24.0),
        ("podgroup-2f8e4c1a-7b3d-4e5f-9a6b-0c1d2e3f4a5b", 1.0),
    ]


def test_an_unreadable_object_turns_its_scheduler_off() -> None:
    quota = {"name": "nvidia.com/gpu", "nominalQuota": "1.5"}
    bad = {
        "metadata": {"name": "team-a-cq"},
        "spec": {"resourceGroups": [{"flavors": [{"name": "f", "resources": [quota]}]}]},
    }
    volcano = Read("v1beta1", "", {"queues": _fixture("volcano/v1beta1/queues.json")})
    state = sched_state(Read("v1beta2", "", {"clusterqueues": [bad]}), volcano)
    assert state.kueue.off_reason == (
        "unreadable ClusterQueue team-a-cq: invalid GPU quantity '1.5': "
        "GPUs come in whole, non-negative numbers"
    )
    assert state.volcano.on and len(state.queue_flavors) == 3
