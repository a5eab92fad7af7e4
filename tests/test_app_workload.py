"""The Workload page explains its suggestions: checked against the raw samples of the demo."""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import plotly.utils
import pytest
from dash import Dash

from gpuwatch.app.data import DashboardData, Filters
from gpuwatch.app.server import create_app, data_source
from gpuwatch.app.views import window_bounds
from gpuwatch.app.views_gpu import WorkloadKey, workload_recommendations
from gpuwatch.cli.commands_demo import build_demo_database
from gpuwatch.config import Settings
from gpuwatch.store import repository, repository_detail
from gpuwatch.store.engine import make_engine

NOW_TS = 1_794_823_200  # a Monday 12:00 UTC
QUERY = {
    "cluster": "prod-us-east",
    "namespace": "llm-training",
    "kind": "Job",
    "name": "llm-pretrain",
}
KEY = WorkloadKey("prod-us-east", "llm-training", "Job", "llm-pretrain")
SCIENTIFIC = re.compile(r"\d[eE][+-]?\d")


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dash]:
    path = Path(tmp_path_factory.mktemp("fleet")) / "fleet.db"
    build_demo_database(path, days=9, step_s=1800, seed=7, now_ts=NOW_TS)
    engine = make_engine(f"sqlite:///{path}")
    settings = Settings()
    dash_app = create_app(
        engine, settings, data=DashboardData(engine, settings, background=False), warm=False
    )
    with dash_app.server.app_context():
        yield dash_app
    engine.dispose()


def page() -> Any:
    return importlib.import_module("gpuwatch.app.pages.workload")


def walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, list):
        for item in node:
            yield from walk(item)
    elif isinstance(node, dict) and "props" in node and "type" in node:
        yield node
        for value in node["props"].values():
            yield from walk(value)


def by_id(layout: Any, ident: str) -> dict[str, Any]:
    nodes = walk(json.loads(json.dumps(layout, cls=plotly.utils.PlotlyJSONEncoder)))
    found = [n for n in nodes if n["props"].get("id") == ident]
    assert found, f"no component {ident}"
    return found[0]


def cell_texts(row: dict[str, Any]) -> list[str]:
    """Each cell's text: the strings of every component in it, joined by spaces."""
    out = []
    for cell in row["props"]["children"]:
        children = [n["props"].get("children") for n in walk(cell)]
        out.append(" ".join(c for c in children if isinstance(c, str)))
    return out


def raw_samples(pod_ids: np.ndarray) -> Any:
    """The raw samples of the default window held by ``pod_ids``, with a utilization reading."""
    snap = data_source().data.current()
    start, end = window_bounds(snap, Filters())
    samples = repository.load_samples(data_source().engine, start, end, health=False)
    held = samples["pod_id"].isin(pod_ids) & samples["util_ratio"].notna()
    return samples[held.to_numpy(dtype=bool)]


def workload_pod_ids() -> np.ndarray:
    pods = data_source().data.current().pods
    mine = (
        pods["cluster"].eq(KEY.cluster)
        & pods["namespace"].eq(KEY.namespace)
        & pods["workload_kind"].eq(KEY.kind)
        & pods["workload"].eq(KEY.name)
    )
    return pods.loc[mine, "pod_id"].to_numpy(dtype="int64")


def test_distributions_mark_the_quantiles_of_the_raw_samples(app: Dash) -> None:
    layout = page().layout(**QUERY)
    samples = raw_samples(workload_pod_ids())
    assert len(samples) > 100
    p95 = 100 * np.quantile(samples["util_ratio"].to_numpy(), 0.95, method="inverted_cdf")
    util = by_id(layout, "workload-util-distribution")["props"]["figure"]
    p95_line, idle_line = util["layout"]["shapes"]
    assert abs(p95_line["x0"] - p95) <= 0.25  # 0.5-point bins
    assert idle_line["x0"] == Settings().thresholds.idle_util_pct
    assert sum(util["data"][0]["y"]) == pytest.approx(100.0)
    fb = samples["fb_used_mib"].dropna().to_numpy()
    p99 = np.quantile(fb, 0.99, method="inverted_cdf")
    memory = by_id(layout, "workload-memory-distribution")["props"]["figure"]
    p99_line, gpu_line = memory["layout"]["shapes"]
    assert p99_line["x0"] == pytest.approx(p99 / 1024)  # whole MiB: exact
    assert gpu_line["x0"] == pytest.approx(np.median(samples["fb_total_mib"]) / 1024)
    assert memory["layout"]["annotations"][0]["text"] == f"p99 {p99 / 1024:,.1f} GiB"
    # the recommendations read the same quantiles
    snap = data_source().data.current()
    evidence = workload_recommendations(snap, Filters(), KEY)["evidence"].iloc[0]
    assert p95_line["x0"] == evidence["p95_util_pct"]
    assert p99_line["x0"] * 1024 == pytest.approx(evidence["p99_memory_mib"])


def test_held_vs_busy_with_the_projected_gpus(app: Dash) -> None:
    layout = page().layout(**QUERY)
    fig = by_id(layout, "workload-held-busy")["props"]["figure"]
    traces = {t["name"]: t for t in fig["data"]}
    held = traces["held (allocated GPU-hours per hour)"]
    busy = traces["busy (used GPU-hours per hour)"]
    samples = raw_samples(workload_pod_ids())
    gpu_hours = float(samples["step_s"].sum()) / 3600
    used_hours = float((samples["step_s"] * samples["util_ratio"]).sum()) / 3600
    assert sum(v for v in held["y"] if v is not None) == pytest.approx(gpu_hours)
    assert sum(v for v in busy["y"] if v is not None) == pytest.approx(used_hours)
    recs = workload_recommendations(data_source().data.current(), Filters(), KEY)
    by_kind = {r["kind"]: r for r in recs.to_dict("records")}
    fewer = by_kind["reduce_gpu_count"]["evidence"]
    scale = fewer["busy_gpus_p95"] / fewer["gpus_per_pod"]
    dashed = next(t for n, t in traces.items() if n.startswith("after reduce_gpu_count"))
    assert dashed["line"]["dash"] == "dash"
    expected = [None if v is None else v * scale for v in held["y"]]
    assert dashed["y"] == pytest.approx(expected)


def test_held_vs_busy_with_the_projected_replicas(app: Dash) -> None:
    # support/chat-assist: 12 replicas doing the work of 3 (the simulated fleet)
    query = {**QUERY, "namespace": "support", "kind": "Deployment", "name": "chat-assist"}
    key = WorkloadKey("prod-us-east", "support", "Deployment", "chat-assist")
    fig = by_id(page().layout(**query), "workload-held-busy")["props"]["figure"]
    traces = {t["name"]: t for t in fig["data"]}
    held = traces["held (allocated GPU-hours per hour)"]
    recs = workload_recommendations(data_source().data.current(), Filters(), key)
    need = {r["kind"]: r for r in recs.to_dict("records")}["reduce_replicas"]["evidence"]
    assert need["gpus_needed"] == 3
    replicas = next(t for n, t in traces.items() if n.startswith("after reduce_replicas"))
    expected = [None if v is None else min(v, need["gpus_needed"]) for v in held["y"]]
    assert replicas["y"] == pytest.approx(expected)


def test_recommendations_table_has_projected_state_and_evidence_columns(app: Dash) -> None:
    table = by_id(page().layout(**QUERY), "workload-recommendations")
    rows = [n for n in walk(table) if n["type"] == "Tr"]
    heads = cell_texts(rows[0])  # each heading a sort button: its text
    for name in ("Projected after the change", "p95 util (%)", "p99 memory (GiB)"):
        assert name in heads
    assert "busy GPUs p95" in heads and "hours observed (h)" in heads
    recs = workload_recommendations(data_source().data.current(), Filters(), KEY)
    assert len(rows) == 1 + len(recs)
    for row, rec in zip(rows[1:], recs.to_dict("records"), strict=True):
        cells = dict(zip(heads, cell_texts(row), strict=True))
        assert not any(SCIENTIFIC.search(text) for text in cells.values()), cells
        assert cells["p95 util (%)"] == f"{rec['evidence']['p95_util_pct']:g}"
        assert cells["p99 memory (GiB)"] == f"{rec['evidence']['p99_memory_mib'] / 1024:.1f}"
        if rec["kind"] == "reduce_replicas":
            e = rec["evidence"]
            share = round(100 * e["util_sum_p95"] / e["gpus_needed"])
            assert f"÷ {e['gpus_needed']} ≈ {share} % each" in cells["Projected after the change"]
        assert cells["Projected after the change"]
        assert cells["More evidence"].startswith("show GPU-hours observed")


def test_without_stored_detail_the_distributions_say_so(app: Dash) -> None:
    current = data_source().data.current()
    snap = dataclasses.replace(current, engine=None, _memo=OrderedDict(), _pinned={})
    util, memory = page().distribution_figures(snap, Filters(), KEY)
    assert util["data"] == [] and memory["data"] == []
    assert "no stored samples" in util["layout"]["annotations"][0]["text"]


def test_pod_detail_is_the_window_detail_of_those_pod_hours(
    app: Dash, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = data_source().engine
    start, end = window_bounds(data_source().data.current(), Filters())
    whole = repository_detail.load_detail(engine, start, end)
    hours = whole.pods["hour_ts"].to_numpy()
    # the workload's pods, in the window's first three days only
    keep = whole.pods["pod_id"].isin(workload_pod_ids()).to_numpy() & (hours < start + 3 * 86400)
    assert 0 < keep.sum() < len(keep)
    asked = whole.pods[keep]
    monkeypatch.setattr(repository_detail, "POD_CHUNK", 2)  # several queries a day
    mine = repository_detail.load_pod_detail(
        engine,
        [*asked["hour_ts"], 0, start],  # two pairs without detail: no such hour, no such pod
        [*asked["pod_id"], int(asked["pod_id"].iloc[0]), 10**9],
    )
    assert mine.workloads.empty
    assert mine.pods.equals(asked.reset_index(drop=True))
    for name in ("pod_util", "pod_fb_used", "pod_busy"):
        got, want = getattr(mine, name), getattr(whole, name).take(keep)
        for part in ("rows", "bins", "counts"):
            assert np.array_equal(getattr(got, part), getattr(want, part)), (name, part)
