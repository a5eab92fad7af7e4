"""Recommendations (contract section 5): every kind triggers, stops just past its threshold,
and saves what a hand calculation says."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from gpuwatch.analytics.build import nodes_frame, pods_frame, samples_frame
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.analytics.recommend import recommend
from gpuwatch.domain.pricing import build_price_book

T0 = 1_794_182_400  # Monday 2026-11-09 00:00 UTC
HOUR = 3600
A100 = "NVIDIA A100-SXM4-80GB"
T4 = "Tesla T4"
BOOK = build_price_book(2.0, 0.6, {A100: (7.0, 3.0), T4: (2.0, None)}, {})
# A Lambda cluster: the cheapest model it offers with enough memory is the RTX A6000.
POLICY = AnalyticsPolicy(cluster_provider="lambda")


def workload(
    utils: list[list[float]],
    *,
    model: str = A100,
    kind: str = "Deployment",
    fb_used_mib: float | None = None,
    fb_total_mib: float | None = None,
    capacity_type: str = "on_demand",
    pod_gpu_count: int | None = None,
    node: str = "n1",
    attribution: str = "pod",
) -> pd.DataFrame:
    """One pod holding ``len(utils[0])`` GPUs, one sample per hour per GPU."""
    pod = {
        "pod_id": 1,
        "pod": "w-0",
        "namespace": "ns",
        "workload_kind": kind,
        "workload": "w",
        "team": "t",
        "attribution": attribution,
        "pod_gpu_count": pod_gpu_count if pod_gpu_count is not None else len(utils[0]),
    }
    rows: list[dict[str, Any]] = []
    for hour, per_gpu in enumerate(utils):
        for gpu, util in enumerate(per_gpu):
            rows.append(
                {
                    "gpu_id": gpu + 1,
                    "node": node,
                    "gpu_model": model,
                    "ts": T0 + hour * HOUR,
                    "step_s": HOUR,
                    "util_ratio": util,
                    "capacity_type": capacity_type,
                    "fb_used_mib": fb_used_mib,
                    "fb_total_mib": fb_total_mib,
                    **pod,
                }
            )
    return samples_frame(rows)  # fmt: skip


def run(samples: pd.DataFrame, hours: int, **kwargs: Any) -> pd.DataFrame:
    policy = kwargs.pop("policy", POLICY)
    return recommend(samples, None, BOOK, policy, T0, T0 + hours * HOUR, **kwargs)


def only(recs: pd.DataFrame, kind: str) -> pd.DataFrame:
    return recs[recs["kind"] == kind]


def constant(hours: int, util: float, gpus: int = 1) -> list[list[float]]:
    return [[util] * gpus for _ in range(hours)]


# reclaim_idle ------------------------------------------------------------------------------


def test_reclaim_idle_triggers_and_saves_all_of_the_cost() -> None:
    recs = only(run(workload(constant(24, 0.0)), 24), "reclaim_idle")
    assert len(recs) == 1
    rec = recs.iloc[0]
    assert rec["current"] == "1 × nvidia.com/gpu"
    assert rec["suggested"] == "0 × nvidia.com/gpu"
    # $7/h × 24 h over a 24 h window = $7 per window hour; × 730 h × 100 %.
    assert rec["est_monthly_savings_usd"] == pytest.approx(7 * 730)


def test_reclaim_idle_needs_4_observed_hours() -> None:
    assert only(run(workload(constant(3, 0.0)), 3), "reclaim_idle").empty
    recs = only(run(workload(constant(4, 0.0)), 4), "reclaim_idle")
    assert len(recs) == 1
    assert recs.iloc[0]["confidence"] == "low"  # under 24 h observed


def test_a_pod_idle_for_10_hours_is_told_to_give_the_gpu_back_only() -> None:
    samples = workload(constant(10, 0.0), fb_used_mib=1000, fb_total_mib=81920)
    recs = run(samples, 10)
    # use_mig and cheaper_model would also fire on these numbers; reclaiming makes them moot.
    assert recs["kind"].tolist() == ["reclaim_idle"]


def test_reclaim_idle_at_exactly_95_percent_idle() -> None:
    utils = constant(38, 0.0) + constant(2, 0.5)  # 38/40 = 95 % idle
    assert len(only(run(workload(utils), 40), "reclaim_idle")) == 1


def test_reclaim_idle_not_at_92_5_percent_idle() -> None:
    utils = constant(37, 0.0) + constant(3, 0.5)  # 37/40 = 92.5 % idle
    assert only(run(workload(utils), 40), "reclaim_idle").empty


def test_monthly_savings_divide_by_the_hours_with_data() -> None:
    # 24 idle hours at the start of a 48 h window: the data spans 24 h, so $168 / 24 h = $7
    # per hour, not $3.50 per window hour.
    recs = only(run(workload(constant(24, 0.0)), 48), "reclaim_idle")
    assert recs.iloc[0]["est_monthly_savings_usd"] == pytest.approx(7 * 730)
    assert recs.iloc[0]["evidence"]["data_hours"] == 24


# reduce_gpu_count --------------------------------------------------------------------------


def test_reduce_gpu_count_from_busy_gpu_p95() -> None:
    utils = [[0.9, 0.0, 0.0, 0.0]] * 19 + [[0.9, 0.9, 0.9, 0.9]]  # 4 busy at 1 of 20 times
    recs = only(run(workload(utils), 20), "reduce_gpu_count")
    assert len(recs) == 1
    rec = recs.iloc[0]
    assert (rec["current"], rec["suggested"]) == ("4 × nvidia.com/gpu", "1 × nvidia.com/gpu")
    # 4 GPUs × $7 = $28 per window hour; saves (4 − 1)/4.
    assert rec["est_monthly_savings_usd"] == pytest.approx(28 * 730 * 0.75)
    assert rec["evidence"]["busy_gpus_p95"] == 1


def test_reduce_gpu_count_not_when_p95_needs_all_gpus() -> None:
    utils = [[0.9, 0.0, 0.0, 0.0]] * 18 + [[0.9, 0.9, 0.9, 0.9]] * 2  # 4 busy at 2 of 20
    assert only(run(workload(utils), 20), "reduce_gpu_count").empty


def test_reduce_gpu_count_never_for_one_gpu_pods() -> None:
    assert only(run(workload(constant(30, 0.01)), 30), "reduce_gpu_count").empty


# use_mig ------------------------------------------------------------------------------------


def test_use_mig_picks_the_smallest_fitting_profile() -> None:
    samples = workload(constant(24, 0.2), fb_used_mib=15000, fb_total_mib=81920)
    recs = only(run(samples, 24), "use_mig")
    assert len(recs) == 1
    rec = recs.iloc[0]
    # 15000 × 1.15 = 17250 MiB: 1g.20gb fits the memory but 1/7 < 0.2 util; 2g.20gb fits both.
    assert rec["suggested"] == "nvidia.com/mig-2g.20gb"
    assert rec["est_monthly_savings_usd"] == pytest.approx(7 * 730 * 5 / 7)


def test_use_mig_at_util_exactly_four_sevenths() -> None:
    samples = workload(constant(24, 4 / 7), fb_used_mib=1000, fb_total_mib=81920)
    assert only(run(samples, 24), "use_mig").iloc[0]["suggested"] == "nvidia.com/mig-4g.40gb"


def test_use_mig_not_when_only_the_whole_gpu_fits() -> None:
    samples = workload(constant(24, 0.58), fb_used_mib=1000, fb_total_mib=81920)
    assert only(run(samples, 24), "use_mig").empty


def test_use_mig_not_when_memory_needs_the_whole_gpu() -> None:
    samples = workload(constant(24, 0.1), fb_used_mib=70000, fb_total_mib=81920)
    assert only(run(samples, 24), "use_mig").empty


def test_use_mig_on_a_node_that_says_mig_capable() -> None:
    samples = workload(constant(24, 0.1), model="NVIDIA Future GPU", fb_used_mib=5000,
                       fb_total_mib=65536, node="m1")  # fmt: skip
    nodes = nodes_frame([{"node": "m1", "gpu_model": "NVIDIA Future GPU", "mig_capable": True}])
    recs = only(run(samples, 24, nodes=nodes), "use_mig")
    # 65536 MiB in eighths: 1g gets 8192 MiB ≥ 5750 needed, and 1/7 ≥ 0.1 util.
    assert recs.iloc[0]["suggested"] == "nvidia.com/mig-1g.8gb"
    assert only(run(samples, 24), "use_mig").empty


# share_gpu ----------------------------------------------------------------------------------


def test_share_gpu_on_a_model_without_mig() -> None:
    samples = workload(constant(24, 0.25), model=T4, fb_used_mib=5000, fb_total_mib=15360)
    recs = only(run(samples, 24), "share_gpu")
    assert len(recs) == 1
    rec = recs.iloc[0]
    # 5750 MiB needed: 2 fit in 15360 MiB; util allows 4: R = 2, saves 1 − 1/2 of $2/h.
    assert rec["suggested"] == "nvidia.com/gpu.shared (time-sliced, 2 replicas)"
    assert rec["est_monthly_savings_usd"] == pytest.approx(2 * 730 * 0.5)


def test_share_gpu_not_above_30_percent_util() -> None:
    samples = workload(constant(24, 0.31), model=T4, fb_used_mib=5000, fb_total_mib=15360)
    assert only(run(samples, 24), "share_gpu").empty


def test_share_gpu_not_when_memory_exceeds_half_the_gpu() -> None:
    samples = workload(constant(24, 0.25), model=T4, fb_used_mib=6700, fb_total_mib=15360)
    assert only(run(samples, 24), "share_gpu").empty


def test_share_gpu_never_on_a_mig_capable_model() -> None:
    samples = workload(constant(24, 0.25), fb_used_mib=5000, fb_total_mib=81920)
    assert only(run(samples, 24), "share_gpu").empty


# cheaper_model ------------------------------------------------------------------------------


def test_cheaper_model_on_demand() -> None:
    samples = workload(constant(24, 0.1), fb_used_mib=10000, fb_total_mib=81920)
    rec = only(run(samples, 24), "cheaper_model").iloc[0]
    # 11500 MiB needed; the cheapest on-demand model with that much memory is the RTX A6000
    # at $0.80/h (T4 $0.978, L4 $0.8048): saves 1 − 0.80/7.
    assert (rec["current"], rec["suggested"]) == (A100, "NVIDIA RTX A6000")
    assert rec["est_monthly_savings_usd"] == pytest.approx(7 * 730 * (1 - 0.8 / 7))


def test_cheaper_model_compares_spot_with_spot() -> None:
    samples = workload(
        constant(24, 0.1), fb_used_mib=10000, fb_total_mib=81920, capacity_type="spot"
    )
    rec = only(run(samples, 24), "cheaper_model").iloc[0]
    # Current spot price $3 (configured). RTX A6000 spot = 0.80 × (1 − 0.6) = $0.32,
    # below the T4's $0.36235 and the L4's $0.4155.
    assert rec["suggested"] == "NVIDIA RTX A6000"
    assert rec["evidence"]["current_usd_per_gpu_hour"] == pytest.approx(3.0)
    assert rec["est_monthly_savings_usd"] == pytest.approx(3 * 730 * (1 - 0.32 / 3))


def test_cheaper_model_not_above_20_percent_util() -> None:
    samples = workload(constant(24, 0.21), fb_used_mib=10000, fb_total_mib=81920)
    assert only(run(samples, 24), "cheaper_model").empty


def test_cheaper_model_only_among_what_the_provider_offers() -> None:
    samples = workload(constant(24, 0.1), fb_used_mib=10000, fb_total_mib=81920)
    aws = AnalyticsPolicy(cluster_provider="aws")
    rec = only(run(samples, 24, policy=aws), "cheaper_model").iloc[0]
    # The Lambda-only RTX A6000 ($0.80) is never suggested on AWS: the L4 at $0.8048 is,
    # projected at 10 % × 1.0 / 0.388 = 25.77 %.
    assert rec["suggested"] == "NVIDIA L4"
    assert rec["evidence"]["projected_p95_util_pct"] == pytest.approx(25.77, abs=0.01)
    assert rec["evidence"]["providers"] == ["aws"]
    assert rec["est_monthly_savings_usd"] == pytest.approx(7 * 730 * (1 - 0.8048 / 7))


def test_cheaper_model_none_on_premises_unless_listed() -> None:
    samples = workload(constant(24, 0.1), fb_used_mib=10000, fb_total_mib=81920)
    assert only(run(samples, 24, policy=AnalyticsPolicy()), "cheaper_model").empty
    listed = AnalyticsPolicy(cheaper_models=("NVIDIA-L4",))  # any spelling of the model
    assert only(run(samples, 24, policy=listed), "cheaper_model").iloc[0]["suggested"] == (
        "NVIDIA L4"
    )


def test_a_slow_model_is_never_suggested_to_a_busy_workload() -> None:
    samples = workload(constant(24, 0.4), fb_used_mib=10000, fb_total_mib=81920)
    policy = AnalyticsPolicy(cluster_provider="aws", cheaper_max_util_pct=50)
    rec = only(run(samples, 24, policy=policy), "cheaper_model").iloc[0]
    # 40 % on an A100 would be 40 / 0.388 = 103 % of an L4 and 192 % of a T4: the L40S
    # (1.16, 34.5 %) at $1.861 is the cheapest where the work fits.
    assert rec["suggested"] == "NVIDIA L40S"
    assert rec["evidence"]["projected_p95_util_pct"] == pytest.approx(34.48, abs=0.01)


def test_cheaper_model_projection_threshold_is_configurable() -> None:
    samples = workload(constant(24, 0.1), fb_used_mib=10000, fb_total_mib=81920)
    # On AWS the L4 projects to 25.77 %, the T4 to 48.08 % and the A10G to 44.6 %: at a 25 %
    # limit none fits; the L40S (8.62 %, $1.861) is the cheapest that does (the V100 too,
    # at 24.9 %, but for $3.06).
    strict = AnalyticsPolicy(cluster_provider="aws", cheaper_max_projected_util_pct=25)
    rec = only(run(samples, 24, policy=strict), "cheaper_model").iloc[0]
    assert rec["suggested"] == "NVIDIA L40S"


def test_cheaper_model_needs_a_model_with_enough_memory() -> None:
    # 76000 × 1.15 = 87400 MiB: only models above 80 GiB fit, and none is cheaper than $7.
    samples = workload(constant(24, 0.1), fb_used_mib=76000, fb_total_mib=81920)
    assert only(run(samples, 24), "cheaper_model").empty


# use_spot -----------------------------------------------------------------------------------


def test_use_spot_for_a_job_on_demand() -> None:
    rec = only(run(workload(constant(24, 0.9), kind="Job"), 24), "use_spot").iloc[0]
    assert (rec["current"], rec["suggested"]) == ("on-demand capacity", "spot capacity")
    assert rec["est_monthly_savings_usd"] == pytest.approx(7 * 730 * (1 - 3 / 7))


def test_use_spot_for_a_cronjob() -> None:
    assert len(only(run(workload(constant(24, 0.9), kind="CronJob"), 24), "use_spot")) == 1


def test_use_spot_not_for_a_deployment_or_a_job_already_on_spot() -> None:
    assert only(run(workload(constant(24, 0.9)), 24), "use_spot").empty
    on_spot = workload(constant(24, 0.9), kind="Job", capacity_type="spot")
    assert only(run(on_spot, 24), "use_spot").empty


# memory_risk --------------------------------------------------------------------------------


def test_memory_risk_at_95_percent_of_memory() -> None:
    samples = workload(constant(24, 0.9), fb_used_mib=78000, fb_total_mib=81920)  # 95.2 %
    rec = only(run(samples, 24), "memory_risk").iloc[0]
    assert rec["est_monthly_savings_usd"] == 0
    assert rec["current"] == "78000 MiB used of 81920 MiB"


def test_memory_risk_not_at_94_percent() -> None:
    samples = workload(constant(24, 0.9), fb_used_mib=77000, fb_total_mib=81920)  # 94.0 %
    assert only(run(samples, 24), "memory_risk").empty


def test_memory_total_falls_back_to_the_model_size() -> None:
    samples = workload(constant(24, 0.9), model=T4, fb_used_mib=15000)  # T4: 15360 MiB
    assert len(only(run(samples, 24), "memory_risk")) == 1


# confidence, evidence, order, configuration -------------------------------------------------


@pytest.mark.parametrize(
    ("hours", "attribution", "expected"),
    [(168, "pod", "high"), (167, "pod", "medium"), (24, "pod", "medium"), (23, "pod", "low"),
     (168, "node", "low")],
)  # fmt: skip
def test_confidence(hours: int, attribution: str, expected: str) -> None:
    samples = workload(constant(hours, 0.9), kind="Job", attribution=attribution)
    assert only(run(samples, hours), "use_spot").iloc[0]["confidence"] == expected


def test_evidence_carries_the_numbers() -> None:
    samples = workload(constant(24, 0.2), fb_used_mib=15000, fb_total_mib=81920)
    evidence = only(run(samples, 24), "use_mig").iloc[0]["evidence"]
    assert evidence["hours_observed"] == 24
    assert evidence["p95_util_pct"] == pytest.approx(20)
    assert evidence["p99_memory_mib"] == 15000
    assert evidence["gpu_memory_mib"] == 81920
    assert evidence["attribution"] == "pod"


def test_sorted_by_savings_descending() -> None:
    # 6 % busy: above the idle threshold (no reclaim_idle), low enough for the other kinds.
    samples = workload(constant(24, 0.06), kind="Job", fb_used_mib=1000, fb_total_mib=81920)
    recs = run(samples, 24)
    savings = recs["est_monthly_savings_usd"].tolist()
    assert savings == sorted(savings, reverse=True)
    assert {"use_mig", "cheaper_model", "use_spot"} <= set(recs["kind"])


def test_triggers_are_configurable() -> None:
    strict = AnalyticsPolicy(share_max_util_pct=20)
    samples = workload(constant(24, 0.25), model=T4, fb_used_mib=5000, fb_total_mib=15360)
    assert only(run(samples, 24, policy=strict), "share_gpu").empty


def test_resource_name_comes_from_the_pods_frame() -> None:
    pods = pods_frame([{"pod_id": 1, "pod": "w-0", "namespace": "ns", "workload_kind": "Deployment",
                        "workload": "w", "gpu_resource": "nvidia.com/gpu.shared"}])  # fmt: skip
    recs = recommend(workload(constant(24, 0.0)), pods, BOOK, POLICY, T0, T0 + 24 * HOUR)
    assert only(recs, "reclaim_idle").iloc[0]["current"] == "1 × nvidia.com/gpu.shared"


def test_no_samples_no_recommendations() -> None:
    recs = run(workload(constant(24, 0.0)).iloc[:0], 24)
    assert recs.empty
    assert "est_monthly_savings_usd" in recs.columns


def test_the_worked_example_of_the_docs() -> None:
    samples = workload(constant(24, 0.2), kind="Job", fb_used_mib=15000, fb_total_mib=81920)
    recs = run(samples, 24)
    got = [(r.kind, round(r.est_monthly_savings_usd, 2), r.confidence) for r in recs.itertuples()]
    assert got == [
        ("cheaper_model", 4526.0, "medium"),
        ("use_mig", 3650.0, "medium"),
        ("use_spot", 2920.0, "medium"),
    ]


def test_policy_mirrors_the_configuration_defaults() -> None:
    from dataclasses import fields

    from gpuwatch.config import RecommendationPolicy, Thresholds

    recommendations = RecommendationPolicy().model_dump()
    thresholds = Thresholds().model_dump()
    assert set(recommendations) <= {f.name for f in fields(AnalyticsPolicy)}
    assert AnalyticsPolicy.from_mappings(thresholds, recommendations) == AnalyticsPolicy()
    custom = AnalyticsPolicy.from_mappings({"idle_util_pct": 10, "temperature_c": 80}, {})
    assert custom.idle_threshold_ratio == pytest.approx(0.1)


def test_a_week_of_data_ending_now_is_high_confidence() -> None:
    # `recommend --start 7d` at 00:30 reads from 00:30 a week earlier; the collector's last
    # sample is from 00:10, so the samples cover 167.83 h. The workload has a sample in
    # every clock hour from 00:00 on day 0 to 00:00 on day 7: 169 hours observed ≥ 168.
    start, end = T0 + 1800, T0 + 7 * 86400 + 1800
    rows = workload([[0.9]] * 1007, kind="Job")
    rows["ts"] = start + 600 * pd.Series(range(1007))
    rows["step_s"] = 600
    rec = only(recommend(rows, None, BOOK, POLICY, start, end), "use_spot").iloc[0]
    assert rec["evidence"]["hours_observed"] == 169
    assert rec["confidence"] == "high"


# Workloads holding GPUs through ResourceClaims (DRA) ----------------------------------------


def _claimed(samples: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The workload's samples and its pod as held through a ResourceClaim of gpu.nvidia.com."""
    pods = pods_frame(
        [{"pod_id": 1, "pod": "w-0", "namespace": "ns", "workload_kind": "Deployment",
          "workload": "w", "gpu_resource": "gpu.nvidia.com", "allocation": "dra"}]
    )  # fmt: skip
    return samples.assign(allocation="dra").astype({"allocation": "string"}), pods


def test_a_claimed_gpu_is_suggested_as_a_mig_claim_request() -> None:
    samples, pods = _claimed(workload(constant(24, 0.2), fb_used_mib=15000, fb_total_mib=81920))
    recs = recommend(samples, pods, BOOK, POLICY, T0, T0 + 24 * HOUR)
    rec = only(recs, "use_mig").iloc[0]
    assert rec["current"] == "1 × gpu.nvidia.com (ResourceClaim)"
    assert rec["suggested"] == (
        "ResourceClaim request: deviceClassName mig.nvidia.com, "
        'selector device.attributes["gpu.nvidia.com"].profile == "2g.20gb"'
    )
    assert rec["allocation"] == "dra"
    assert rec["est_monthly_savings_usd"] == pytest.approx(7 * 730 * 5 / 7)


def test_an_idle_claim_is_reclaimed_in_claim_terms() -> None:
    samples, pods = _claimed(workload(constant(6, 0.0)))
    rec = only(recommend(samples, pods, BOOK, POLICY, T0, T0 + 6 * HOUR), "reclaim_idle").iloc[0]
    assert (rec["current"], rec["suggested"]) == (
        "1 × gpu.nvidia.com (ResourceClaim)",
        "0 × gpu.nvidia.com (ResourceClaim)",
    )


def test_device_plugin_workloads_say_so() -> None:
    rec = only(run(workload(constant(6, 0.0)), 6), "reclaim_idle").iloc[0]
    assert rec["allocation"] == "device-plugin"
    assert rec["current"] == "1 × nvidia.com/gpu"


def _efficiency_recs(**change: Any) -> pd.DataFrame:
    from gpuwatch.analytics.health_sums import health_sums
    from tests.health_rows import END, H0, PRICES, example, samples_of

    health = example()
    for column, value in change.items():
        health[column] = value
    return recommend(samples_of(health), None, PRICES, AnalyticsPolicy(), H0, END,
                     health_sums=health_sums(health))  # fmt: skip


def test_investigate_efficiency_states_the_dollars_at_stake_and_the_cause() -> None:
    recs = _efficiency_recs()
    found = recs[recs["kind"] == "investigate_efficiency"].set_index("workload")
    assert sorted(found.index) == ["batch", "serve", "train"]  # not the GPU_UTIL-only notebook
    serve = found.loc["serve"]
    assert serve["est_monthly_savings_usd"] == 0.0
    assert serve["current"] == "engine 80 % active, SM 10 %, tensor 0 % (memory-bound)"
    assert serve["suggested"].startswith("profile memory traffic")
    evidence = serve["evidence"]
    assert {k: evidence[k] for k in (
        "cause", "inefficient_gpu_hours", "inefficient_cost_usd", "at_stake_monthly_usd",
        "engine_active_pct", "sm_active_pct", "tensor_active_pct", "dram_active_pct",
        "throttled_pct")} == {
        "cause": "memory-bound", "inefficient_gpu_hours": 3.0, "inefficient_cost_usd": 12.0,
        # $12 over the 3 hours with data × 730
        "at_stake_monthly_usd": 2920.0,
        "engine_active_pct": 80.0, "sm_active_pct": 10.0, "tensor_active_pct": 0.0,
        "dram_active_pct": 60.0, "throttled_pct": 16.7,
    }  # fmt: skip
    assert found.loc["train", "evidence"]["cause"] == "input-bound"
    assert found.loc["train", "evidence"]["throttled_pct"] is None  # no clock-event readings
    assert found.loc["batch", "evidence"]["cause"] == "no tensor cores used"


def test_investigate_efficiency_ranks_after_every_saving() -> None:
    recs = _efficiency_recs()
    kinds = list(recs["kind"])
    assert kinds.index("investigate_efficiency") > max(
        i for i, k in enumerate(kinds) if k != "investigate_efficiency"
    )


def test_no_investigate_efficiency_without_profiling_readings() -> None:
    recs = _efficiency_recs(sm_data_s=0.0, tensor_data_s=0.0, dram_data_s=0.0)
    assert "investigate_efficiency" not in set(recs["kind"])


def test_no_investigate_efficiency_for_a_healthy_busy_job() -> None:
    # every job's SM at 60 %, tensor pipes at 30 %: busy and efficient
    recs = _efficiency_recs(sm_active_s=2160.0, tensor_active_s=1080.0)
    assert "investigate_efficiency" not in set(recs["kind"])


def test_no_investigate_efficiency_without_a_health_frame() -> None:
    from tests.health_rows import END, H0, PRICES, example, samples_of

    recs = recommend(samples_of(example()), None, PRICES, AnalyticsPolicy(), H0, END)
    assert "investigate_efficiency" not in set(recs["kind"])


def test_investigate_efficiency_in_every_format() -> None:
    import csv
    import io
    import json

    from gpuwatch.analytics.render import render_csv, render_json, render_table

    recs = _efficiency_recs()
    records = [r for r in json.loads(render_json(recs)) if r["kind"] == "investigate_efficiency"]
    serve = next(r for r in records if r["workload"] == "serve")
    assert serve["est_monthly_savings_usd"] == 0.0
    assert serve["evidence"]["inefficient_cost_usd"] == 12.0
    rows = list(csv.DictReader(io.StringIO(render_csv(recs))))
    cells = next(r for r in rows if r["workload"] == "serve" and r["kind"].startswith("invest"))
    assert cells["est_monthly_savings_usd"] == "0.00"
    assert json.loads(cells["evidence"])["cause"] == "memory-bound"
    line = next(x for x in render_table(recs).splitlines() if x.endswith("/serve"))
    assert line.split()[:2] == ["0.00", "investigate_efficiency"]
