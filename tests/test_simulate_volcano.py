"""The simulated fleet's Volcano: its Queues and PodGroups as served, read by the collector's
parser and client, and the gang's pods."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.collectors.kube import KubeSource
from gpuwatch.collectors.volcano_parse import parse_volcano
from gpuwatch.simulate.apiserver import kubeconfig_for
from gpuwatch.simulate.fleet import Fleet, build_fleet
from gpuwatch.simulate.kube_objects import kube_objects
from gpuwatch.simulate.serve import LiveKubeApi

PROD, RESEARCH = "prod-us-east", "research-eu"
QUEUE_ROW = {
    "kind": "volcano",
    "queue": "research-batch",
    "cohort": "root",
    "flavor": "",
    "gpu_resource": "nvidia.com/gpu",
    "gpu_model": None,
    "nominal_gpus": 4.0,
    "borrowing_limit_gpus": 0.0,
    "lending_limit_gpus": None,
    "first_seen_ts": 1_735_689_600,  # the Queue's creationTimestamp, 2025-01-01T00:00:00Z
}


def _ts(day: int, hour: int) -> int:
    return int(datetime(2026, 11, day, hour, tzinfo=UTC).timestamp())


TS = _ts(16, 15)  # today's gang runs (10:00-16:00), yesterday's PodGroup is still listed


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return build_fleet(7)


def _pod_group_row(name: str, uid: str, day: int, state: str) -> dict[str, Any]:
    return {
        "kind": "volcano",
        "namespace": "nlp-research",
        "name": name,
        "uid": uid,
        "queue": "research-batch",
        "flavor": None,
        "owner_kind": "PodGroup",
        "owner_name": name,
        "gpu_resource": "nvidia.com/gpu",
        "gpus_requested": 4.0,
        "pod_count": 4,
        "state": state,
        "created_ts": _ts(day, 10),
        "admitted_ts": _ts(day, 10),
        "finished_ts": None,
        "evictions": 0,
    }


def test_the_served_queues_and_pod_groups_parse(fleet: Fleet) -> None:
    objects = kube_objects(fleet, TS, RESEARCH)
    assert [q["metadata"]["name"] for q in objects["queues"]] == [
        "root",
        "default",
        "research-batch",
    ]
    groups = objects["podgroups"]
    assert [g["status"]["phase"] for g in groups] == ["Completed", "Running"]
    assert [g["spec"]["minMember"] for g in groups] == [4, 4]
    parsed = parse_volcano(objects["queues"], groups)
    assert parsed.queue_flavors == [QUEUE_ROW]  # root and default have no GPUs
    by_day = {15: groups[0]["metadata"], 16: groups[1]["metadata"]}
    expected = [
        _pod_group_row(by_day[15]["name"], by_day[15]["uid"], 15, "finished"),
        _pod_group_row(by_day[16]["name"], by_day[16]["uid"], 16, "admitted"),
    ]
    assert parsed.workloads == sorted(expected, key=lambda r: r["name"])
    running = objects["queues"][2]["status"]
    assert (running["running"], running["completed"], running["allocated"]["nvidia.com/gpu"]) == (
        1,
        1,
        "4",
    )


def test_the_gangs_pods_name_their_pod_group(fleet: Fleet) -> None:
    objects = kube_objects(fleet, TS, RESEARCH)
    today = objects["podgroups"][1]["metadata"]["name"]
    gang = [
        p
        for p in objects["pods"]
        if p["metadata"].get("annotations", {}).get("scheduling.k8s.io/group-name") == today
    ]
    assert sorted(p["metadata"]["name"] for p in gang) == [f"{today}-{i}" for i in range(4)]
    assert {p["spec"]["schedulerName"] for p in gang} == {"volcano"}
    assert {p["status"]["phase"] for p in gang} == {"Running"}
    assert len({p["spec"]["nodeName"] for p in gang}) == 1
    limits = [p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] for p in gang]
    assert limits == ["1"] * 4
    # yesterday's pods (bare pods) were deleted when they finished: only its PodGroup is left
    others = [p for p in objects["pods"] if p["spec"].get("schedulerName") == "volcano"]
    assert len(others) == 4


def test_volcano_lives_in_research_eu_only(fleet: Fleet) -> None:
    prod = kube_objects(fleet, TS, PROD)
    assert prod["queues"] == [] and prod["podgroups"] == []
    late = kube_objects(fleet, _ts(17, 17), RESEARCH)  # the 16th's PodGroup deleted at 16:00
    assert [g["status"]["phase"] for g in late["podgroups"]] == ["Completed"]
    assert late["podgroups"][0]["metadata"]["creationTimestamp"] == "2026-11-17T10:00:00Z"


@pytest.fixture
def research_api(fleet: Fleet) -> Iterator[LiveKubeApi]:
    with LiveKubeApi(fleet, RESEARCH, port=0, clock=lambda: float(TS)) as server:
        yield server


def test_the_collectors_client_reads_volcano_from_the_live_api(
    research_api: LiveKubeApi, tmp_path: Path
) -> None:
    config = kubeconfig_for(research_api.url, tmp_path / "kubeconfig")
    with KubeSource(kubeconfig=str(config), page_size=50, retries=0) as source:
        snap = source.snapshot(TS)
    assert snap.sched.volcano.summary() == "Volcano on (scheduling.volcano.sh/v1beta1)"
    assert [dict(r) for r in snap.sched.queue_flavors] == [QUEUE_ROW]
    assert sorted(r["state"] for r in snap.sched.workloads) == ["admitted", "finished"]
    gang = [p for p in snap.gpu_pods if p["gang_kind"] == "volcano"]
    assert len(gang) == 4 and {p["queue"] for p in gang} == {"research-batch"}
    assert {p["gang_size"] for p in gang} == {4} and len({p["gang_name"] for p in gang}) == 1


def test_other_clusters_apis_do_not_serve_volcano(fleet: Fleet) -> None:
    with LiveKubeApi(fleet, PROD, port=0, clock=lambda: float(TS)) as server:
        status, _ = server.respond("/apis/scheduling.volcano.sh", None)
    assert status == 404
