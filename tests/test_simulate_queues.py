"""The scheduling scenarios of the simulated fleet: a Kueue cohort, a stalled gang, a fragmented
pool, a scattered job and work waiting for admission, checked against hand-counted facts."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pytest

from gpuwatch.simulate.fleet import Fleet, build_fleet
from gpuwatch.simulate.generate import SimulatedData, generate
from gpuwatch.simulate.kube_objects import kube_objects
from gpuwatch.simulate.kube_queues import queue_objects
from gpuwatch.simulate.pods import pods_at

PROD = "prod-us-east"


def _ts(hour: int, minute: int = 0, day: int = 16) -> int:
    return int(datetime(2026, 11, day, hour, minute, tzinfo=UTC).timestamp())


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return build_fleet(7)


@pytest.fixture(scope="module")
def day(fleet: Fleet) -> SimulatedData:
    return generate(fleet, _ts(0), _ts(0, day=17), 600)


def _pods(fleet: Fleet, ts: int, workload: str) -> pd.DataFrame:
    pods = pods_at(fleet, ts)
    return pods[pods["workload_name"].str.startswith(workload)]


def _alias(fleet: Fleet) -> dict[str | None, str]:
    return {n.name: n.alias for n in fleet.nodes if n.cluster == PROD}


def test_the_gang_runs_six_pods_while_two_wait_three_hours(fleet: Fleet) -> None:
    during = _pods(fleet, _ts(11), "ddp-pretrain")
    assert len(during) == 8 and set(during["gang_size"]) == {8}
    running = during[during["phase"] == "Running"]
    pending = during[during["phase"] == "Pending"]
    assert len(running) == 6 and running["gpu_count"].sum() == 24
    nodes = sorted(_alias(fleet)[n] for n in running["node"])
    assert nodes == ["hb0", "hb0", "hb1", "hb1", "hb2", "hb2"]
    assert len(pending) == 2 and pending["node"].isna().all()
    assert set(pending["created_ts"]) == {_ts(10)} and pending["started_ts"].isna().all()
    assert sorted(pending["pod"].str.split("-").str[3]) == ["6", "7"]  # completion indexes
    later = _pods(fleet, _ts(13, 30), "ddp-pretrain")
    assert (later["phase"] == "Running").sum() == 8
    assert set(later["started_ts"].dropna()) == {_ts(10), _ts(13)}
    assert set(later["gang_kind"]) == {"kueue"} and set(later["queue"]) == {"training"}
    assert len(set(later["gang_name"])) == 1 and later["gang_name"].iloc[0].startswith("job/")


def _free_units(data: SimulatedData, fleet: Fleet, ts: int, prefix: str) -> dict[str, int]:
    rows = data.samples[data.samples["ts"] == ts]
    gpus = data.gpus.drop_duplicates("uuid").set_index("uuid")["node"]
    free = rows[rows["pod"].isna()]
    counts = free["uuid"].astype(object).map(gpus).map(_alias(fleet)).value_counts()
    aliases = sorted(a for a in _alias(fleet).values() if a.startswith(prefix))
    return {a: int(counts.get(a, 0)) for a in aliases}


def test_the_l40s_pool_has_one_free_gpu_per_node_while_a_4_gpu_pod_waits(
    fleet: Fleet, day: SimulatedData
) -> None:
    for ts in range(_ts(9), _ts(16), 600):
        assert _free_units(day, fleet, ts, "s") == {"s0": 1, "s1": 1, "s2": 1, "s3": 1}, ts
    waiting = _pods(fleet, _ts(12), "asr-finetune")
    assert waiting[["phase", "gpu_count", "gpu_resource"]].values.tolist() == [
        ["Pending", 4, "nvidia.com/gpu"]
    ]
    assert waiting["created_ts"].tolist() == [_ts(9)] and waiting["started_ts"].isna().all()
    started = _pods(fleet, _ts(16), "asr-finetune")
    assert [_alias(fleet)[n] for n in started["node"]] == ["s3"]
    # the pool's whole nodes are free only at 04:00-05:00 (s3), when nothing waits
    assert _free_units(day, fleet, _ts(4, 30), "s")["s3"] == 4


def test_the_scattered_job_spreads_eight_pods_over_four_nodes(fleet: Fleet) -> None:
    pods = _pods(fleet, _ts(2), "distill-eval")
    assert len(pods) == 8 and set(pods["gpu_count"]) == {1} and pods["owner_name"].nunique() == 1
    per_node = pods["node"].map(_alias(fleet)).value_counts().to_dict()
    assert per_node == {"hb0": 2, "hb1": 2, "hb2": 2, "hb3": 2}


def _by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in items}


def _gpu_quota(queue: dict[str, Any]) -> dict[str, dict[str, str]]:
    flavors = queue["spec"]["resourceGroups"][0]["flavors"]
    return {
        f["name"]: {k: v for k, v in r.items() if k != "name"}
        for f in flavors
        for r in f["resources"]
        if r["name"] == "nvidia.com/gpu"
    }


def test_the_cohort_of_three_queues_and_their_quotas(fleet: Fleet) -> None:
    objects = json.loads(json.dumps(queue_objects(fleet, _ts(20))))
    kinds = {
        "resourceflavors": "ResourceFlavor",
        "clusterqueues": "ClusterQueue",
        "localqueues": "LocalQueue",
        "workloads": "Workload",
    }
    for plural, kind in kinds.items():
        assert objects[plural] and {o["kind"] for o in objects[plural]} == {kind}
        assert {o["apiVersion"] for o in objects[plural]} == {"kueue.x-k8s.io/v1beta1"}
    queues = _by_name(objects["clusterqueues"])
    assert {q["spec"]["cohort"] for q in queues.values()} == {"gpu-pool"}
    assert _gpu_quota(queues["training"]) == {"h100": {"nominalQuota": "32"}}
    assert _gpu_quota(queues["research"]) == {
        "h100": {"nominalQuota": "8"},
        "l40s": {"nominalQuota": "4"},
    }
    assert _gpu_quota(queues["inference"]) == {"l40s": {"nominalQuota": "8", "lendingLimit": "0"}}
    flavors = _by_name(objects["resourceflavors"])
    assert flavors["l40s"]["spec"]["nodeLabels"] == {"nvidia.com/gpu.product": "NVIDIA-L40S"}
    local = {
        (q["metadata"]["namespace"], q["spec"]["clusterQueue"]) for q in objects["localqueues"]
    }
    assert local == {
        ("llm-training", "training"),
        ("speech", "research"),
        ("vision-prod", "inference"),
    }
    v1beta2 = queue_objects(fleet, _ts(20), version="v1beta2")["clusterqueues"]
    assert {q["spec"]["cohortName"] for q in v1beta2} == {"gpu-pool"}
    assert queue_objects(fleet, _ts(20), cluster="research-eu")["clusterqueues"] == []


def test_work_waits_unadmitted_from_17_to_04(fleet: Fleet) -> None:
    workloads = queue_objects(fleet, _ts(20))["workloads"]
    by_job = {w["metadata"]["ownerReferences"][0]["name"].rsplit("-", 1)[0]: w for w in workloads}
    waiting = [w for w in workloads if "admission" not in w["status"]]
    assert [w["spec"]["queueName"] for w in waiting] == ["research"]
    assert waiting[0]["metadata"]["creationTimestamp"] == "2026-11-16T17:00:00Z"
    assert waiting[0]["spec"]["podSets"][0]["count"] == 2
    reserved = waiting[0]["status"]["conditions"][0]
    assert (reserved["type"], reserved["status"]) == ("QuotaReserved", "False")
    finetune = by_job["asr-finetune"]["status"]["admission"]
    assert finetune["clusterQueue"] == "research"
    assert finetune["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"] == "l40s"
    objects = kube_objects(fleet, _ts(20), PROD)
    eval_jobs = [j for j in objects["jobs"] if j["metadata"]["name"].startswith("asr-eval")]
    # this morning's run (finished at 08:00, kept a day) and tonight's, suspended
    suspended = [j["metadata"] for j in eval_jobs if j["spec"]["suspend"]]
    assert len(eval_jobs) == 2 and len(suspended) == 1
    assert suspended[0]["creationTimestamp"] == "2026-11-16T17:00:00Z"
    eval_pods = [p for p in objects["pods"] if p["metadata"]["name"].startswith("asr-eval")]
    assert {p["status"]["phase"] for p in eval_pods} == {"Succeeded"}
    after = queue_objects(fleet, _ts(5, day=17))["workloads"]
    admitted = [w for w in after if w["metadata"]["name"] == waiting[0]["metadata"]["name"]]
    assert admitted[0]["status"]["admission"]["podSetAssignments"][0]["count"] == 2


def test_kueue_jobs_and_pods_carry_kueue_labels(fleet: Fleet) -> None:
    objects = kube_objects(fleet, _ts(11), PROD)
    pods = [p for p in objects["pods"] if p["metadata"]["name"].startswith("ddp-pretrain")]
    assert {p["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] for p in pods} == {"training"}
    assert {p["spec"]["nodeSelector"]["karpenter.sh/nodepool"] for p in pods} == {"gpu-h100-batch"}
    pending = [p for p in pods if p["status"]["phase"] == "Pending"]
    assert len(pending) == 2 and all("startTime" not in p["status"] for p in pending)
    job = next(j for j in objects["jobs"] if j["metadata"]["name"].startswith("ddp-pretrain"))
    assert job["spec"]["parallelism"] == 8 and job["spec"]["completionMode"] == "Indexed"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training"
    group = [p for p in objects["pods"] if p["metadata"]["name"].startswith("clip-rerank")]
    assert len(group) == 2
    names = {p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] for p in group}
    assert len(names) == 1
    assert {
        p["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] for p in group
    } == {"2"}
    workload = _by_name(objects["workloads"])[names.pop()]
    assert [o["kind"] for o in workload["metadata"]["ownerReferences"]] == ["Pod", "Pod"]
