"""An alert's subject links to its node, its GPU (by UUID), its namespace and its pod; a label
the store does not name exactly one thing by stays text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from gpuwatch.app.alert_links import Link, subject_links
from gpuwatch.app.data import Filters

UUID = "GPU-5f0c1a2b-0000-1111-2222-333344445555"


class FakeSnap:
    """What the links read of a snapshot: its units, its pods, and its memo."""

    def __init__(self) -> None:
        self.units = pd.DataFrame(
            [
                {"cluster": "east", "node": "n1", "gpu_id": 7, "gpu_uuid": UUID,
                 "mig_gi_id": -1, "mig_profile": None, "slot": 0, "timeslice_replicas": 1},
                {"cluster": "east", "node": "shared", "gpu_id": 8, "gpu_uuid": "GPU-b",
                 "mig_gi_id": 3, "mig_profile": "3g.40gb", "slot": 0, "timeslice_replicas": 1},
                {"cluster": "west", "node": "shared", "gpu_id": 9, "gpu_uuid": "GPU-c",
                 "mig_gi_id": -1, "mig_profile": None, "slot": 0, "timeslice_replicas": 1},
            ]
        )  # fmt: skip
        pod = {"cluster": "east", "namespace": "ml", "workload_kind": "Job", "workload": "train"}
        self.pods = pd.DataFrame(
            [
                pod | {"pod_id": 1, "pod": "train-0"},
                pod | {"pod_id": 2, "pod": "train-0"},  # the same name, recreated
                pod | {"pod_id": 3, "pod": "web-0", "workload_kind": "StatefulSet",
                       "workload": "web"},
                pod | {"pod_id": 4, "pod": "web-0", "cluster": "west", "workload": "other"},
            ]
        )  # fmt: skip

    def memo(self, key: Any, compute: Callable[[], Any], pin: bool = False) -> Any:
        return compute()


def _links(row: dict[str, Any]) -> dict[str, Link]:
    return subject_links(FakeSnap(), Filters(), row)  # type: ignore[arg-type]


def test_a_stored_subject_links_node_gpu_and_pod_by_id() -> None:
    links = _links({"cluster": "east", "node": "n1", "gpu_id": 7, "pod": "train-0", "pod_id": 2})
    assert links == {
        "node": Link("n1", "/node?name=n1&cluster=east"),
        "gpu_id": Link("GPU-5f0c1a2b", f"/gpu?uuid={UUID}"),
        "pod": Link("train-0", "/pod?name=train-0&cluster=east&namespace=ml"),
    }
    links = _links({"cluster": "west", "namespace": "ml"})  # a namespace's alert
    assert links == {"namespace": Link("ml", "/workloads?cluster=west&namespace=ml")}


def test_a_mig_instance_links_to_its_instance() -> None:
    links = _links({"cluster": "east", "node": "shared", "gpu_id": 8})
    assert links["gpu_id"] == Link("GPU-b MIG 3g.40gb", "/gpu?uuid=GPU-b&gi=3")


def test_prometheus_labels_link_only_what_one_thing_has() -> None:
    links = _links({"node": "n1", "namespace": "ml", "pod": "train-0", "gpu": "0"})
    assert links == {  # both train-0 pods ran on east; ml is a namespace on two clusters
        "node": Link("n1", "/node?name=n1&cluster=east"),
        "pod": Link("train-0", "/pod?name=train-0&cluster=east&namespace=ml"),
    }
    # "shared" is a node name on two clusters, web-0 a pod name on two: no guess
    assert _links({"node": "shared", "namespace": "ml", "pod": "web-0"}) == {}
    assert _links({"namespace": "batch"}) == {}  # no pod of the store ran there


def test_unknown_or_blank_subjects_stay_text() -> None:
    assert _links({"cluster": "east", "node": "", "gpu_id": 99, "pod": "x", "pod_id": 42}) == {}
    assert _links({"node": None, "namespace": "ml", "pod": None}) == {}
