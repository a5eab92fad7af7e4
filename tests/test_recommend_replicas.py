"""``reduce_replicas`` (contract section 5): R GPUs held at p95 of sample times against
⌈p95 Σ util ÷ 0.6⌉ needed, and an autoscaling range when the hourly Σ util swings."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from gpuwatch.analytics.build import samples_frame
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.analytics.recommend import recommend
from gpuwatch.domain.pricing import build_price_book

T0 = 1_794_182_400  # Monday 2026-11-09 00:00 UTC
HOUR = 3600
A100 = "NVIDIA A100-SXM4-80GB"
BOOK = build_price_book(2.0, 0.6, {A100: (7.0, 3.0)}, {})


def replicas(per_hour: list[list[float]], *, kind: str = "Deployment") -> pd.DataFrame:
    """``len(per_hour[0])`` one-GPU pods of one workload, one sample per pod per hour."""
    rows: list[dict[str, Any]] = []
    for hour, utils in enumerate(per_hour):
        for i, util in enumerate(utils):
            rows.append({
                "gpu_id": i + 1, "ts": T0 + hour * HOUR, "step_s": HOUR, "util_ratio": util,
                "fb_used_mib": 70000.0, "fb_total_mib": 81920.0,  # too big for MIG or sharing
                "pod_id": i + 1, "pod": f"serve-{i}", "namespace": "ns", "workload_kind": kind,
                "workload": "serve", "team": "t", "attribution": "pod", "pod_gpu_count": 1,
            })  # fmt: skip
    return samples_frame(rows)


def only_replicas(samples: pd.DataFrame, hours: int, **policy: Any) -> pd.DataFrame:
    recs = recommend(samples, None, BOOK, AnalyticsPolicy(**policy), T0, T0 + hours * HOUR)
    return recs[recs["kind"] == "reduce_replicas"]


def test_twelve_replicas_with_the_demand_of_three() -> None:
    recs = only_replicas(replicas([[0.15] * 12] * 20), 20)
    assert len(recs) == 1
    rec = recs.iloc[0]
    # Σ util = 12 × 0.15 = 1.8 at every sample time: need ⌈1.8 / 0.6⌉ = 3 of R = 12.
    assert rec["current"] == "12 replicas × 1 × nvidia.com/gpu"
    assert rec["suggested"] == "3 replicas × 1 × nvidia.com/gpu"
    # 12 GPUs × $7 = $84 per hour of data; saves (12 − 3) / 12.
    assert rec["est_monthly_savings_usd"] == pytest.approx(84 * 730 * 9 / 12)
    assert rec["evidence"]["gpus_held_p95"] == 12
    assert rec["evidence"]["gpus_needed"] == 3
    assert rec["evidence"]["util_sum_p95"] == pytest.approx(1.8)
    assert "autoscale_min_replicas" not in rec["evidence"]


def test_fires_when_need_is_one_below_r() -> None:
    # Σ = 12 × 0.55 = 6.6: need ⌈11.0⌉ = 11 = R − 1.
    rec = only_replicas(replicas([[0.55] * 12] * 20), 20).iloc[0]
    assert rec["suggested"] == "11 replicas × 1 × nvidia.com/gpu"
    assert rec["est_monthly_savings_usd"] == pytest.approx(84 * 730 / 12)


def test_not_when_need_reaches_r() -> None:
    # Σ = 12 × 0.56 = 6.72: need ⌈11.2⌉ = 12 = R.
    assert only_replicas(replicas([[0.56] * 12] * 20), 20).empty


def test_p95_of_sample_times_not_the_mean() -> None:
    # 19 of 20 times Σ = 1.2 (need 2); at one time (5 %) Σ = 6 (need 10): the p95 time is 1.2.
    per_hour = [[0.1] * 12] * 19 + [[0.5] * 12]
    rec = only_replicas(replicas(per_hour), 20).iloc[0]
    assert rec["evidence"]["gpus_needed"] == 2
    # Two such times (10 %) move the p95 to Σ = 6: need 10.
    per_hour = [[0.1] * 12] * 18 + [[0.5] * 12] * 2
    assert only_replicas(replicas(per_hour), 20).iloc[0]["evidence"]["gpus_needed"] == 10


def test_diurnal_demand_gets_an_autoscaling_range() -> None:
    # 8 pods; 12 busy hours at Σ = 8 × 0.45 = 3.6, 12 quiet hours at Σ = 8 × 0.1 = 0.8.
    per_hour = [[0.45] * 8] * 12 + [[0.1] * 8] * 12
    rec = only_replicas(replicas(per_hour), 24).iloc[0]
    # need ⌈3.6 / 0.6⌉ = 6 of 8; hourly p95 3.6 ≥ 3 × p05 0.8 = 2.4: a swing.
    # min ⌈0.8 / 0.6⌉ = 2, max ⌈p99 3.6 / 0.6⌉ = 6.
    assert rec["suggested"] == "6 replicas × 1 × nvidia.com/gpu, autoscaled 2–6 replicas"
    assert rec["evidence"]["autoscale_min_replicas"] == 2
    assert rec["evidence"]["autoscale_max_replicas"] == 6
    # 8 × $7 = $56 per hour; saves 2 / 8.
    assert rec["est_monthly_savings_usd"] == pytest.approx(56 * 730 * 2 / 8)


def test_no_autoscaling_range_just_below_the_swing_ratio() -> None:
    # Quiet hours at Σ = 8 × 0.1625 = 1.3: 3.6 < 3 × 1.3 = 3.9, no swing.
    per_hour = [[0.45] * 8] * 12 + [[0.1625] * 8] * 12
    rec = only_replicas(replicas(per_hour), 24).iloc[0]
    assert rec["suggested"] == "6 replicas × 1 × nvidia.com/gpu"


def test_target_utilization_is_configurable() -> None:
    # Σ = 1.8 at a 0.9 target: need ⌈2.0⌉ = 2.
    rec = only_replicas(replicas([[0.15] * 12] * 20), 20, replica_target_util=0.9).iloc[0]
    assert rec["suggested"] == "2 replicas × 1 × nvidia.com/gpu"


def test_never_for_one_pod() -> None:
    assert only_replicas(replicas([[0.05]] * 20), 20).empty


def test_pods_that_follow_each_other_are_not_replicas() -> None:
    # Two pods of one workload, one after the other: never two at once.
    rows = replicas([[0.1, 0.1]] * 10)
    first = (rows["pod_id"] == 1) & (rows["ts"] >= T0 + 5 * HOUR)
    second = (rows["pod_id"] == 2) & (rows["ts"] < T0 + 5 * HOUR)
    assert only_replicas(rows[~first & ~second], 10).empty


def _eight_gpu_pods(util: float, pods: int, hours: int) -> pd.DataFrame:
    """``pods`` pods of 8 GPUs each, every GPU at ``util``."""
    rows: list[dict[str, Any]] = []
    for hour in range(hours):
        for pod in range(pods):
            for gpu in range(8):
                rows.append({
                    "gpu_id": pod * 8 + gpu + 1, "ts": T0 + hour * HOUR, "step_s": HOUR,
                    "util_ratio": util, "fb_used_mib": 70000.0, "fb_total_mib": 81920.0,
                    "pod_id": pod + 1, "pod": f"train-{pod}", "namespace": "ns",
                    "workload_kind": "Job", "workload": "train", "team": "t",
                    "attribution": "pod", "pod_gpu_count": 8,
                })  # fmt: skip
    return samples_frame(rows)


def test_replicas_of_several_gpus_count_whole_replicas() -> None:
    # 2 pods × 8 GPUs at 31 %: Σ = 16 × 0.31 = 4.96, need ⌈8.27⌉ = 9 GPUs = 2 replicas of 8:
    # nothing to save, though 9 < 16 GPUs.
    assert only_replicas(_eight_gpu_pods(0.31, 2, 10), 10).empty
    # 3 pods at 15 %: Σ = 24 × 0.15 = 3.6, need 6 GPUs = 1 replica of 8, of 3: saves 2/3.
    rec = only_replicas(_eight_gpu_pods(0.15, 3, 10), 10).iloc[0]
    assert (rec["current"], rec["suggested"]) == (
        "3 replicas × 8 × nvidia.com/gpu",
        "1 replica × 8 × nvidia.com/gpu",
    )
    assert rec["est_monthly_savings_usd"] == pytest.approx(24 * 7 * 730 * 2 / 3)


def test_no_range_when_min_and_max_agree() -> None:
    # 4 pods; busy hours Σ = 4 × 0.14 = 0.56, quiet Σ = 4 × 0.04 = 0.16: a swing (0.56 ≥ 0.48)
    # but ⌈0.16 / 0.6⌉ = ⌈0.56 / 0.6⌉ = 1: one replica, no range.
    per_hour = [[0.14] * 4] * 12 + [[0.04] * 4] * 12
    rec = only_replicas(replicas(per_hour), 24).iloc[0]
    assert rec["suggested"] == "1 replica × 1 × nvidia.com/gpu"
    assert "autoscale_min_replicas" not in rec["evidence"]
