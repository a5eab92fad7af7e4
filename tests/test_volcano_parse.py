"""Volcano's queues and PodGroups parsed from recorded payloads (tests/fixtures/volcano)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.collectors.sched_state import GangFacts
from gpuwatch.collectors.volcano_parse import parse_queue, parse_volcano

FIXTURES = Path(__file__).parent / "fixtures" / "volcano" / "v1beta1"


def _items(resource: str) -> list[dict[str, Any]]:
    body = json.loads((FIXTURES / f"{resource}.json").read_text())
    assert body["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    return list(body["items"])


def _quota(queue: str, cohort: str, resource: str, nominal: float, borrowing: float | None) -> Any:
    return {
        "kind": "volcano",
        "queue": queue,
        "cohort": cohort,
        "flavor": "",
        "gpu_resource": resource,
        "gpu_model": None,
        "nominal_gpus": nominal,
        "borrowing_limit_gpus": borrowing,
        "lending_limit_gpus": None,
        "first_seen_ts": 1_793_491_200,  # every Queue of the fixture: 2026-11-01T00:00:00Z
    }


def test_queues_with_gpu_capability_or_deserved_are_rows() -> None:
    parsed = parse_volcano(_items("queues"), [])
    # "default" has neither: no GPU quota, no row
    assert parsed.queue_flavors == [
        _quota("inference", "root", "nvidia.com/gpu", 4.0, 0.0),  # capability only: a hard cap
        _quota("mig-pool", "research", "nvidia.com/mig-1g.10gb", 7.0, None),  # deserved only
        _quota("research", "root", "nvidia.com/gpu", 8.0, 8.0),  # deserved 8, capability 16
    ]


def _group(name: str, **values: Any) -> dict[str, Any]:
    row = {"kind": "volcano", "namespace": "research", "name": name, "uid": values.pop("uid")}
    row.update(queue=values.pop("queue"), flavor=None)
    row.update(owner_kind=values.pop("owner_kind"), owner_name=values.pop("owner_name"))
    row.update(gpu_resource=values.pop("gpu_resource", "nvidia.com/gpu"))
    row.update(gpus_requested=values.pop("gpus"), pod_count=values.pop("pods"))
    row.update(state=values.pop("state"), created_ts=values.pop("created_ts"))
    row.update(admitted_ts=values.pop("admitted_ts", None), finished_ts=None, evictions=0)
    assert not values
    return row


def test_pod_groups_asking_for_gpus_are_rows() -> None:
    parsed = parse_volcano([], _items("podgroups"))
    # 2026-11-16T00:00:00Z = 1794787200; etl-cpu-pg asks for no GPU: not a row
    assert parsed.workloads == [
        _group(
            "podgroup-2f8e4c1a-7b3d-4e5f-9a6b-0c1d2e3f4a5b",
            uid="4a5b6c7d-0002-4e8f-9a0b-00000000d002",
            queue="default",  # spec.queue "" is Volcano's default queue
            owner_kind="ReplicaSet",
            owner_name="notebook-7d9f8b6c5",
            gpus=1.0,
            pods=1,
            state="pending",  # Inqueue
            created_ts=1794812400,  # 07:00
        ),
        _group(
            "sweep-done-pg",
            uid="4a5b6c7d-0004-4e8f-9a0b-00000000d004",
            queue="mig-pool",
            owner_kind="PodGroup",
            owner_name="sweep-done-pg",
            gpu_resource="nvidia.com/mig-1g.10gb",
            gpus=2.0,
            pods=2,
            state="finished",
            created_ts=1794736800,  # 2026-11-15T10:00
            admitted_ts=1794736860,
        ),
        _group(
            "train-vc-6c1d2e3f",
            uid="4a5b6c7d-0001-4e8f-9a0b-00000000d001",
            queue="research",
            owner_kind="Job",
            owner_name="train-vc",
            gpus=8.0,
            pods=4,
            state="admitted",  # Running
            created_ts=1794808800,  # 06:00
            admitted_ts=1794808820,
        ),
    ]
    assert parsed.pod_groups == {
        ("research", "train-vc-6c1d2e3f"): GangFacts("research", 4),
        ("research", "podgroup-2f8e4c1a-7b3d-4e5f-9a6b-0c1d2e3f4a5b"): GangFacts("default", 1),
        ("inference", "etl-cpu-pg"): GangFacts("inference", 2),
        ("research", "sweep-done-pg"): GangFacts("mig-pool", 2),
    }


def test_an_unreadable_queue_is_named() -> None:
    bad = {"metadata": {"name": "q"}, "spec": {"capability": {"nvidia.com/gpu": "-1"}}}
    with pytest.raises(ValueError, match=r"^Queue q: invalid GPU quantity '-1'"):
        parse_volcano([bad], [])
    assert parse_queue({"metadata": {"name": "q"}, "spec": {"capability": {"cpu": "8"}}}) == []
