"""Kueue's objects parsed from recorded payloads of each served version (tests/fixtures/kueue)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.collectors.kueue_parse import (
    KueueParsed,
    cohort_of,
    parse_cluster_queue,
    parse_kueue,
    parse_workload,
    workload_state,
)
from gpuwatch.collectors.sched_state import GangFacts

FIXTURES = Path(__file__).parent / "fixtures" / "kueue"
VERSIONS = ("v1beta1", "v1beta2")
LISTS = ("clusterqueues", "resourceflavors", "localqueues", "workloads")

A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"


def _items(version: str, resource: str) -> list[dict[str, Any]]:
    body = json.loads((FIXTURES / version / f"{resource}.json").read_text())
    assert body["apiVersion"] == f"kueue.x-k8s.io/{version}"
    return list(body["items"])


def _parsed(version: str) -> KueueParsed:
    return parse_kueue(*(_items(version, resource) for resource in LISTS))


def _quota(queue: str, flavor: str, resource: str, **values: Any) -> dict[str, Any]:
    cohort = values.pop("cohort", "research")
    row = {"kind": "kueue", "queue": queue, "cohort": cohort, "flavor": flavor}
    row.update(gpu_resource=resource, gpu_model=values.pop("model", None))
    row.update(nominal_gpus=values.pop("nominal"), borrowing_limit_gpus=None)
    # every ClusterQueue of the fixtures was created at 2026-11-01T00:05:00Z
    return {**row, "lending_limit_gpus": None, "first_seen_ts": 1_793_491_500, **values}


# Every GPU quota; cpu-only-cq (cpu and memory only) has none, team-b-cq's cpu/memory group none.
QUOTAS = [
    _quota("sandbox-cq", "default-flavor", "nvidia.com/gpu", cohort=None, nominal=1000.0),
    _quota(
        "team-a-cq",
        "a100-80gb",
        "nvidia.com/gpu",
        model=A100,
        nominal=8.0,
        borrowing_limit_gpus=4.0,
        lending_limit_gpus=2.0,
    ),
    _quota("team-a-cq", "spot-h100", "nvidia.com/gpu", model=H100, nominal=4.0),
    _quota(
        "team-b-cq",
        "a100-80gb",
        "nvidia.com/gpu",
        model=A100,
        nominal=4.0,
        borrowing_limit_gpus=0.0,
    ),
    _quota("team-b-cq", "h100-mig", "nvidia.com/mig-1g.10gb", model=H100, nominal=14.0),
    _quota(
        "team-b-cq",
        "h100-mig",
        "nvidia.com/mig-3g.40gb",
        model=H100,
        nominal=4.0,
        lending_limit_gpus=2.0,
    ),
]


def _work(namespace: str, name: str, uid: str, **values: Any) -> dict[str, Any]:
    row = {"kind": "kueue", "namespace": namespace, "name": name, "uid": uid}
    row.update(queue=values.pop("queue"), flavor=values.pop("flavor", None))
    row.update(owner_kind=values.pop("owner_kind"), owner_name=values.pop("owner_name"))
    row.update(gpu_resource=values.pop("gpu_resource", "nvidia.com/gpu"))
    row.update(gpus_requested=values.pop("gpus"), pod_count=values.pop("pods"))
    row.update(state=values.pop("state"), created_ts=values.pop("created_ts"))
    row.update(admitted_ts=values.pop("admitted_ts", None))
    row.update(finished_ts=values.pop("finished_ts", None), evictions=values.pop("evictions", 0))
    assert not values
    return row


# 2026-11-16T00:00:00Z = 1794787200. The CPU-only Job's Workload is not a row.
WORKLOADS = [
    _work(
        "team-a",
        "job-train-a-3f2c1",
        "9d0e1f2a-0001-4b5c-8d7e-00000000a001",
        queue="team-a-cq",
        flavor="a100-80gb",
        owner_kind="Job",
        owner_name="train-a",
        gpus=8.0,  # 4 pods × 2
        pods=4,
        state="admitted",
        created_ts=1794790800,  # 01:00:00
        admitted_ts=1794790831,  # 01:00:31
    ),
    _work(
        "team-a",
        "jobset-llm-pretrain-9a1b2",
        "9d0e1f2a-0002-4b5c-8d7e-00000000a002",
        queue="team-a-cq",  # not admitted: its LocalQueue "train"'s ClusterQueue
        owner_kind="JobSet",
        owner_name="llm-pretrain",
        gpus=24.0,  # driver 1 × 0 + workers 3 × 8
        pods=4,
        state="pending",
        created_ts=1794794400,  # 02:00
    ),
    _work(
        "team-b",
        "infer-group",
        "9d0e1f2a-0005-4b5c-8d7e-00000000a005",
        queue="team-b-cq",
        flavor="a100-80gb",
        owner_kind="PodGroup",
        owner_name="infer-group",
        gpus=2.0,
        pods=2,
        state="admitted",
        created_ts=1794801600,  # 04:00
        admitted_ts=1794801610,
    ),
    _work(
        "team-b",
        "job-eval-b-5e4f1",
        "9d0e1f2a-0004-4b5c-8d7e-00000000a004",
        queue="team-b-cq",
        owner_kind="Job",
        owner_name="eval-b",
        gpus=4.0,
        pods=1,
        state="evicted",
        created_ts=1794789000,  # 00:30
        evictions=2,
    ),
    _work(
        "team-b",
        "job-finetune-b-77d0e",
        "9d0e1f2a-0003-4b5c-8d7e-00000000a003",
        queue="team-b-cq",
        flavor="h100-mig",
        owner_kind="Job",
        owner_name="finetune-b",
        gpu_resource="nvidia.com/mig-3g.40gb",
        gpus=2.0,
        pods=2,
        state="finished",
        created_ts=1794772800,  # 2026-11-15T20:00
        admitted_ts=1794773100,  # 20:05
        finished_ts=1794785400,  # 23:30
    ),
]


@pytest.mark.parametrize("version", VERSIONS)
def test_cluster_queues_give_one_row_per_flavor_and_gpu_resource(version: str) -> None:
    assert _parsed(version).queue_flavors == QUOTAS


@pytest.mark.parametrize("version", VERSIONS)
def test_workloads_asking_for_gpus_are_rows(version: str) -> None:
    assert _parsed(version).workloads == WORKLOADS


@pytest.mark.parametrize("version", VERSIONS)
def test_indices_for_pods_queues_and_gangs(version: str) -> None:
    parsed = _parsed(version)
    assert parsed.local_queues == {
        ("team-a", "train"): "team-a-cq",
        ("team-b", "default"): "team-b-cq",
        ("batch", "cpu"): "cpu-only-cq",
    }
    assert parsed.owners[("team-a", "JobSet", "llm-pretrain")] == GangFacts("team-a-cq", 4)
    assert parsed.owners[("batch", "Job", "etl-1")] == GangFacts("cpu-only-cq", 10)
    assert parsed.owners[("team-b", "PodGroup", "infer-group")] == GangFacts("team-b-cq", 2)
    assert parsed.groups[("team-b", "infer-group")] == GangFacts("team-b-cq", 2)
    assert len(parsed.owners) == 6


def test_cohort_is_read_under_either_versions_name() -> None:
    assert cohort_of({"spec": {"cohortName": "research"}}) == "research"
    assert cohort_of({"spec": {"cohort": "research"}}) == "research"
    assert cohort_of({"spec": {"cohort": ""}}) is None


def test_quantities_are_kubernetes_quantities() -> None:
    queue = {
        "metadata": {"name": "q"},
        "spec": {
            "resourceGroups": [
                {
                    "flavors": [
                        {
                            "name": "f",
                            "resources": [
                                {"name": "nvidia.com/gpu", "nominalQuota": "2k"},
                                {"name": "nvidia.com/gpu.shared", "nominalQuota": 16},
                                {"name": "cpu", "nominalQuota": "500m"},
                            ],
                        }
                    ]
                }
            ]
        },
    }
    rows = parse_cluster_queue(queue, {})
    assert [(r["gpu_resource"], r["nominal_gpus"]) for r in rows] == [
        ("nvidia.com/gpu", 2000.0),
        ("nvidia.com/gpu.shared", 16.0),
    ]


def test_an_unreadable_quota_names_the_cluster_queue() -> None:
    bad = {
        "metadata": {"name": "broken-cq"},
        "spec": {
            "resourceGroups": [
                {
                    "flavors": [
                        {
                            "name": "f",
                            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "1.5"}],
                        }
                    ]
                }
            ]
        },
    }
    with pytest.raises(ValueError, match=r"^ClusterQueue broken-cq: invalid GPU quantity '1\.5'"):
        parse_kueue([bad], [], [], [])


def _conditions(*pairs: tuple[str, str, str]) -> dict[str, Any]:
    conditions = [{"type": t, "status": s, "lastTransitionTime": ts} for t, s, ts in pairs]
    return {"status": {"conditions": conditions}}


def test_states_from_conditions() -> None:
    reserved_only = _conditions(("QuotaReserved", "True", "2026-11-16T00:00:00Z"))
    assert workload_state(reserved_only) == ("pending", None, None)  # admission checks still run
    readmitted = _conditions(
        ("Evicted", "True", "2026-11-16T00:00:00Z"), ("Admitted", "True", "2026-11-16T00:10:00Z")
    )
    assert workload_state(readmitted) == ("admitted", 1794787800, None)
    failed = _conditions(
        ("Admitted", "True", "2026-11-16T00:00:00Z"), ("Finished", "True", "2026-11-16T01:00:00Z")
    )
    assert workload_state(failed) == ("finished", 1794787200, 1794790800)
    assert workload_state({}) == ("pending", None, None)


def test_a_workload_with_several_gpu_pod_sets_sums_them() -> None:
    def pod_set(name: str, count: int, gpus: str) -> dict[str, Any]:
        container = {"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
        return {"name": name, "count": count, "template": {"spec": {"containers": [container]}}}

    workload = {
        "metadata": {"namespace": "ns", "name": "w", "uid": "u"},
        "spec": {
            "queueName": "lq",
            "podSets": [pod_set("leader", 1, "1"), pod_set("workers", 3, "4")],
        },
    }
    row = parse_workload(workload, {("ns", "lq"): "cq"})
    assert row is not None
    assert (row["gpus_requested"], row["pod_count"], row["queue"]) == (13.0, 4, "cq")
    assert row["owner_kind"] is None and row["state"] == "pending"
    assert parse_workload({"spec": {"podSets": [{"count": 2}]}}, {}) is None
