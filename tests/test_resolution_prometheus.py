"""Bursty serving pods replayed through a real Prometheus: the default resolution and raw
samples give the same advice (contract §5).

24 L4 GPUs, each holding one-GPU pods one after another (each living 10 minutes to 20 hours,
idle most of the time with short bursts), scraped every 57 seconds, one node's exporter down for
two hours; collected with pages that cut hours in pieces, then read raw, hourly and auto.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.analytics.costing import prepare
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.analytics.recommend import recommend
from gpuwatch.analytics.summary import summarize
from gpuwatch.collectors.collect import Window, collect
from gpuwatch.collectors.kube import KubeSource
from gpuwatch.collectors.prometheus import PrometheusSource
from gpuwatch.collectors.promql import Catalogue
from gpuwatch.domain.labels import LabelVariants
from gpuwatch.domain.pricing import build_price_book
from gpuwatch.report.inputs import load_inputs
from gpuwatch.report.weekly import iso_week_bounds
from gpuwatch.simulate.apiserver import KubeApiServer, kubeconfig_for
from gpuwatch.store.engine import make_engine, upgrade
from tests.support.prometheus import PrometheusProcess, Series, prometheus_with_blocks

pytestmark = pytest.mark.prometheus

START, _ = iso_week_bounds("2026-W46")
END = START + 2 * 86400
SCRAPE_S = 57
L4_MIB = 23034
BOOK = build_price_book(2.0, 0.6, {}, {})
POLICY = AnalyticsPolicy()


def _pods(rng: np.random.Generator, gpu: int) -> list[tuple[int, int, str]]:
    """(start, end, pod name) of the pods holding ``gpu`` one after another."""
    out, ts, n = [], START + int(rng.integers(0, 3600)), 0
    while ts < END:
        life = int(rng.integers(600, 20 * 3600))
        out.append((ts, min(ts + life, END), f"chat-{gpu:02d}-{n}"))
        ts += life + int(rng.integers(0, 2 * 3600))  # unheld in between
        n += 1
    return out


def _schedule(seed: int) -> dict[int, list[tuple[int, int, str]]]:
    """Per GPU, the pods holding it one after another."""
    return {gpu: _pods(np.random.default_rng([seed, gpu]), gpu) for gpu in range(24)}


def _series(seed: int) -> list[Series]:
    rng = np.random.default_rng(seed)
    schedule = _schedule(seed)
    out: list[Series] = []
    for gpu in range(24):
        node = f"l4-node-{gpu // 4}"
        base = {"gpu": str(gpu % 4), "UUID": f"GPU-e{gpu:07d}", "device": f"nvidia{gpu % 4}",
                "modelName": "NVIDIA L4", "Hostname": node, "job": "dcgm-exporter",
                "instance": f"10.0.1.{gpu // 4}:9400"}  # fmt: skip
        stamps = np.arange(START + 3 * (gpu // 4), END, SCRAPE_S)
        if gpu // 4 == 2:  # this node's exporter is down from 10:00 to 12:00 on day one
            stamps = stamps[(stamps < START + 10 * 3600) | (stamps >= START + 12 * 3600)]
        for pod_start, pod_end, name in schedule[gpu]:
            held = stamps[(stamps >= pod_start) & (stamps < pod_end)]
            n = len(held)
            # mostly idle (rare bursts), light (frequent small bursts) or busy serving
            rate, low, high, extra = [(0.02, 40, 101, 12000), (0.3, 8, 26, 2000),
                                      (0.12, 40, 101, 12000)][int(rng.integers(0, 3))]  # fmt: skip
            burst = rng.random(n) < rate
            util = np.where(burst, rng.integers(low, high, n), rng.integers(0, 4, n))
            used = rng.integers(1500, 4000, n) + burst * rng.integers(0, extra, n)
            labels = {**base, "namespace": "serving", "pod": name, "container": "main"}
            for metric, values in (("DCGM_FI_DEV_GPU_UTIL", util), ("DCGM_FI_DEV_FB_USED", used),
                                   ("DCGM_FI_DEV_FB_FREE", L4_MIB - used)):  # fmt: skip
                points = list(zip(held.tolist(), values.astype(float).tolist(), strict=True))
                out.append(Series(metric, labels, points))
    return out


SEED = 23


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    with prometheus_with_blocks(_series(SEED), tmp_path_factory.mktemp("bursty")) as server:
        yield server


@pytest.fixture
def engine(prometheus: PrometheusProcess, store_url: str) -> Iterator[Engine]:
    engine = make_engine(store_url)
    upgrade(engine)
    source = PrometheusSource(prometheus.url, Catalogue(), retries=1, backoff_s=0.01)
    window = Window(START, END, 60, 5 * 3600 + 1800)  # pages cut hours in two
    collect(engine, "lab", window, source, None, LabelVariants(), now_ts=END)
    yield engine
    engine.dispose()


def _recommend(engine: Engine, resolution: str) -> tuple[str, pd.DataFrame]:
    data = load_inputs(engine, START, END, resolution=resolution)
    recs = recommend(data.samples, data.pods, BOOK, POLICY, data.start_ts, data.end_ts,
                     gpus=data.gpus, nodes=data.nodes, detail=data.detail)  # fmt: skip
    keys = ["cluster", "namespace", "workload_kind", "workload", "gpu_model", "kind"]
    return data.resolution, recs.set_index(keys).sort_index()


def test_default_resolution_and_raw_agree(engine: Engine) -> None:
    chosen, auto = _recommend(engine, "auto")
    assert chosen == "hourly"
    _, raw = _recommend(engine, "raw")
    _, hourly = _recommend(engine, "hourly")
    assert len(raw) > 20
    for other in (auto, hourly):
        assert list(other.index) == list(raw.index)  # every workload's kinds
        np.testing.assert_allclose(
            other["est_monthly_savings_usd"], raw["est_monthly_savings_usd"], rtol=1e-9
        )
        for name in ("p95_util_pct", "p99_memory_mib", "hours_observed", "gpus_requested"):
            assert [e[name] for e in other["evidence"]] == [e[name] for e in raw["evidence"]]
    total = raw["est_monthly_savings_usd"].sum()
    assert auto["est_monthly_savings_usd"].sum() == pytest.approx(total, rel=0.01)
    # The pods are one-GPU pods whatever they lived, and those idle enough are told to give
    # the GPU back even when they lived only hours.
    assert {e["gpus_requested"] for e in raw["evidence"]} == {1}
    assert "reclaim_idle" in set(raw.index.get_level_values("kind"))


# Finished pods: the API lists only the pods still running at the end -------------------------


def _iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _api_objects() -> dict[str, list[dict[str, Any]]]:
    """What the API shows at the end: the serving namespace (team "inference"), the nodes, and
    only the pods still running, owned by ReplicaSet chat-5d8f → Deployment chat."""
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "chat-5d8f",
             "uid": "rs-chat-5d8f", "controller": True}  # fmt: skip
    pods = [
        {
            "metadata": {
                "name": name,
                "namespace": "serving",
                "uid": f"uid-{name}",
                "creationTimestamp": _iso(start),
                "labels": {"app": "chat"},
                "ownerReferences": [owner],
            },
            "spec": {
                "nodeName": f"l4-node-{gpu // 4}",
                "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            },
            "status": {"phase": "Running", "startTime": _iso(start)},
        }
        for gpu, pods in _schedule(SEED).items()
        for start, end, name in pods
        if end == END
    ]
    replicaset = {
        "metadata": {"name": "chat-5d8f", "namespace": "serving", "uid": "rs-chat-5d8f",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                          "name": "chat", "uid": "dep-chat", "controller": True}]},
    }  # fmt: skip
    namespace = {"metadata": {"name": "serving", "uid": "ns-serving",
                              "labels": {"team": "inference"}}}  # fmt: skip
    nodes = [
        {"metadata": {"name": f"l4-node-{n}", "uid": f"node-{n}",
                      "labels": {"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.count": "4",
                                 "nvidia.com/gpu.memory": str(L4_MIB)}},
         "status": {"capacity": {"nvidia.com/gpu": "4"}, "allocatable": {"nvidia.com/gpu": "4"}}}
        for n in range(6)
    ]  # fmt: skip
    return {"pods": pods, "replicasets": [replicaset], "namespaces": [namespace],
            "nodes": nodes, "jobs": []}  # fmt: skip


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[KubeSource]:
    with KubeApiServer(_api_objects()) as api:
        source = KubeSource(kubeconfig=str(kubeconfig_for(api.url, tmp_path / "kubeconfig")))
        yield source
        source.close()


def _collect(engine: Engine, url: str, start: int, end: int, kube: KubeSource | None) -> None:
    source = PrometheusSource(url, Catalogue(), retries=1, backoff_s=0.01)
    window = Window(start, end, 60, 5 * 3600 + 1800)
    collect(engine, "lab", window, source, kube, LabelVariants(), now_ts=END)


def _by_team(engine: Engine) -> pd.DataFrame:
    data = load_inputs(engine, START, END, resolution="raw")
    costed = prepare(data.samples, data.pods, BOOK)
    return summarize(costed, ["team"], 0.05).set_index("team")


def test_a_backfill_after_the_pods_are_gone_charges_their_team(
    prometheus: PrometheusProcess, migrated_engine: Engine, kube: KubeSource
) -> None:
    engine = migrated_engine
    _collect(engine, prometheus.url, START, END, kube)
    teams = _by_team(engine)
    # Every sample of the fixture is a pod's: all of it is the inference team's, none is
    # unallocated, though the API lists only the pods still running.
    assert list(teams.index) == ["inference"]
    assert teams.loc["inference", "unallocated_gpu_hours"] == 0
    with engine.connect() as conn:
        hours = conn.execute(
            sa.text("SELECT sum(step_s) FROM gpu_samples WHERE util_ratio IS NOT NULL")
        ).scalar_one()
        rows = conn.execute(sa.text("SELECT uid, gpu_count, workload_kind FROM pods")).all()
    assert teams.loc["inference", "allocated_gpu_hours"] == pytest.approx(hours / 3600)
    listed = {r for r in rows if r[0]}
    assert len(listed) == len(_api_objects()["pods"]) > 5
    assert all(r[1:] == (1, "Deployment") for r in listed)
    finished = [r for r in rows if not r[0]]
    assert len(finished) > 20 and all(r[1:] == (1, "Pod") for r in finished)


def test_dcgm_first_and_kubernetes_later_give_one_row_per_pod(
    prometheus: PrometheusProcess, migrated_engine: Engine, kube: KubeSource
) -> None:
    engine = migrated_engine
    _collect(engine, prometheus.url, START, END, None)
    before = _by_team(engine)
    assert list(before.index) == ["unassigned"]  # no namespace facts yet
    _collect(engine, prometheus.url, END - 3600, END, kube)
    with engine.connect() as conn:
        names = conn.execute(sa.text("SELECT namespace, name FROM pods")).all()
        kinds = dict(
            conn.execute(sa.text("SELECT uid = '', count(*) FROM pods GROUP BY uid = ''")).all()
        )
    assert len(names) == len(set(names))  # never a second row for a pod
    assert kinds[0] == len(_api_objects()["pods"])  # adopted by the API's uid
    after = _by_team(engine)
    total = before[["allocated_gpu_hours", "allocated_cost_usd"]].sum()
    moved = after[["allocated_gpu_hours", "allocated_cost_usd"]].sum()
    np.testing.assert_allclose(moved.to_numpy(), total.to_numpy(), rtol=1e-9)
    # The running pods' hours now belong to Deployment chat, rolled up again under it.
    _, chat = _recommend(engine, "auto")
    _, raw_chat = _recommend(engine, "raw")
    assert list(chat.index) == list(raw_chat.index)
    assert "chat" in set(chat.index.get_level_values("workload"))
