"""The weekly waste report CSV (contract section 4): golden output and its rules."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from gpuwatch.analytics.build import samples_frame
from gpuwatch.analytics.costing import prepare
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.analytics.summary import summarize
from gpuwatch.domain.pricing import build_price_book
from gpuwatch.report.weekly import (
    HEADER,
    iso_week_bounds,
    last_complete_week,
    neutralise,
    render_csv,
    weekly_report,
)

WEEK_START = 1_794_182_400  # Monday 2026-11-09 00:00 UTC, ISO week 2026-W46
HOUR = 3600
MODEL = "NVIDIA Test GPU"  # not in the price table: the default price applies
BOOK = build_price_book(1.0, 0.6, {}, {})
POLICY = AnalyticsPolicy()


def _samples(gpu_id: int, node: str, hours: int, util: float, **pod: Any) -> list[dict[str, Any]]:
    return [
        {"gpu_id": gpu_id, "node": node, "gpu_model": MODEL, "ts": WEEK_START + h * HOUR,
         "step_s": HOUR, "util_ratio": util, **pod}
        for h in range(hours)
    ]  # fmt: skip


def week_samples() -> pd.DataFrame:
    train = {
        "pod_id": 1,
        "pod": "train-x",
        "namespace": "ml",
        "workload_kind": "Job",
        "workload": "train",
        "team": "research",
        "pod_gpu_count": 1,
    }
    api = {
        "pod_id": 2,
        "pod": "api-1",
        "namespace": "web",
        "workload_kind": "Deployment",
        "workload": "api",
        "team": "product",
        "pod_gpu_count": 1,
    }
    evil = {"pod_id": 3, "pod": "@evil", "namespace": "lab", "team": "+t"}
    late = {
        "gpu_id": 1,
        "node": "n1",
        "gpu_model": MODEL,
        "ts": WEEK_START + 7 * 86400,
        "step_s": HOUR,
        "util_ratio": 0.0,
        **train,
    }
    return samples_frame([
        *_samples(1, "n1", 30, 0.0, **train),
        *_samples(2, "n1", 10, 1.0, **api),
        *_samples(3, "n2", 5, 0.0),
        *_samples(4, "n2", 1, 0.5, **evil),
        late,
    ])  # fmt: skip


GOLDEN = (
    "week_start,cluster,team,namespace,workload_kind,workload,gpu_model,gpus_requested,"
    "allocated_gpu_hours,used_gpu_hours,efficiency_pct,idle_gpu_hours,allocated_cost_usd,"
    "idle_cost_usd,unused_cost_usd,recommendation,est_monthly_savings_usd,allocation,queue,"
    "stalled_gpu_hours,stalled_cost_usd,throttled_gpu_hours,failing_gpu_hours,failing_cost_usd,"
    "sm_active_pct,tensor_active_pct,unallocated_gpu_hours,unallocated_cost_usd\n"
    # $30 over the 30 hours with data (hours 0-29 of the week) × 730 = $730.00
    "2026-11-09,c1,research,ml,Job,train,NVIDIA Test GPU,1,30.00,0.00,0.0,30.00,30.00,30.00,"
    "30.00,reclaim_idle,730.00,device-plugin,,,,,,,,,0.00,0.00\n"
    # unallocated capacity: only in the unallocated columns
    "2026-11-09,c1,,__idle__,Unallocated,n2,NVIDIA Test GPU,0,0.00,0.00,0.0,0.00,0.00,0.00,"
    "0.00,,0.00,device-plugin,,,,,,,,,5.00,5.00\n"
    "2026-11-09,c1,'+t,lab,Pod,'@evil,NVIDIA Test GPU,1,1.00,0.50,50.0,0.00,1.00,0.00,0.50,,"
    "0.00,device-plugin,,,,,,,,,0.00,0.00\n"
    "2026-11-09,c1,product,web,Deployment,api,NVIDIA Test GPU,1,10.00,10.00,100.0,0.00,10.00,"
    "0.00,0.00,,0.00,device-plugin,,,,,,,,,0.00,0.00\n"
)


def test_golden_csv() -> None:
    frame = weekly_report(week_samples(), None, None, BOOK, POLICY, WEEK_START)
    assert render_csv(frame) == GOLDEN


def test_reclaim_saving_is_cost_per_hour_of_data_times_730() -> None:
    frame = weekly_report(week_samples(), None, None, BOOK, POLICY, WEEK_START)
    train = frame[frame["workload"] == "train"].iloc[0]
    # $1/h × 30 h over the 30 hours the week's data spans (hours 0 to 29), × 730.
    assert train["est_monthly_savings_usd"] == 730.0


def test_each_column_sums_to_the_fleet_total() -> None:
    samples = week_samples()
    frame = weekly_report(samples, None, None, BOOK, POLICY, WEEK_START)
    # By hand: train 30 idle hours, api 10 busy hours, @evil 1 hour at 50 %, all at $1/h;
    # GPU 3 on n2 unheld for 5 hours.
    names = ["allocated_gpu_hours", "idle_gpu_hours", "allocated_cost_usd", "idle_cost_usd",
             "unused_cost_usd", "unallocated_gpu_hours", "unallocated_cost_usd"]  # fmt: skip
    sums = frame[names].sum()
    assert sums.to_dict() == {
        "allocated_gpu_hours": 41.0, "idle_gpu_hours": 30.0, "allocated_cost_usd": 41.0,
        "idle_cost_usd": 30.0, "unused_cost_usd": 30.5, "unallocated_gpu_hours": 5.0,
        "unallocated_cost_usd": 5.0,
    }  # fmt: skip
    # and the same as the cost model's fleet totals
    in_week = samples[samples["ts"] < WEEK_START + 7 * 86400]
    total = summarize(prepare(in_week, None, BOOK), [], POLICY.idle_threshold_ratio).iloc[0]
    for name in ("allocated_gpu_hours", "idle_cost_usd", "unallocated_cost_usd"):
        assert sums[name] == pytest.approx(total[name])


def test_empty_week_is_the_header_alone() -> None:
    frame = weekly_report(week_samples(), None, None, BOOK, POLICY, WEEK_START - 7 * 86400)
    assert render_csv(frame) == ",".join(HEADER) + "\n"


def test_week_start_must_be_a_monday_midnight() -> None:
    with pytest.raises(ValueError, match="not a Monday 00:00 UTC"):
        weekly_report(week_samples(), None, None, BOOK, POLICY, WEEK_START + HOUR)


def test_idle_cost_ties_sort_by_keys_whatever_the_input_order() -> None:
    samples = week_samples()
    shuffled = samples.sample(frac=1.0, random_state=7).reset_index(drop=True)
    a = render_csv(weekly_report(samples, None, None, BOOK, POLICY, WEEK_START))
    b = render_csv(weekly_report(shuffled, None, None, BOOK, POLICY, WEEK_START))
    assert a == b


@pytest.mark.parametrize("text", ["=1+1", "+t", "-x", "@sum", "\tx", "\rx"])
def test_formula_starts_are_neutralised(text: str) -> None:
    assert neutralise(text) == "'" + text


def test_plain_text_is_left_alone() -> None:
    assert neutralise("train") == "train"
    assert neutralise("__idle__") == "__idle__"


def test_iso_week_bounds() -> None:
    assert iso_week_bounds("2026-W46") == (WEEK_START, WEEK_START + 7 * 86400)
    start, _ = iso_week_bounds("2026-W01")
    assert pd.Timestamp(start, unit="s").isoformat() == "2025-12-29T00:00:00"


@pytest.mark.parametrize("bad", ["2026-46", "2026-W54", "W46", ""])
def test_iso_week_bounds_rejects_bad_weeks(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid week"):
        iso_week_bounds(bad)


def test_last_complete_week() -> None:
    # Wednesday of W47: the last complete week is W46.
    assert last_complete_week(WEEK_START + 9 * 86400) == "2026-W46"
    # Monday 00:00 of W47 exactly: W46 has just ended.
    assert last_complete_week(WEEK_START + 7 * 86400) == "2026-W46"
    # One second earlier W46 is still running.
    assert last_complete_week(WEEK_START + 7 * 86400 - 1) == "2026-W45"


def test_gpus_requested_is_the_most_held_at_once_and_memory_risk_is_named() -> None:
    def pod(pod_id: int) -> dict[str, Any]:
        return {"pod_id": pod_id, "pod": f"srv-{pod_id}", "namespace": "web",
                "workload_kind": "Deployment", "workload": "srv", "team": "product",
                "fb_used_mib": 15000.0, "fb_total_mib": 15360.0}  # fmt: skip

    rows = [
        *_samples(1, "n1", 10, 0.9, **pod(1)),  # hours 0-9
        *[r | {"ts": r["ts"] + 5 * HOUR} for r in _samples(2, "n1", 10, 0.9, **pod(2))],
    ]
    frame = weekly_report(samples_frame(rows), None, None, BOOK, POLICY, WEEK_START)
    row = frame.iloc[0]
    assert (row["workload"], row["gpus_requested"]) == ("srv", 2)
    assert (row["recommendation"], row["est_monthly_savings_usd"]) == ("memory_risk", 0.0)
    assert row["allocated_gpu_hours"] == 20.0


# The health columns (contract section 7) from the worked example of
# docs/cost-model.md#health-and-efficiency: a week starting Monday 2025-11-17.
HEALTH_GOLDEN_ROWS = {
    # throttled: empty (no clock-event readings); failing 1.75 h × $4 from the XID at 00:15.
    ("train", "NVIDIA A100-SXM4-80GB"):
        "use_spot,1752.00,device-plugin,,,,,1.75,7.00,20.0,5.0,0.00,0.00",
    # throttled half of one hour; no saving kind fires, so the efficiency finding is named.
    ("serve", "NVIDIA A100-SXM4-80GB"):
        "investigate_efficiency,0.00,device-plugin,,,,0.50,0.00,0.00,10.0,0.0,0.00,0.00",
    ("batch", "NVIDIA H100 80GB HBM3"):
        "use_spot,876.00,device-plugin,,,,,0.00,0.00,60.0,0.0,0.00,0.00",
    # utilization from GPU_UTIL only: no SM or tensor reading, no efficiency finding.
    ("notebook", "Tesla T4"): ",0.00,time-slice,,,,,0.00,0.00,,,0.00,0.00",
    # unallocated capacity: allocated figures only, 0 hours and no percentages; the H100's
    # hour held by the exporter's own pod, and the T4's free slot (1.5 GPU-hours at $3).
    ("n2", "NVIDIA H100 80GB HBM3"): ",0.00,device-plugin,,,,0.00,0.00,0.00,,,1.00,3.00",
    ("n2", "Tesla T4"): ",0.00,time-slice,,,,0.00,0.00,0.00,,,1.50,4.50",
}  # fmt: skip


def _health_week(with_health: bool = True) -> pd.DataFrame:
    from gpuwatch.analytics.health_sums import health_sums
    from tests.health_rows import H0, PRICES, example, samples_of

    health = example()
    given = health_sums(health) if with_health else None
    return weekly_report(samples_of(health), None, None, PRICES, POLICY, H0, health_sums=given)


def test_health_columns_from_the_health_roll_up() -> None:
    lines = render_csv(_health_week()).splitlines()[1:]
    rows = {(line.split(",")[5], line.split(",")[6]): line for line in lines}
    assert set(rows) == set(HEALTH_GOLDEN_ROWS)
    for key, tail in HEALTH_GOLDEN_ROWS.items():
        assert rows[key].endswith("," + tail), key


def test_health_columns_sum_to_the_allocated_fleet_totals() -> None:
    frame = _health_week()
    sums = frame[["throttled_gpu_hours", "failing_gpu_hours", "failing_cost_usd"]].sum()
    assert sums.to_dict() == {"throttled_gpu_hours": 0.5, "failing_gpu_hours": 1.75,
                              "failing_cost_usd": 7.0}  # fmt: skip


def test_without_health_readings_the_health_columns_stay_empty() -> None:
    for line in render_csv(_health_week(with_health=False)).splitlines()[1:]:
        assert line.split(",")[21:26] == ["", "", "", "", ""]


def test_a_week_without_health_roll_ups_leaves_the_health_columns_empty() -> None:
    from gpuwatch.domain.frames import HEALTH_SUM_COLUMNS, empty_frame
    from tests.health_rows import H0, PRICES, example, samples_of

    empty = empty_frame(HEALTH_SUM_COLUMNS)
    frame = weekly_report(samples_of(example()), None, None, PRICES, POLICY, H0,
                          health_sums=empty)  # fmt: skip
    for line in render_csv(frame).splitlines()[1:]:
        assert line.split(",")[21:26] == ["", "", "", "", ""]
