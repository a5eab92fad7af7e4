"""The weekly waste report CSV (contract section 4): golden output and its rules."""

from __future__ import annotations

import csv
import io
from typing import Any

import pandas as pd
import pytest

from gpuwatch.analytics import columns as c
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
from tests.test_analytics_costing import example_book, worked_example

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


HEADER_LINE = (
    "week_start,cluster,team,namespace,workload_kind,workload,gpu_model,gpus_requested,"
    "allocated_gpu_hours,used_gpu_hours,efficiency_pct,idle_gpu_hours,allocated_cost_usd,"
    "idle_cost_usd,unused_cost_usd,recommendation,est_monthly_savings_usd,"
    "allocation,queue,stalled_gpu_hours,stalled_cost_usd,throttled_gpu_hours,failing_gpu_hours,"
    "failing_cost_usd,sm_active_pct,tensor_active_pct,unallocated_gpu_hours,unallocated_cost_usd\n"
)
# The data covers hours 0-29 of the week (30 h): train's saving is $30 / 30 h × 730 h.
# The __idle__ row holds n2's unallocated GPU in the unallocated columns only.
GOLDEN = HEADER_LINE + (
    "2026-11-09,c1,research,ml,Job,train,NVIDIA Test GPU,1,30.00,0.00,0.0,30.00,30.00,30.00,"
    "30.00,reclaim_idle,730.00,device-plugin,,0.00,0.00,0.00,0.00,0.00,,,0.00,0.00\n"
    "2026-11-09,c1,,__idle__,Unallocated,n2,NVIDIA Test GPU,0,0.00,0.00,0.0,0.00,0.00,0.00,"
    "0.00,,0.00,device-plugin,,0.00,0.00,0.00,0.00,0.00,,,5.00,5.00\n"
    "2026-11-09,c1,'+t,lab,Pod,'@evil,NVIDIA Test GPU,1,1.00,0.50,50.0,0.00,1.00,0.00,0.50,,"
    "0.00,device-plugin,,0.00,0.00,0.00,0.00,0.00,,,0.00,0.00\n"
    "2026-11-09,c1,product,web,Deployment,api,NVIDIA Test GPU,1,10.00,10.00,100.0,0.00,10.00,"
    "0.00,0.00,,0.00,device-plugin,,0.00,0.00,0.00,0.00,0.00,,,0.00,0.00\n"
)


def test_golden_csv() -> None:
    frame = weekly_report(week_samples(), None, None, BOOK, POLICY, WEEK_START)
    assert render_csv(frame) == GOLDEN


def test_header_is_section_4_then_section_7_appended() -> None:
    assert ",".join(HEADER) + "\n" == HEADER_LINE
    assert HEADER[16] == "est_monthly_savings_usd" and len(HEADER) == 17 + 11


def test_reclaim_saving_is_cost_per_hour_with_data_times_730() -> None:
    frame = weekly_report(week_samples(), None, None, BOOK, POLICY, WEEK_START)
    train = frame[frame["workload"] == "train"].iloc[0]
    # $30 over the 30 hours the week has data (hour 0 to the end of hour 29), not over 168 h
    assert train["est_monthly_savings_usd"] == round(30.0 / 30 * 730, 2)


def test_each_column_sums_to_the_fleet_total() -> None:
    samples = week_samples()
    frame = weekly_report(samples, None, None, BOOK, POLICY, WEEK_START)
    in_week = samples[samples["ts"] < WEEK_START + 7 * 86400]
    total = summarize(prepare(in_week, None, BOOK), [], POLICY.idle_threshold_ratio).iloc[0]
    for name in (
        c.ALLOCATED_GPU_HOURS,
        c.USED_GPU_HOURS,
        c.IDLE_GPU_HOURS,
        c.ALLOCATED_COST_USD,
        c.IDLE_COST_USD,
        c.UNUSED_COST_USD,
        c.UNALLOCATED_GPU_HOURS,
        c.UNALLOCATED_COST_USD,
    ):
        assert frame[name].sum() == pytest.approx(total[name]), name
    # by hand: train 30 h idle at $1/h; n2's GPU 5 h unallocated at $1/h
    assert frame["idle_cost_usd"].sum() == 30.0
    assert frame["unallocated_cost_usd"].sum() == 5.0
    assert frame["allocated_cost_usd"].sum() == 30.0 + 10.0 + 1.0


def test_unallocated_rows_hold_only_unallocated_capacity() -> None:
    frame = weekly_report(week_samples(), None, None, BOOK, POLICY, WEEK_START)
    free = frame[frame["namespace"] == "__idle__"].iloc[0]
    held = ["allocated_gpu_hours", "used_gpu_hours", "idle_gpu_hours", "allocated_cost_usd",
            "idle_cost_usd", "unused_cost_usd"]  # fmt: skip
    assert (free["workload_kind"], free["workload"], free["team"]) == ("Unallocated", "n2", "")
    assert [free[n] for n in held] == [0.0] * len(held)
    assert (free["unallocated_gpu_hours"], free["unallocated_cost_usd"]) == (5.0, 5.0)
    workloads = frame[frame["namespace"] != "__idle__"]
    assert workloads["unallocated_gpu_hours"].eq(0).all()


def test_allocation_names_how_the_gpus_were_held() -> None:
    def unit(gpu_id: int, node: str, **facts: Any) -> list[dict[str, Any]]:
        return [r | facts for r in _samples(gpu_id, node, 2, 0.5)]

    whole = {"pod_id": 1, "pod": "a-0", "namespace": "ml", "workload_kind": "Job",
             "workload": "a"}  # fmt: skip
    mig = {"pod_id": 2, "pod": "b-0", "namespace": "ml", "workload_kind": "Job", "workload": "b"}
    rows = [
        *unit(1, "n1", **whole),
        *unit(2, "n2", **whole, mig_profile="3g.40gb"),  # pod a on a MIG instance too
        *unit(3, "n2", **mig, mig_profile="1g.10gb", timeslice_replicas=2),
        *unit(4, "n3", slot=0, timeslice_replicas=4),  # unheld slots of a shared GPU
        *unit(5, "n3", slot=1, timeslice_replicas=4),
        *unit(6, "n2", mig_profile="3g.40gb"),
    ]
    frame = weekly_report(samples_frame(rows), None, None, BOOK, POLICY, WEEK_START)
    got = dict(zip(frame["workload"], frame["allocation"], strict=True))
    assert got == {
        "a": "device-plugin+mig",
        "b": "mig+time-slice",
        "n2": "mig",
        "n3": "time-slice",
    }


def test_columns_not_measured_yet_are_empty_or_zero() -> None:
    text = render_csv(weekly_report(week_samples(), None, None, BOOK, POLICY, WEEK_START))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 4
    for cells in rows:
        assert (cells["queue"], cells["sm_active_pct"], cells["tensor_active_pct"]) == ("", "", "")
        for name in ("stalled_gpu_hours", "stalled_cost_usd", "throttled_gpu_hours",
                     "failing_gpu_hours", "failing_cost_usd"):  # fmt: skip
            assert cells[name] == "0.00"


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


def test_the_worked_example_of_the_docs_as_weekly_rows() -> None:
    # docs/cost-model.md, "Column totals of the weekly CSV": the example's 2 hours lie in W46
    frame = weekly_report(worked_example(), None, None, example_book(), POLICY, WEEK_START)
    rows = frame.set_index("workload")
    names = ["namespace", "allocation", "allocated_cost_usd", "idle_cost_usd",
             "unallocated_gpu_hours", "unallocated_cost_usd"]  # fmt: skip
    got = {w: list(r) for w, r in rows[names].iterrows()}
    assert got == {
        "train": ["ml", "device-plugin", 8.0, 4.0, 0.0, 0.0],
        "api": ["web", "mig", 6.0, 0.0, 0.0, 0.0],
        "nb-0": ["lab", "time-slice", 2.0, 0.0, 0.0, 0.0],
        "n2": ["__idle__", "mig", 0.0, 0.0, 2.0, 8.0],
        "n3": ["__idle__", "device-plugin+time-slice", 0.0, 0.0, 3.75, 5.5],
    }
    sums = frame[names[2:]].sum().round(2).tolist()
    assert sums == [16.0, 4.0, 5.75, 13.5]
