"""The pure Kubernetes parsers: GPU requests, owners, teams, node facts, the snapshot."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.collectors.kube_nodes import (
    SPOT_LABELS,
    capacity_type,
    node_has_gpus,
    parse_node,
    parse_quantity,
)
from gpuwatch.collectors.kube_parse import (
    KubeSnapshot,
    build_snapshot,
    epoch_seconds,
    owner_index,
    parse_pod,
    pod_gpu_request,
    pod_gpu_requests,
    team_of,
    top_owner,
)

FIXTURES = Path(__file__).parent / "fixtures" / "kube"


def load(resource: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads((FIXTURES / f"{resource}.json").read_text())["items"]
    return items


def container(limits: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {"limits": {"cpu": "1", **(limits or {})}}
    if "requests" in extra:
        resources["requests"] = extra.pop("requests")
    return {"name": "c", "image": "busybox", "resources": resources, **extra}


def pod(
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]] | None = None,
    owner: tuple[str, str, str] | None = None,
    labels: dict[str, str] | None = None,
    name: str = "p-0",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "labels": labels or {}}
    if owner is not None:
        kind, owner_name, api = owner
        meta["ownerReferences"] = [
            {"apiVersion": api, "kind": kind, "name": owner_name, "uid": "u", "controller": True}
        ]
    spec: dict[str, Any] = {"containers": containers}
    if init is not None:
        spec["initContainers"] = init
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running"}}


# -- quantities ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(2, 2), ("2", 2), (" 3 ", 3), ("0", 0), ("1k", 1000), ("1Ki", 1024), ("2e0", 2), ("1000m", 1)],
)
def test_parse_quantity_reads_whole_gpu_counts(value: object, expected: int) -> None:
    assert parse_quantity(value) == expected


@pytest.mark.parametrize("value", ["abc", "0.5", "500m", "-1", "", "2 GPUs", None, 1.5, True])
def test_parse_quantity_rejects_junk_naming_the_value(value: object) -> None:
    with pytest.raises(ValueError, match="invalid GPU quantity") as info:
        parse_quantity(value)
    assert repr(value) in str(info.value)


# -- GPU requests ----------------------------------------------------------------------------


def test_containers_are_summed() -> None:
    p = pod([container({"nvidia.com/gpu": "1"}), container({"nvidia.com/gpu": 2})])
    assert pod_gpu_request(p) == ("nvidia.com/gpu", 3)


def test_limits_win_over_requests_and_requests_stand_in_for_missing_limits() -> None:
    both = container({"nvidia.com/gpu": "2"}, requests={"nvidia.com/gpu": "1"})
    only_requests = container(requests={"nvidia.com/gpu": "3"})
    assert pod_gpu_request(pod([both])) == ("nvidia.com/gpu", 2)
    assert pod_gpu_request(pod([only_requests])) == ("nvidia.com/gpu", 3)


def test_init_containers_count_by_their_max() -> None:
    main = [container({"nvidia.com/gpu": "2"})]
    big_init = [container({"nvidia.com/gpu": "4"}), container({"nvidia.com/gpu": "1"})]
    small_init = [container({"nvidia.com/gpu": "1"}), container({"nvidia.com/gpu": "1"})]
    assert pod_gpu_request(pod(main, init=big_init)) == ("nvidia.com/gpu", 4)
    assert pod_gpu_request(pod(main, init=small_init)) == ("nvidia.com/gpu", 2)
    assert pod_gpu_request(pod([container()], init=big_init)) == ("nvidia.com/gpu", 4)


def test_sidecar_init_containers_add_to_what_runs_after_them() -> None:
    sidecar = container({"nvidia.com/gpu": "1"}, restartPolicy="Always")
    later_init = container({"nvidia.com/gpu": "2"})
    main = [container({"nvidia.com/gpu": "1"})]
    # steady state: 1 + sidecar 1 = 2; during the later init container: 2 + sidecar 1 = 3
    assert pod_gpu_request(pod(main, init=[sidecar, later_init])) == ("nvidia.com/gpu", 3)
    # an init container before the sidecar does not overlap it
    assert pod_gpu_request(pod(main, init=[later_init, sidecar])) == ("nvidia.com/gpu", 2)


def test_mig_and_shared_resources_are_gpus() -> None:
    mig = pod([container({"nvidia.com/mig-1g.10gb": "2"})])
    shared = pod([container({"nvidia.com/gpu.shared": "1"})])
    assert pod_gpu_request(mig) == ("nvidia.com/mig-1g.10gb", 2)
    assert pod_gpu_request(shared) == ("nvidia.com/gpu.shared", 1)


def test_several_gpu_resources_report_the_largest() -> None:
    p = pod(
        [container({"nvidia.com/mig-1g.10gb": "1"}), container({"nvidia.com/mig-3g.40gb": "2"})]
    )
    assert pod_gpu_requests(p) == {"nvidia.com/mig-1g.10gb": 1, "nvidia.com/mig-3g.40gb": 2}
    assert pod_gpu_request(p) == ("nvidia.com/mig-3g.40gb", 2)


@pytest.mark.parametrize(
    "limits",
    [{}, {"nvidia.com/gpu": "0"}, {"amd.com/gpu": "1"}, {"nvidia.com/gpu-count": "1"}],
)
def test_pods_without_nvidia_gpus_request_none(limits: dict[str, str]) -> None:
    assert pod_gpu_request(pod([container(limits)])) == (None, 0)


def test_a_junk_gpu_quantity_raises() -> None:
    with pytest.raises(ValueError, match="'two'"):
        pod_gpu_request(pod([container({"nvidia.com/gpu": "two"})]))


# -- teams -----------------------------------------------------------------------------------


def test_team_from_pod_label_then_namespace_label_then_unassigned() -> None:
    assert team_of({"team": "vision"}, {"team": "research"}, "team") == "vision"
    assert team_of({"app": "x"}, {"team": "research"}, "team") == "research"
    assert team_of({"team": ""}, {"team": "research"}, "team") == "research"
    assert team_of({}, {}, "team") == "unassigned"
    assert team_of(None, None, "team") == "unassigned"
    assert team_of({"team": "vision", "squad": "a"}, {"squad": "b"}, "squad") == "a"


# -- owners ----------------------------------------------------------------------------------


RS, JOB = "apps/v1", "batch/v1"


@pytest.mark.parametrize(
    ("namespace", "owner", "labels", "expected"),
    [
        ("ml-training", ("ReplicaSet", "trainer-7d9f8b6c5d", RS), {}, ("Deployment", "trainer")),
        ("inference", ("ReplicaSet", "orphan-rs", RS), {}, ("ReplicaSet", "orphan-rs")),
        ("batch", ("Job", "nightly-embed-29380440", JOB), {}, ("CronJob", "nightly-embed")),
        ("batch", ("Job", "backfill-2026", JOB), {}, ("Job", "backfill-2026")),
        ("ns", ("StatefulSet", "dist-train", RS), {}, ("StatefulSet", "dist-train")),
        ("ns", ("DaemonSet", "dcgm-exporter", RS), {}, ("DaemonSet", "dcgm-exporter")),
        ("ns", ("RayCluster", "ray-head", "ray.io/v1"), {}, ("RayCluster", "ray-head")),
        ("ns", None, {}, ("Pod", "p-0")),
        # the same ReplicaSet name in another namespace is another ReplicaSet
        ("other", ("ReplicaSet", "orphan-rs", RS), {}, ("ReplicaSet", "orphan-rs")),
        # a ReplicaSet gone from the API: the Deployment controller's naming tells its owner
        (
            "ns",
            ("ReplicaSet", "web-6b8d9c7f5", RS),
            {"pod-template-hash": "6b8d9c7f5"},
            ("Deployment", "web"),
        ),
        ("ns", ("ReplicaSet", "web-6b8d9c7f5", RS), {}, ("ReplicaSet", "web-6b8d9c7f5")),
        ("ns", ("Job", "gone", JOB), {}, ("Job", "gone")),
    ],
)
def test_top_owner_follows_controllers(
    namespace: str,
    owner: tuple[str, str, str] | None,
    labels: dict[str, str],
    expected: tuple[str, str],
) -> None:
    replicasets, jobs = owner_index(load("replicasets")), owner_index(load("jobs"))
    p = pod([container()], owner=owner, labels=labels)
    p["metadata"]["namespace"] = namespace
    assert top_owner(p, replicasets, jobs) == expected


def test_only_the_controller_owner_counts() -> None:
    p = pod([container()])
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "u", "controller": False},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "v"},
    ]
    assert top_owner(p, {}, {}) == ("Pod", "p-0")


def test_owners_of_another_api_group_are_not_looked_up() -> None:
    p = pod([container()], owner=("Job", "train", "batch.volcano.sh/v1alpha1"))
    jobs = {("ns", "train"): {"kind": "CronJob", "name": "wrong"}}
    assert top_owner(p, {}, jobs) == ("Job", "train")


# -- nodes -----------------------------------------------------------------------------------


def node(labels: dict[str, str], allocatable: dict[str, str] | None = None, **status: Any) -> dict:
    return {
        "metadata": {"name": "n-1", "labels": labels},
        "status": {"allocatable": allocatable or {}, **status},
    }


H100_LABELS = {  # as GPU Feature Discovery labels an 8 × H100 node
    "nvidia.com/gpu.count": "8",
    "nvidia.com/gpu.deploy.dcgm-exporter": "true",
    "nvidia.com/gpu.family": "hopper",
    "nvidia.com/gpu.machine": "PowerEdge-XE9680",
    "nvidia.com/gpu.memory": "81559",
    "nvidia.com/gpu.mode": "compute",
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.replicas": "1",
    "nvidia.com/mig.capable": "true",
    "nvidia.com/gfd.timestamp": "1763280000",
    "node.kubernetes.io/instance-type": "XE9680",
    "topology.kubernetes.io/zone": "dc1-a",
    "kubernetes.io/hostname": "n-1",
    "team": "infra",
}


def test_parse_node_reads_gfd_facts() -> None:
    row = parse_node(node(H100_LABELS, {"nvidia.com/gpu": "8"}))
    kept = {
        k: v
        for k, v in H100_LABELS.items()
        if k not in ("kubernetes.io/hostname", "team", "nvidia.com/gfd.timestamp")
    }
    assert row == {
        "name": "n-1",
        "gpu_model": "NVIDIA-H100-80GB-HBM3",
        "gpu_count": 8,
        "gpu_memory_mib": 81559,
        "capacity_type": "on_demand",
        "instance_type": "XE9680",
        "mig_capable": True,
        "mig_strategy": None,
        "mig_config": None,
        "timeslice_replicas": 1,
        "gpu_sharing": "device-plugin",
        "labels": kept,
        "provider": None,  # an on-premises PowerEdge: no providerID, no cloud's labels
    }


def test_parse_node_reads_the_provider_from_the_provider_id() -> None:
    aws = {**node(H100_LABELS), "spec": {"providerID": "aws:///us-east-1a/i-0db5430f9225fc81e"}}
    assert parse_node(aws)["provider"] == "aws"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("karpenter.sh/capacity-type", "spot"),
        ("eks.amazonaws.com/capacityType", "SPOT"),
        ("cloud.google.com/gke-spot", "true"),
        ("cloud.google.com/gke-preemptible", "true"),
        ("kubernetes.azure.com/scalesetpriority", "spot"),
    ],
)
def test_every_spot_label_means_spot(key: str, value: str) -> None:
    row = parse_node(node({key: value}, {"nvidia.com/gpu": "1"}))
    assert row["capacity_type"] == "spot"
    assert row["labels"] == {key: value}  # capacity-type labels are kept


@pytest.mark.parametrize(
    "labels",
    [
        {},
        {"karpenter.sh/capacity-type": "on-demand"},
        {"eks.amazonaws.com/capacityType": "ON_DEMAND"},
        {"cloud.google.com/gke-spot": "false"},
        {"kubernetes.azure.com/scalesetpriority": "regular"},
    ],
)
def test_other_capacity_labels_mean_on_demand(labels: dict[str, str]) -> None:
    assert capacity_type(labels) == "on_demand"


def test_spot_label_table_covers_the_providers() -> None:
    assert set(SPOT_LABELS) == {
        "karpenter.sh/capacity-type",
        "eks.amazonaws.com/capacityType",
        "cloud.google.com/gke-spot",
        "cloud.google.com/gke-preemptible",
        "kubernetes.azure.com/scalesetpriority",
    }


def test_without_gfd_count_and_instance_label_the_fallbacks_apply() -> None:
    labels = {"beta.kubernetes.io/instance-type": "g2-standard-8"}
    row = parse_node(node(labels, {"nvidia.com/gpu": "2"}, capacity={"nvidia.com/gpu": "4"}))
    assert (row["gpu_count"], row["instance_type"], row["gpu_model"]) == (2, "g2-standard-8", None)
    only_capacity = node({}, {}, capacity={"nvidia.com/gpu": "4"})
    assert parse_node(only_capacity)["gpu_count"] == 4
    assert parse_node(node({}))["gpu_count"] == 0


@pytest.mark.parametrize(("replicas", "expected"), [("4", 4), ("1", 1), ("0", 1), ("x", 1)])
def test_timeslice_replicas(replicas: str, expected: int) -> None:
    row = parse_node(node({"nvidia.com/gpu.replicas": replicas, "nvidia.com/gpu.count": "1"}))
    assert row["timeslice_replicas"] == expected


def test_time_sliced_product_loses_the_shared_suffix() -> None:
    labels = {"nvidia.com/gpu.product": "Tesla-T4-SHARED", "nvidia.com/gpu.replicas": "4"}
    assert parse_node(node(labels))["gpu_model"] == "Tesla-T4"


@pytest.mark.parametrize(
    ("product", "count", "gpus"),
    [
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "56", 8),
        ("NVIDIA-A100-SXM4-80GB-MIG-3g.40gb", "16", 8),
        ("NVIDIA-H100-80GB-HBM3-MIG-2g.20gb", "24", 8),
        ("NVIDIA-A30-MIG-2g.12gb", "4", 2),
    ],
)
def test_mig_single_strategy_counts_physical_gpus(product: str, count: str, gpus: int) -> None:
    labels = {
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": count,
        "nvidia.com/gpu.memory": "4864",
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.config": "all-balanced",
    }
    row = parse_node(node(labels))
    assert row["gpu_count"] == gpus
    assert row["gpu_model"] == product.split("-MIG-", maxsplit=1)[0]
    assert row["gpu_memory_mib"] is None  # GFD reports one MIG device's memory there
    assert (row["mig_strategy"], row["mig_config"], row["mig_capable"]) == (
        "single",
        "all-balanced",
        True,
    )


@pytest.mark.parametrize(
    ("labels", "sharing"),
    [
        ({"nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "4"}, "mps"),
        (
            {"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4"},
            ("time-slice"),
        ),
        ({"nvidia.com/gpu.replicas": "2"}, "time-slice"),  # GFD without the strategy label
        (
            {"nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.replicas": "1"},
            ("device-plugin"),
        ),
        ({}, "device-plugin"),
    ],
)
def test_gpu_sharing_from_gfd_labels(labels: dict[str, str], sharing: str) -> None:
    assert parse_node(node({"nvidia.com/gpu.count": "2", **labels}))["gpu_sharing"] == sharing


def test_mps_with_renamed_resource_counts_physical_gpus() -> None:
    labels = {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-SHARED",
        "nvidia.com/gpu.sharing-strategy": "mps",
        "nvidia.com/gpu.replicas": "10",
    }
    row = parse_node(node(labels, {"nvidia.com/gpu.shared": "40"}))
    assert (row["gpu_count"], row["gpu_model"], row["gpu_sharing"]) == (
        4,
        "NVIDIA-A100-SXM4-40GB",
        "mps",
    )
    assert row["timeslice_replicas"] == 10
    assert node_has_gpus(node({}, {"nvidia.com/gpu.shared": "40"}))


def test_time_sliced_allocatable_is_not_taken_for_gpus() -> None:
    labels = {"nvidia.com/gpu.replicas": "4"}
    assert parse_node(node(labels, {"nvidia.com/gpu": "8"}))["gpu_count"] == 2
    with_count = {**labels, "nvidia.com/gpu.count": "2"}  # GFD counts physical GPUs
    assert parse_node(node(with_count, {"nvidia.com/gpu": "8"}))["gpu_count"] == 2


def test_mixed_mig_strategy_counts_physical_gpus() -> None:
    mixed = {"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    offered = {
        "nvidia.com/gpu": "2",  # two GPUs without MIG
        "nvidia.com/mig-1g.10gb": "7",  # one GPU as 7 × 1g
        "nvidia.com/mig-3g.40gb": "2",  # one GPU as 2 × 3g (6 of 7 slices)
    }
    assert parse_node(node(mixed, offered))["gpu_count"] == 4
    # GFD's count under the mixed strategy is every physical GPU, MIG-enabled or not
    assert parse_node(node({**mixed, "nvidia.com/gpu.count": "4"}, offered))["gpu_count"] == 4
    only_mig = node(mixed, {"nvidia.com/mig-2g.20gb": "3"})
    assert parse_node(only_mig)["gpu_count"] == 1
    assert parse_node(only_mig)["gpu_sharing"] == "device-plugin"


def test_single_mig_strategy_without_gfd_count() -> None:
    labels = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"}
    assert parse_node(node(labels, {"nvidia.com/gpu": "56"}))["gpu_count"] == 8


def test_hand_edited_number_labels_are_ignored() -> None:
    row = parse_node(node({"nvidia.com/gpu.memory": "lots", "nvidia.com/gpu.count": "many"}))
    assert (row["gpu_memory_mib"], row["gpu_count"]) == (None, 0)


def test_node_has_gpus() -> None:
    assert node_has_gpus(node({"nvidia.com/gpu.present": "true"}))
    assert node_has_gpus(node({}, {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "7"}))
    assert node_has_gpus(node({}, {}, capacity={"nvidia.com/gpu.shared": "16"}))
    assert not node_has_gpus(node({"karpenter.sh/capacity-type": "spot"}, {"cpu": "8"}))
    assert not node_has_gpus(node({}, {"nvidia.com/gpu": "0"}))


# -- pods ------------------------------------------------------------------------------------


def test_epoch_seconds() -> None:
    assert epoch_seconds("2026-11-16T00:00:00Z") == 1794787200
    assert epoch_seconds("2026-11-16T00:00:01.750000Z") == 1794787201
    assert epoch_seconds("2026-11-16T01:00:00+01:00") == 1794787200
    assert epoch_seconds(None) is None
    with pytest.raises(ValueError, match="RFC 3339"):
        epoch_seconds("yesterday")


def _finished_pod(phase: str) -> dict[str, Any]:
    p = pod([container({"nvidia.com/gpu": "1"}), container()], labels={"team": "a"})
    p["metadata"].update(uid="uid-1", creationTimestamp="2026-11-16T00:00:00Z")
    p["spec"]["nodeName"] = "n-1"
    terminated = [
        {"state": {"terminated": {"exitCode": 0, "finishedAt": "2026-11-16T02:00:00Z"}}},
        {"state": {"terminated": {"exitCode": 0, "finishedAt": "2026-11-16T02:30:00Z"}}},
    ]
    p["status"] = {
        "phase": phase,
        "startTime": "2026-11-16T00:00:05Z",
        "containerStatuses": terminated,
    }
    return p


def test_parse_pod_row() -> None:
    row = parse_pod(_finished_pod("Succeeded"), ("Job", "train"), "a")
    assert row == {
        "namespace": "ns",
        "name": "p-0",
        "uid": "uid-1",
        "node_name": "n-1",
        "phase": "Succeeded",
        "workload_kind": "Job",
        "workload_name": "train",
        "team": "a",
        "gpu_resource": "nvidia.com/gpu",
        "gpu_count": 1,
        "allocation": None,
        "labels": {"team": "a"},
        "created_ts": 1794787200,
        "started_ts": 1794787205,
        "finished_ts": 1794796200,  # the latest container to finish
        **{"queue": None, "gang_kind": None, "gang_name": None, "gang_size": None},
    }


def test_finished_ts_only_for_finished_phases() -> None:
    assert parse_pod(_finished_pod("Failed"), ("Pod", "p-0"), "a")["finished_ts"] == 1794796200
    # a running pod whose container restarted carries an old terminated state: not finished
    assert parse_pod(_finished_pod("Running"), ("Pod", "p-0"), "a")["finished_ts"] is None


def test_pending_pod_has_no_node_and_no_start() -> None:
    p = pod([container({"nvidia.com/gpu": "2"})])
    p["status"] = {"phase": "Pending"}
    row = parse_pod(p, ("Pod", "p-0"), "unassigned")
    assert (row["phase"], row["node_name"], row["started_ts"], row["gpu_count"]) == (
        "Pending",
        None,
        None,
        2,
    )


# -- the snapshot ----------------------------------------------------------------------------


def fixture_snapshot(team_label: str = "team") -> KubeSnapshot:
    return build_snapshot(
        load("pods"),
        load("nodes"),
        load("namespaces"),
        load("replicasets"),
        load("jobs"),
        team_label,
        1794830400,
    )


def test_snapshot_gpu_pods() -> None:
    snap = fixture_snapshot()
    got = {
        f"{p['namespace']}/{p['name']}": (
            f"{p['phase']} {p['workload_kind']}/{p['workload_name']} team={p['team']} "
            f"{p['gpu_count']} x {p['gpu_resource']} on {p['node_name']}"
        )
        for p in snap.gpu_pods
    }
    assert got == {
        "batch/backfill-2026-8zq9t": (
            "Failed Job/backfill-2026 team=search 2 x nvidia.com/gpu on karpenter-a10g-spot"
        ),
        "batch/nightly-embed-29380440-h4k2p": (
            "Succeeded CronJob/nightly-embed team=unassigned 1 x nvidia.com/gpu "
            "on karpenter-a10g-spot"
        ),
        "inference/llm-server-5f6d7c8b9-abcde": (
            "Running Deployment/llm-server team=platform 1 x nvidia.com/mig-3g.40gb "
            "on gpu-a100-spot"
        ),
        "inference/orphan-rs-q8w7e": (
            "Running ReplicaSet/orphan-rs team=platform 1 x nvidia.com/gpu on aks-a10-spot"
        ),
        "ml-training/dist-train-0": (
            "Running StatefulSet/dist-train team=research 8 x nvidia.com/gpu on gpu-h100-0"
        ),
        "ml-training/ghost-trainer-6b8d9c7f5-zt6wq": (
            "Running Deployment/ghost-trainer team=research 1 x nvidia.com/gpu on gke-l4-spot"
        ),
        "ml-training/sweep-lr-p2m8d": (
            "Pending Job/sweep-lr team=research 2 x nvidia.com/gpu on None"
        ),
        "ml-training/trainer-7d9f8b6c5d-x2x7k": (
            "Running Deployment/trainer team=vision 8 x nvidia.com/gpu on gpu-h100-0"
        ),
        "notebooks/jupyter-alice": (
            "Running Pod/jupyter-alice team=data-science 1 x nvidia.com/gpu.shared "
            "on gke-t4-preemptible"
        ),
    }
    assert list(got) == sorted(got)  # ordered by namespace, then name
    assert snap.taken_ts == 1794830400


def test_snapshot_pods_without_gpus() -> None:
    snap = fixture_snapshot()
    assert snap.non_gpu_pods == {
        ("gpu-operator", "nvidia-dcgm-exporter-7k2lp"),
        ("gpu-operator", "nvidia-dcgm-exporter-q9m4x"),
        ("kube-system", "coredns-6f8b9c7d45-8vw2n"),
        ("kube-system", "gpu-zero-probe"),
    }
    assert snap.pod_nodes["nvidia-dcgm-exporter-7k2lp"] == "gpu-h100-0"
    assert snap.pod_nodes["nvidia-dcgm-exporter-q9m4x"] == "gpu-a100-spot"
    assert "sweep-lr-p2m8d" not in snap.pod_nodes  # pending: no node yet
    assert len(snap.pod_nodes) == 12


def test_snapshot_nodes_and_namespaces() -> None:
    snap = fixture_snapshot()
    assert {
        n["name"]: (n["capacity_type"], n["gpu_model"], n["gpu_count"]) for n in snap.nodes
    } == {
        "aks-a10-spot": ("spot", None, 2),
        "gke-l4-spot": ("spot", "NVIDIA-L4", 1),
        "gke-t4-preemptible": ("spot", "Tesla-T4", 1),
        "gpu-a100-mig-single": ("on_demand", "NVIDIA-A100-SXM4-40GB", 8),
        "gpu-a100-spot": ("spot", "NVIDIA-A100-SXM4-80GB", 8),
        "gpu-h100-0": ("on_demand", "NVIDIA-H100-80GB-HBM3", 8),
        "karpenter-a10g-spot": ("spot", "NVIDIA-A10G", 4),
    }  # the CPU node is left out
    assert {ns["name"]: ns["team"] for ns in snap.namespaces} == {
        "batch": None,
        "gpu-operator": None,
        "inference": "platform",
        "kube-system": None,
        "ml-training": "research",
        "notebooks": "data-science",
    }


def test_snapshot_team_label_is_configurable() -> None:
    snap = fixture_snapshot(team_label="user")
    teams = {p["name"]: p["team"] for p in snap.gpu_pods}
    assert teams["jupyter-alice"] == "alice"
    assert set(teams.values()) == {"alice", "unassigned"}


def test_snapshot_keeps_a_node_that_hosts_a_gpu_pod() -> None:
    gpu_pod = pod([container({"nvidia.com/gpu": "1"})])
    gpu_pod["spec"]["nodeName"] = "bare-metal-7"
    bare = {"metadata": {"name": "bare-metal-7", "labels": {}}, "status": {}}
    cpu = {"metadata": {"name": "cpu-1", "labels": {}}, "status": {}}
    snap = build_snapshot([gpu_pod], [bare, cpu], [], [], [], "team", 0)
    assert [n["name"] for n in snap.nodes] == ["bare-metal-7"]


def test_snapshot_names_the_pod_with_a_junk_quantity() -> None:
    bad = pod([container({"nvidia.com/gpu": "lots"})], name="broken-0")
    with pytest.raises(ValueError, match=r"pod ns/broken-0: invalid GPU quantity 'lots'"):
        build_snapshot([bad], [], [], [], [], "team", 0)


def test_snapshot_is_frozen() -> None:
    snap = fixture_snapshot()
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.taken_ts = 0  # type: ignore[misc]
