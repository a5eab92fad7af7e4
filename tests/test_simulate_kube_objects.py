"""The simulated Kubernetes objects, read by the collector's own parsers and client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gpuwatch.collectors.dra_parse import DraState, parse_dra
from gpuwatch.collectors.kube import KubeSource
from gpuwatch.collectors.kube_parse import KubeSnapshot, build_snapshot
from gpuwatch.collectors.kueue_parse import parse_kueue
from gpuwatch.collectors.sched_state import SchedState
from gpuwatch.simulate.apiserver import kubeconfig_for
from gpuwatch.simulate.exposition import exporter_hostname
from gpuwatch.simulate.fleet import Fleet, build_fleet
from gpuwatch.simulate.generate import nodes_frame
from gpuwatch.simulate.kube_objects import JOB_TTL_S, RESOURCES, kube_objects
from gpuwatch.simulate.pods import pod_instances, pods_at, pods_frame
from gpuwatch.simulate.serve import LiveKubeApi

PROD, RESEARCH = "prod-us-east", "research-eu"
TS = int(datetime(2026, 11, 16, 15, tzinfo=UTC).timestamp())  # hpo-trial pods are Pending
POD_FIELDS = [
    "namespace",
    "uid",
    "node",
    "phase",
    "workload_kind",
    "workload_name",
    "team",
    "gpu_resource",
    "gpu_count",
    "created_ts",
    "started_ts",
    "finished_ts",
]


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return build_fleet(7)


def _snapshot(
    objects: dict[str, list[dict[str, Any]]],
    ts: int = TS,
    dra: DraState | None = None,
    sched: SchedState | None = None,
) -> KubeSnapshot:
    return build_snapshot(
        objects["pods"],
        objects["nodes"],
        objects["namespaces"],
        objects["replicasets"],
        objects["jobs"],
        "team",
        ts,
        dra,
        sched,
    )


def _expected_pods(frame: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """The simulated pods frame as the API's top owners name them: a Job without a CronJob is
    its own workload (``<name>-<suffix>``), as the contract defines workloads. Pods holding
    GPUs through ResourceClaims are left out: ``build_snapshot`` reads resource limits only."""
    out = {}
    for record in frame[frame["allocation"].isna()].to_dict("records"):
        if record["workload_kind"] == "Job":
            record["workload_name"] = record["owner_name"]
        row = {k: (None if pd.isna(v) else v) for k, v in record.items() if k != "labels"}
        out[row["pod"]] = {k: row[k] for k in POD_FIELDS}
    return out


def _parsed_pods(snap: KubeSnapshot) -> dict[str, dict[str, Any]]:
    return {
        pod["name"]: {**pod, "node": pod["node_name"]} | {"name": pod["name"]}
        for pod in snap.gpu_pods
    }


@pytest.mark.parametrize("cluster", [PROD, RESEARCH])
def test_live_pods_parse_to_the_simulated_pods_frame(fleet: Fleet, cluster: str) -> None:
    snap = _snapshot(kube_objects(fleet, TS, cluster))
    parsed = _parsed_pods(snap)
    frame = pods_at(fleet, TS)
    expected = _expected_pods(frame[frame["cluster"] == cluster])
    assert expected and set(expected) <= set(parsed)
    for name, row in expected.items():
        assert {k: parsed[name][k] for k in POD_FIELDS} == row, name
        pod = frame[frame["pod"] == name].iloc[0]
        assert parsed[name]["labels"] == dict(sorted(pod["labels"].items()))
    kinds = {row["workload_kind"] for row in expected.values()}
    assert {"Deployment", "StatefulSet", "Job", "Pod"} <= kinds


def test_pending_pods_have_no_node_and_still_request_gpus(fleet: Fleet) -> None:
    parsed = _parsed_pods(_snapshot(kube_objects(fleet, TS, PROD)))
    pending = [p for p in parsed.values() if p["phase"] == "Pending"]
    assert pending and all(p["node"] is None and p["gpu_count"] >= 1 for p in pending)
    assert {p["labels"]["app"] for p in pending} == {"hpo-trial", "asr-finetune"}


def test_recently_finished_job_pods_stay_listed(fleet: Fleet) -> None:
    parsed = _parsed_pods(_snapshot(kube_objects(fleet, TS, PROD)))
    finished = pods_frame(fleet, pod_instances(fleet, TS - JOB_TTL_S, TS + 1), TS + 1)
    finished = finished[(finished["cluster"] == PROD) & (finished["phase"] == "Succeeded")]
    jobs = finished[finished["workload_kind"].isin(["Job", "CronJob"])]
    assert not jobs.empty
    for name, row in _expected_pods(jobs).items():
        assert {k: parsed[name][k] for k in POD_FIELDS} == row, name
    others = set(finished.loc[~finished["workload_kind"].isin(["Job", "CronJob"]), "pod"])
    assert not others & set(parsed), "replaced Deployment/StatefulSet pods are deleted"
    assert {p["phase"] for p in parsed.values()} == {"Running", "Pending", "Succeeded"}


def test_cronjob_and_deployment_owner_chains(fleet: Fleet) -> None:
    ts = int(datetime(2026, 11, 16, 2, tzinfo=UTC).timestamp())  # nightly-embed is running
    objects = kube_objects(fleet, ts, PROD)
    parsed = _parsed_pods(_snapshot(objects, ts))
    embed = [p for p in parsed.values() if p["labels"].get("app") == "nightly-embed"]
    assert sum(p["phase"] == "Running" for p in embed) == 8
    assert sum(p["phase"] == "Succeeded" for p in embed) == 8  # yesterday's Job, kept
    assert {(p["workload_kind"], p["workload_name"]) for p in embed} == {
        ("CronJob", "nightly-embed")
    }
    serving = [p for p in parsed.values() if p["labels"].get("app") == "recsys-serving"]
    assert {(p["workload_kind"], p["workload_name"]) for p in serving} == {
        ("Deployment", "recsys-serving")
    }
    assert {"nightly-embed"} == {o["metadata"]["name"] for o in objects["cronjobs"]}


def test_the_exporter_daemonset_runs_on_every_gpu_node_without_gpus(fleet: Fleet) -> None:
    snap = _snapshot(kube_objects(fleet, TS, PROD))
    gpu_nodes = [n for n in fleet.nodes if n.cluster == PROD]
    exporters = {("gpu-operator", n.exporter_pod) for n in gpu_nodes}
    assert exporters <= snap.non_gpu_pods
    for node in gpu_nodes:
        assert snap.pod_nodes[node.exporter_pod] == node.name
        # a hostname label naming the exporter pod maps back to its node
        assert snap.pod_nodes.get(exporter_hostname(node), exporter_hostname(node)) == node.name


def test_nodes_carry_the_simulated_node_facts(fleet: Fleet) -> None:
    objects = kube_objects(fleet, TS, PROD)
    snap = _snapshot(objects)
    parsed = {n["name"]: n for n in snap.nodes}
    frame = nodes_frame(fleet)
    frame = frame[frame["cluster"] == PROD]
    assert set(parsed) == set(frame["node"]), "the CPU-only system node is not a GPU node"
    assert len(objects["nodes"]) == len(frame) + 1
    facts = ["gpu_count", "gpu_memory_mib", "capacity_type", "instance_type", "mig_capable"]
    facts += ["mig_strategy", "mig_config", "timeslice_replicas"]
    for row in frame.to_dict("records"):
        node = parsed[row["node"]]
        for fact in facts:
            assert node[fact] == (None if pd.isna(row[fact]) else row[fact]), (row["node"], fact)
        assert node["gpu_model"].replace("-", " ") == row["gpu_model"].replace("-", " ")


def test_namespaces_carry_their_team(fleet: Fleet) -> None:
    snap = _snapshot(kube_objects(fleet, TS, RESEARCH))
    teams = {row["name"]: row["team"] for row in snap.namespaces}
    expected = {ns.name: ns.team for ns in fleet.namespaces if ns.cluster == RESEARCH}
    assert {k: teams[k] for k in expected} == expected
    assert teams["gpu-operator"] is None


def test_objects_are_pure_and_refuse_unknown_clusters(fleet: Fleet) -> None:
    first = kube_objects(fleet, TS, PROD)
    assert json.dumps(first, sort_keys=True) == json.dumps(
        kube_objects(build_fleet(7), TS, PROD), sort_keys=True
    )
    assert set(first) == set(RESOURCES)
    with pytest.raises(ValueError, match="no simulated cluster"):
        kube_objects(fleet, TS, "nope")


# -- served live, read by the collector's client ---------------------------------------------


@pytest.fixture
def api(fleet: Fleet) -> Iterator[LiveKubeApi]:
    clock = [float(TS)]
    with LiveKubeApi(fleet, PROD, port=0, clock=lambda: clock[0], refresh_s=15) as server:
        server.clock = clock  # type: ignore[attr-defined]
        yield server


def test_the_collectors_client_reads_the_live_api(
    api: LiveKubeApi, fleet: Fleet, tmp_path: Path
) -> None:
    config = kubeconfig_for(api.url, tmp_path / "kubeconfig")
    with KubeSource(kubeconfig=str(config), page_size=7, retries=0) as source:
        snap = source.snapshot(TS)
    # what the client read, DRA's claims, slices and classes at v1 included, is what was served
    objects = kube_objects(fleet, TS, PROD)
    dra = parse_dra(
        objects["resourceclaims"], objects["resourceslices"], objects["deviceclasses"], "v1"
    )
    assert dra.on and len(dra.devices) > 10
    # Kueue's quotas and Workloads as served, read at v1beta1; the pods' queues and gangs follow
    # from them (tests/test_kueue_collect.py checks those rules)
    kueue = parse_kueue(
        objects["clusterqueues"], objects["resourceflavors"], objects["localqueues"],
        objects["workloads"],
    )  # fmt: skip
    assert snap.sched.kueue.summary() == "Kueue on (kueue.x-k8s.io/v1beta1)"
    assert [dict(r) for r in snap.sched.queue_flavors] == kueue.queue_flavors
    assert len(snap.sched.queue_flavors) == 4
    assert snap == _snapshot(objects, dra=dra, sched=snap.sched)
    assert {p["queue"] for p in snap.gpu_pods} == {None, "training", "research", "inference"}
    assert any(r.query.get("continue") for r in api.requests), "lists were paginated"


def test_the_live_api_follows_the_clock_but_never_mid_list(api: LiveKubeApi, fleet: Fleet) -> None:
    status, body = api.respond("/api/v1/pods?limit=5", None)
    first = json.loads(body)
    assert status == 200 and first["metadata"]["continue"]
    api.clock[0] = TS + 3 * 86400.0  # type: ignore[attr-defined]
    token = first["metadata"]["continue"]
    status, body = api.respond(f"/api/v1/pods?limit=500&continue={token}", None)
    assert status == 200, "a list in progress is finished from the objects it started on"
    before = {o["metadata"]["name"] for o in kube_objects(fleet, TS, PROD)["pods"]}
    assert {o["metadata"]["name"] for o in json.loads(body)["items"]} <= before
    status, body = api.respond("/api/v1/pods", None)
    later = {o["metadata"]["name"] for o in json.loads(body)["items"]}
    assert later == {
        o["metadata"]["name"] for o in kube_objects(fleet, TS + 3 * 86400, PROD)["pods"]
    }
    assert later != before
