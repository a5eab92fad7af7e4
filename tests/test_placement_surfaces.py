"""consolidate_placement is the same on every surface: `gpuwatch recommend`, the weekly CSV's
``recommendation`` cell and the dashboard's recommendations, all read from one small store.

By hand: the Job ``scatter`` runs 4 pods of 1 GPU, one on each of the nodes n1-n4 (8 GPUs each),
busy at 90 % on spot capacity for 30 hours: ⌈4 ÷ 8⌉ = 1 node needed, 4 used at every sample,
so all its 4 × 30 = 120 GPU-hours are spread. Busy, on spot, with room in memory: no other kind
fires, so the CSV's cell names consolidate_placement (no saving claimed)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from gpuwatch.app.data import DashboardData
from gpuwatch.app.views import window_recommendations
from gpuwatch.cli.main import cli
from gpuwatch.config import Settings
from gpuwatch.simulate.generate import SimulatedData
from gpuwatch.simulate.load import load_simulated
from gpuwatch.store.engine import make_engine, upgrade

WEEK = "2026-W46"
START = 1_794_182_400 + 86400  # Tuesday 2026-11-10 00:00 UTC
HOURS = 30
MODEL = "NVIDIA Test GPU"
NODES = ("n1", "n2", "n3", "n4")
EVIDENCE = {
    "nodes_used_p95": 4.0,
    "nodes_needed": 1,
    "gpus": 4,
    "gpus_per_node": 8,
    "spread_gpu_hours": 120.0,
    "pcie_bytes_per_s": None,
    "nvlink_bytes_per_s": None,
}


NAMESPACE = {"cluster": "c1", "namespace": "ml", "team": "research", "labels": {}}


def _node(node: str) -> dict[str, Any]:
    return {"cluster": "c1", "node": node, "gpu_model": MODEL, "gpu_count": 8,
            "gpu_memory_mib": 16384, "capacity_type": "spot", "instance_type": "test",
            "mig_capable": False, "mig_strategy": None, "mig_config": None,
            "timeslice_replicas": 1, "labels": {}}  # fmt: skip


def _gpu(node: str) -> dict[str, Any]:
    return {"cluster": "c1", "node": node, "uuid": f"GPU-{node}", "mig_gi_id": -1, "slot": 0,
            "gpu_index": 0, "device": "nvidia0", "model_name": MODEL, "mig_profile": None,
            "timeslice_replicas": 1, "memory_total_mib": 16384}  # fmt: skip


def _pod(index: int, node: str) -> dict[str, Any]:
    return {"cluster": "c1", "namespace": "ml", "pod": f"scatter-{index}", "uid": f"uid-{index}",
            "node": node, "phase": "Running", "workload_kind": "Job", "workload_name": "scatter",
            "team": "research", "gpu_resource": "nvidia.com/gpu", "gpu_count": 1, "labels": {},
            "owner_kind": "Job", "owner_name": "scatter", "created_ts": START,
            "started_ts": START, "finished_ts": None}  # fmt: skip


def _samples(index: int, node: str) -> list[dict[str, Any]]:
    return [
        {"cluster": "c1", "uuid": f"GPU-{node}", "mig_gi_id": -1, "slot": 0,
         "ts": START + h * 3600, "step_s": 3600, "pod_uid": f"uid-{index}", "util_ratio": 0.9,
         "util_signal": "prof_gr_engine_active", "fb_used_mib": 12000.0,
         "fb_total_mib": 16384.0, "power_w": 300.0, "temp_c": 60.0, "xid": 0}
        for h in range(HOURS)
    ]  # fmt: skip


def fleet() -> SimulatedData:
    return SimulatedData(
        start_ts=START,
        end_ts=START + HOURS * 3600,
        step_s=3600,
        clusters=pd.DataFrame({"cluster": ["c1"]}),
        nodes=pd.DataFrame([_node(n) for n in NODES]),
        gpus=pd.DataFrame([_gpu(n) for n in NODES]),
        namespaces=pd.DataFrame([NAMESPACE]),
        pods=pd.DataFrame([_pod(i, n) for i, n in enumerate(NODES)]),
        samples=pd.DataFrame([row for i, n in enumerate(NODES) for row in _samples(i, n)]),
    )


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = Path(tmp_path_factory.mktemp("placement")) / "placement.db"
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    with engine.begin() as conn:
        load_simulated(conn, fleet())
    engine.dispose()
    return f"sqlite:///{path}"


def run_cli(url: str, *args: str) -> str:
    result = CliRunner().invoke(cli, list(args), env={"GPUWATCH_DATABASE_URL": url})
    assert result.exit_code == 0, result.output
    return result.stdout


def _placement_evidence(evidence: dict[str, Any]) -> dict[str, Any]:
    return {key: evidence[key] for key in EVIDENCE}


def test_recommend_names_the_scattered_job(store_url: str) -> None:
    text = run_cli(store_url, "recommend", "--start", "2026-11-09T00:00:00Z",
                   "--end", "2026-11-16T00:00:00Z", "--format", "json")  # fmt: skip
    recs = json.loads(text)
    assert [(r["workload"], r["kind"]) for r in recs] == [("scatter", "consolidate_placement")]
    assert _placement_evidence(recs[0]["evidence"]) == EVIDENCE
    assert recs[0]["est_monthly_savings_usd"] == 0.0


def test_the_weekly_csv_cell_names_it(store_url: str) -> None:
    text = run_cli(store_url, "report", "weekly", "--week", WEEK)
    rows = [r for r in csv.DictReader(io.StringIO(text)) if r["workload"] == "scatter"]
    assert len(rows) == 1
    assert rows[0]["recommendation"] == "consolidate_placement"
    assert rows[0]["est_monthly_savings_usd"] == "0.00"


def test_the_dashboard_recommendations_name_it(store_url: str) -> None:
    engine = make_engine(store_url)
    try:
        snap = DashboardData(engine, Settings(), background=False).current()
        recs = window_recommendations(snap, "7d")
    finally:
        engine.dispose()
    assert [(r.workload, r.kind) for r in recs.itertuples()] == [
        ("scatter", "consolidate_placement")
    ]
    assert _placement_evidence(recs.iloc[0]["evidence"]) == EVIDENCE
