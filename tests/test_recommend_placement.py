"""consolidate_placement: a job or gang spread over more nodes than its GPUs need, counted by
hand on nodes of 8 GPUs."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pandas as pd

from gpuwatch.analytics.build import nodes_frame, pods_frame, samples_frame
from gpuwatch.analytics.health_sums import health_sums
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.analytics.recommend import recommend
from gpuwatch.analytics.render import render_csv, render_json, render_table
from gpuwatch.analytics.rules import KINDS
from gpuwatch.domain.frames import HEALTH_COLUMNS, conform
from gpuwatch.domain.pricing import build_price_book

T0 = 1_794_182_400  # Monday 2026-11-09 00:00 UTC
HOUR = 3600
A100 = "NVIDIA A100-SXM4-80GB"
BOOK = build_price_book(2.0, 0.6, {A100: (7.0, 3.0)}, {})
HOURS = 5


def job(placement: list[tuple[str, int]], kind: str = "Job") -> pd.DataFrame:
    """One pod per (node, GPUs) entry, each GPU busy at 90 % for HOURS hourly samples."""
    rows: list[dict[str, Any]] = []
    gpu_id = 0
    for pod, (node, gpus) in enumerate(placement):
        for _ in range(gpus):
            gpu_id += 1
            for hour in range(HOURS):
                rows.append({
                    "gpu_id": gpu_id, "node": node, "gpu_model": A100,
                    "ts": T0 + hour * HOUR, "step_s": HOUR, "util_ratio": 0.9,
                    "capacity_type": "spot", "pod_id": pod + 1, "pod": f"train-{pod}",
                    "namespace": "ml", "workload_kind": kind, "workload": "train",
                    "team": "t", "attribution": "pod", "pod_gpu_count": gpus,
                })  # fmt: skip
    return samples_frame(rows)


def nodes(count: int, gpus: int = 8) -> pd.DataFrame:
    return nodes_frame(
        [{"node": f"n{i + 1}", "gpu_model": A100, "gpu_count": gpus} for i in range(count)]
    )


def placement(samples: pd.DataFrame, node_frame: pd.DataFrame, **kwargs: Any) -> pd.DataFrame:
    recs = recommend(samples, None, BOOK, AnalyticsPolicy(), T0, T0 + HOURS * HOUR,
                     nodes=node_frame, **kwargs)  # fmt: skip
    return recs[recs["kind"] == "consolidate_placement"]


def test_four_one_gpu_pods_on_four_nodes_fit_on_one() -> None:
    recs = placement(job([("n1", 1), ("n2", 1), ("n3", 1), ("n4", 1)]), nodes(4))
    assert len(recs) == 1
    row = recs.iloc[0]
    evidence = row["evidence"]
    assert evidence["nodes_used_p95"] == 4.0
    assert evidence["nodes_needed"] == 1
    assert evidence["gpus"] == 4
    assert evidence["gpus_per_node"] == 8
    # 4 GPUs × 5 hours, every hour spread.
    assert evidence["spread_gpu_hours"] == 20.0
    assert evidence["pcie_bytes_per_s"] is None and evidence["nvlink_bytes_per_s"] is None
    assert row["est_monthly_savings_usd"] == 0.0
    assert row["current"] == "4 GPUs over 4 nodes (p95)"


def test_the_same_job_on_one_node_does_not_fire() -> None:
    recs = placement(job([("n1", 1), ("n1", 1), ("n1", 1), ("n1", 1)]), nodes(4))
    assert recs.empty


def test_sixteen_gpus_on_two_nodes_of_eight_do_not_fire() -> None:
    recs = placement(job([("n1", 8), ("n2", 8)]), nodes(2))
    assert recs.empty


def test_twelve_gpus_on_three_nodes_of_eight_need_two() -> None:
    recs = placement(job([("n1", 4), ("n2", 4), ("n3", 4)]), nodes(3))
    assert recs.iloc[0]["evidence"]["nodes_needed"] == 2
    assert recs.iloc[0]["evidence"]["spread_gpu_hours"] == 60.0


def test_a_deployment_spread_over_nodes_does_not_fire() -> None:
    recs = placement(job([("n1", 1), ("n2", 1)], kind="Deployment"), nodes(2))
    assert recs.empty


def test_a_gang_of_another_kind_counts_as_a_job() -> None:
    """Two LeaderWorkerSets spread alike: the one whose pods are a gang fires, the other not."""
    gang = job([("n1", 1), ("n2", 1)], kind="LeaderWorkerSet")
    other = job([("n3", 1), ("n4", 1)], kind="LeaderWorkerSet")
    other = other.assign(
        gpu_id=other["gpu_id"] + 10, pod_id=other["pod_id"] + 10, workload="serve",
        pod="serve-" + other["pod"].str.removeprefix("train-"),
    )  # fmt: skip
    pods = pods_frame(
        {
            "pod_id": pod_id, "pod": name, "namespace": "ml", "node": node, "gpu_count": 1,
            "workload_kind": "LeaderWorkerSet", "workload": name.split("-")[0],
            "started_ts": T0, "gang_kind": "kueue" if pod_id < 10 else None,
        }
        for pod_id, name, node in [(1, "train-0", "n1"), (2, "train-1", "n2"),
                                   (11, "serve-0", "n3"), (12, "serve-1", "n4")]
    )  # fmt: skip
    recs = recommend(pd.concat([gang, other], ignore_index=True), pods, BOOK, AnalyticsPolicy(),
                     T0, T0 + HOURS * HOUR, nodes=nodes(4))  # fmt: skip
    fired = recs[recs["kind"] == "consolidate_placement"]
    assert fired["workload"].tolist() == ["train"]
    assert fired.iloc[0]["evidence"]["nodes_used_p95"] == 2.0


def test_no_node_sizes_no_placement() -> None:
    recs = recommend(job([("n1", 1), ("n2", 1)]), None, BOOK, AnalyticsPolicy(), T0,
                     T0 + HOURS * HOUR)  # fmt: skip
    assert "consolidate_placement" not in set(recs["kind"])


def health_of(samples: pd.DataFrame, pcie: dict[int, float]) -> pd.DataFrame:
    """The health roll-up of ``samples``: no readings but PCIe (by gpu_id) and NVLink 0."""
    health = samples.copy()
    for col in HEALTH_COLUMNS:
        if col.name not in health:
            health[col.name] = 0.0 if col.dtype == "float64" else pd.NA
    health["data_s"] = float(HOUR)
    health["first_ts"] = health["ts"]
    health["last_ts"] = health["ts"] + HOUR - 60
    health["sm_clock_mhz"] = float("nan")
    health["pcie_bytes_per_s"] = [pcie[g] for g in health["gpu_id"]]
    return conform(health, HEALTH_COLUMNS)


def test_the_evidence_carries_pcie_and_nvlink_traffic() -> None:
    samples = job([("n1", 1), ("n2", 1)])
    # Mean over both GPUs' hours: (1e9 + 3e9) ÷ 2.
    health = health_of(samples, {1: 1e9, 2: 3e9})
    evidence = placement(samples, nodes(2), health_sums=health_sums(health)).iloc[0]["evidence"]
    assert evidence["pcie_bytes_per_s"] == 2e9
    assert evidence["nvlink_bytes_per_s"] == 0.0


def test_consolidate_placement_ranks_last() -> None:
    assert KINDS[-2:] == ("investigate_efficiency", "consolidate_placement")


def test_consolidate_placement_in_every_format() -> None:
    recs = placement(job([("n1", 1), ("n2", 1), ("n3", 1), ("n4", 1)]), nodes(4))
    record = json.loads(render_json(recs))[0]
    assert record["kind"] == "consolidate_placement"
    assert record["evidence"]["nodes_needed"] == 1
    row = next(csv.DictReader(io.StringIO(render_csv(recs))))
    assert row["est_monthly_savings_usd"] == "0.00"
    assert json.loads(row["evidence"])["spread_gpu_hours"] == 20.0
    line = next(x for x in render_table(recs).splitlines() if "consolidate_placement" in x)
    assert line.split()[:2] == ["0.00", "consolidate_placement"]
