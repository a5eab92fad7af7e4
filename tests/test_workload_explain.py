"""What explains a suggestion: merged distributions, projected states, and their figures."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest

from gpuwatch.analytics.explain import (
    EvidenceKeys,
    autoscale_band,
    bin_quantile,
    merged_histogram,
    projected_held,
    projected_state,
    workload_distributions,
)
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.app.evidence import column_heading, column_value, rest_text, value_text
from gpuwatch.app.figures_explain import (
    Mark,
    Projection,
    bar_width,
    distribution_figure,
    held_busy_figure,
)
from gpuwatch.domain.series import Histograms, StoredDetail

KEYS = EvidenceKeys.of(AnalyticsPolicy())
SCIENTIFIC = re.compile(r"\d[eE][+-]?\d")


def _hist(rows: list[int], bins: list[int], counts: list[int]) -> Histograms:
    return Histograms(np.array(rows), np.array(bins), np.array(counts))


def _detail() -> StoredDetail:
    """Three pod-hour rows: pod 10 (two hours) and pod 12, which is not the workload's."""
    pods = pd.DataFrame(
        {
            "hour_ts": [0, 3600, 0],
            "pod_id": [10, 10, 12],
            "gpu_model": ["A", "A", "A"],
            "data_s": [3600, 3600, 3600],
            "held_max": [1, 1, 1],
        }
    )
    empty = _hist([], [], [])
    return StoredDetail(
        pods=pods,
        pod_busy=empty,
        # row 0: 2 samples in bin 10, 1 in bin 20; row 1: 3 in bin 10, 1 in bin 40;
        # row 2 (pod 12): 100 samples in bin 200
        pod_util=_hist([0, 0, 1, 1, 2], [10, 20, 10, 40, 200], [2, 1, 3, 1, 100]),
        pod_fb_used=_hist([0, 1, 1, 2], [1000, 1000, 3000, 9000], [4, 1, 1, 7]),
        workloads=pd.DataFrame(),
        held=empty,
        util_sum=empty,
    )


def test_merging_keeps_the_rows_asked_for_and_adds_equal_bins() -> None:
    detail = _detail()
    bins, counts = merged_histogram(detail.pod_util, np.array([True, True, False]))
    assert bins.tolist() == [10, 20, 40]
    assert counts.tolist() == [5, 1, 1]
    bins, counts = merged_histogram(detail.pod_util, np.array([False, False, True]))
    assert (bins.tolist(), counts.tolist()) == ([200], [100])
    bins, counts = merged_histogram(detail.pod_util, np.array([False, False, False]))
    assert len(bins) == 0 and len(counts) == 0


def test_nearest_rank_of_a_merged_histogram() -> None:
    bins, counts = np.array([10, 20, 40]), np.array([5, 1, 1])
    # 7 samples: rank ⌈0.95 × 7⌉ = 7 → bin 40; ⌈0.5 × 7⌉ = 4 → bin 10; ⌈6/7 × 7⌉ = 6 → bin 20
    assert bin_quantile(bins, counts, 0.95) == 40
    assert bin_quantile(bins, counts, 0.5) == 10
    assert bin_quantile(bins, counts, 6 / 7) == 20
    assert math.isnan(bin_quantile(np.array([], int), np.array([], int), 0.95))


def test_workload_distributions_of_its_pods() -> None:
    dist = workload_distributions(_detail(), [10, 99], util_q=0.95, memory_q=0.99)
    # util bins of 0.5 point: 10 → 5 %, 20 → 10 %, 40 → 20 %
    assert dist.util_pct.tolist() == [5.0, 10.0, 20.0]
    assert dist.util_samples.tolist() == [5, 1, 1]
    assert dist.util_quantile_pct == 20.0
    # memory: 1000 MiB × 5, 3000 MiB × 1; p99 rank ⌈0.99 × 6⌉ = 6 → 3000
    assert dist.memory_mib.tolist() == [1000.0, 3000.0]
    assert dist.memory_samples.tolist() == [5, 1]
    assert dist.memory_quantile_mib == 3000.0
    none = workload_distributions(_detail(), [99], util_q=0.95, memory_q=0.99)
    assert none.util_samples.sum() == 0
    assert math.isnan(none.util_quantile_pct) and math.isnan(none.memory_quantile_mib)


def _rec(kind: str, evidence: dict[str, Any], **extra: Any) -> dict[str, Any]:
    base = {"kind": kind, "evidence": evidence, "gpu_model": "NVIDIA A100-SXM4-80GB"}
    return base | {"suggested": "x"} | extra


def test_projected_state_of_each_kind() -> None:
    # use_mig: 21 % ÷ (2/7) = 73.5 % of the slice; 15,000 MiB = 14.6 GiB of 20,000 = 19.5 GiB
    mig = {"p95_util_pct": 21.0, "p99_memory_mib": 15000.0, "profile_slices": 2}
    mig |= {"profile_memory_mib": 20000}
    assert projected_state(_rec("use_mig", mig), KEYS) == (
        "p95 util 21.0 % of the GPU ÷ (2/7) ≈ 73.5 % of the slice; p99 memory 14.6 of its 19.5 GiB"
    )
    # the A30 has 4 compute slices: 30 % ÷ (1/4) = 120 %
    a30 = _rec("use_mig", mig | {"p95_util_pct": 30.0, "profile_slices": 1}, gpu_model="A30")
    assert "÷ (1/4) ≈ 120.0 % of the slice" in projected_state(a30, KEYS)
    # share_gpu: 4 × 7 % = 28 %; 4 × 2,719 MiB = 10,876 MiB = 10.6 GiB of 15,360 MiB = 15.0 GiB
    share = {"replicas": 4, "p95_util_pct": 7.0, "p99_memory_mib": 2719.0}
    text = projected_state(_rec("share_gpu", share | {"gpu_memory_mib": 15360.0}), KEYS)
    assert text.startswith("4 pods per GPU: at most 28.0 % busy and 10.6 of 15.0 GiB used")
    # reduce_replicas: 5.02 ÷ 9 = 0.558 → 56 % each
    replicas = {"gpus_needed": 9, "util_sum_p95": 5.02, "gpus_held_p95": 16}
    assert projected_state(_rec("reduce_replicas", replicas), KEYS) == (
        "9 GPUs instead of 16: p95 Σ util 5.02 ÷ 9 ≈ 56 % each"
    )
    scaled = replicas | {"autoscale_min_replicas": 2, "autoscale_max_replicas": 6}
    assert projected_state(_rec("reduce_replicas", scaled), KEYS).endswith(
        "; autoscaled 2–6 replicas"
    )
    fewer = {"gpus_per_pod": 8, "busy_gpus_p95": 3}
    assert projected_state(_rec("reduce_gpu_count", fewer), KEYS).startswith(
        "3 GPUs per pod instead of 8: at p95 of its sample times 3 are busy, so 5 GPUs"
    )
    assert projected_state(_rec("reclaim_idle", {"idle_fraction": 0.97}), KEYS) == (
        "no GPU held: it was idle for 97.0 % of its GPU-hours"
    )


def test_projected_state_of_prices_and_memory() -> None:
    prices = {"current_usd_per_gpu_hour": 7.0, "suggested_usd_per_gpu_hour": 0.8}
    cheaper = _rec("cheaper_model", prices | {"p95_util_pct": 12.0}, suggested="RTX A6000")
    assert projected_state(cheaper, KEYS) == (
        "$0.80/GPU·h instead of $7.00/GPU·h; p95 util 12.0 % on the current GPU"
    )
    projected = _rec(
        "cheaper_model", prices | {"projected_p95_util_pct": 41.0}, suggested="RTX A6000"
    )
    assert projected_state(projected, KEYS).startswith("p95 util ≈ 41.0 % on RTX A6000; $0.80")
    spot = {"on_demand_usd_per_gpu_hour": 7.0, "spot_usd_per_gpu_hour": 3.0}
    assert projected_state(_rec("use_spot", spot), KEYS).startswith(
        "the same GPUs at $3.00/GPU·h on spot instead of $7.00/GPU·h"
    )
    # 78,000 of 81,920 MiB = 95.2 %; 76.2 of 80.0 GiB
    risk = {"p99_memory_mib": 78000.0, "gpu_memory_mib": 81920.0}
    assert projected_state(_rec("memory_risk", risk), KEYS).startswith(
        "p99 memory 76.2 of 80.0 GiB (95.2 %) today"
    )
    assert projected_state(_rec("unknown_kind", {}), KEYS) == ""
    missing = projected_state(_rec("use_mig", {"profile_slices": 1}), KEYS)
    assert "—" in missing and "nan" not in missing


def test_projected_state_follows_the_policy_quantile_keys() -> None:
    keys = EvidenceKeys.of(AnalyticsPolicy(util_quantile=0.9, memory_quantile=0.95))
    assert (keys.util, keys.memory, keys.busy) == (
        "p90_util_pct",
        "p95_memory_mib",
        "busy_gpus_p95",
    )
    evidence = {"p90_util_pct": 14.0, "p95_memory_mib": 1024.0, "profile_slices": 1}
    text = projected_state(_rec("use_mig", evidence | {"profile_memory_mib": 10240}), keys)
    assert "14.0 % of the GPU ÷ (1/7) ≈ 98.0 %" in text and "1.0 of its 10.0 GiB" in text


def test_projected_gpus_held() -> None:
    held = np.array([16.0, 8.0, 0.0, 4.5])
    fewer = projected_held("reduce_gpu_count", {"gpus_per_pod": 8, "busy_gpus_p95": 3}, held, KEYS)
    assert fewer.tolist() == [6.0, 3.0, 0.0, 4.5 * 3 / 8]
    replicas = projected_held("reduce_replicas", {"gpus_needed": 9}, held, KEYS)
    assert replicas.tolist() == [9.0, 8.0, 0.0, 4.5]
    assert np.isnan(projected_held("use_spot", {}, held, KEYS)).all()
    assert autoscale_band({"autoscale_min_replicas": 2, "autoscale_max_replicas": 6}) is None
    band = {"autoscale_min_replicas": 2, "autoscale_max_replicas": 6, "gpus_per_pod": 8}
    assert autoscale_band(band) == (16.0, 48.0)


def test_distribution_figure_marks_sit_at_the_values_passed() -> None:
    values = np.array([0.0, 0.5, 1.0, 99.5])
    counts = np.array([1, 1, 2, 4])
    marks = [Mark(42.25, "p95 42.2 %", "#000"), Mark(5.0, "idle", "#f00", "dot")]
    fig = distribution_figure(values, counts, 1.0, marks, "Utilization", "util (%)", "%")
    assert [s["x0"] for s in fig["layout"]["shapes"]] == [42.25, 5.0]
    assert [s["x1"] for s in fig["layout"]["shapes"]] == [42.25, 5.0]
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["p95 42.2 %", "idle"]
    bar = fig["data"][0]
    # bars [0, 1): 2 samples, [1, 2): 2, [99, 100): 4 of 8
    assert bar["x"] == [0.5, 1.5, 99.5]
    assert bar["y"] == [25.0, 25.0, 50.0]
    assert bar["customdata"][2] == "99–100 %"
    nan_mark = [Mark(float("nan"), "p95 —", "#000")]
    fig = distribution_figure(values, counts, 1.0, nan_mark, "Utilization", "util (%)", "%")
    assert fig["layout"]["shapes"] == []
    empty = distribution_figure(np.zeros(0), np.zeros(0), 1.0, marks, "Memory", "GiB", "GiB")
    assert empty["data"] == [] and "no stored samples" in empty["layout"]["annotations"][0]["text"]


def test_memory_bars_fit_the_gpu() -> None:
    assert bar_width(80.0) == 1.0  # 80 bars of 1 GiB
    assert bar_width(20.0) == 0.25
    assert bar_width(141.0) == 2.0  # 141 > 100 bars of 1 GiB


def test_held_busy_figure_draws_projections_dashed_and_the_band() -> None:
    hourly = pd.DataFrame(
        {"bucket_ts": [0, 3600, 10800], "held_gpus": [16.0, 8.0, 16.0], "busy_gpus": [5, 4, 5]}
    )
    after = Projection("after reduce_replicas", np.array([9.0, 8.0, 9.0]), "#7c3aed")
    fig = held_busy_figure(hourly, [after], (2.0, 6.0, "autoscaling range (2–6 GPUs)"))
    names = [t["name"] for t in fig["data"]]
    assert names[1] == "autoscaling range (2–6 GPUs)" and fig["data"][1]["fill"] == "tonexty"
    assert fig["data"][0]["y"] == [2.0, 2.0] and fig["data"][1]["y"] == [6.0, 6.0]
    dashed = fig["data"][-1]
    assert dashed["name"] == "after reduce_replicas" and dashed["line"]["dash"] == "dash"
    # the missing hour 7200 breaks the line
    assert dashed["y"] == [9.0, 8.0, None, 9.0]
    held = next(t for t in fig["data"] if t["name"].startswith("held"))
    assert held["y"] == [16.0, 8.0, None, 16.0]
    assert held_busy_figure(hourly.iloc[0:0])["data"] == []


def test_evidence_values_carry_units_and_never_scientific_notation() -> None:
    assert value_text("p95_util_pct", 93.5) == "93.5 %"
    assert value_text("p99_memory_mib", 74369.0) == "72.6 GiB"
    assert value_text("gpu_hours_observed", 1234567.25) == "1,234,567.2 GPU·h"
    assert value_text("cost_usd", 15436.24) == "$15,436"
    assert value_text("idle_fraction", 0.975) == "97.5 %"
    assert value_text("spot_usd_per_gpu_hour", 3.79075) == "$3.79/GPU·h"
    assert value_text("hours_observed", 168.0) == "168 h"
    assert value_text("some_new_key", 1.23456789e-7) == "0"
    assert value_text("some_new_key", 123456789.0) == "123,456,789"
    assert value_text("p99_memory_mib", None) == "—"
    assert column_heading("p95_util_pct") == "p95 util (%)"
    assert column_heading("p99_memory_mib") == "p99 memory (GiB)"
    assert column_heading("busy_gpus_p95") == "busy GPUs p95"
    assert column_heading("hours_observed") == "hours observed (h)"
    assert column_value("p99_memory_mib", {"p99_memory_mib": 62616.0}) == "61.1"
    assert column_value("hours_observed", {"hours_observed": 140.0}) == "140"
    rest = rest_text(
        {"p95_util_pct": 1.0, "gpu_hours_observed": 2.5e6, "pods": 3}, ["p95_util_pct"]
    )
    assert rest == "GPU-hours observed 2,500,000 GPU·h; pods 3"
    assert not SCIENTIFIC.search(rest)


@pytest.mark.parametrize("value", [1e-9, 3.2e5, 7.5e12])
def test_no_evidence_value_is_scientific(value: float) -> None:
    for key in ("p95_util_pct", "p99_memory_mib", "cost_usd", "util_sum_p95", "x_unknown"):
        assert not SCIENTIFIC.search(value_text(key, value))
