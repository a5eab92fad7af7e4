"""The GPU health page and the workload's efficiency panel, as functions of hand-built rows: the
reasons in words, the rows in scope, the analytics of them, the figures (the pages themselves:
tests/test_app_gpu_health_pages.py).

Hand-built rows are the worked example of tests/health_rows.py: GPU-1 (node n1, $4 an hour)
reports XID 79 at 00:15 of the second hour and is failing for 0.75 + 1 = 1.75 GPU-hours held by
train-0: $7.00; GPU-2 is throttled in 1/6 of its clock data and GPU-4 has a burst of 12
correctable ECC errors (degraded); GPU-3 reports XID 13 (application error).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpuwatch.app import figures_health
from gpuwatch.app.data import Filters
from gpuwatch.app.efficiency_panel import unavailable_text
from gpuwatch.app.figures_health import efficiency_figure, health_timeline_figure, state_runs
from gpuwatch.app.health_text import missing_readings, reason_text, reasons_text
from gpuwatch.app.views_gpu import WorkloadKey
from gpuwatch.app.views_health import (
    EfficiencyView,
    Readings,
    efficiency_view_of,
    health_view_of,
    scope,
    workload_mask,
)
from gpuwatch.domain.frames import HEALTH_COLUMNS, empty_frame
from gpuwatch.domain.health import HealthPolicy
from tests.health_rows import END, H0, H1, H2, PRICES, example, frame, hrow

NAN = float("nan")


def uuids(rows: pd.DataFrame) -> list[str]:
    return sorted(set(rows["gpu_uuid"].astype(str)))


# -- words ---------------------------------------------------------------------------------


def test_reasons_are_written_out_with_the_catalogue_meaning() -> None:
    assert reason_text("xid:79") == "XID 79: GPU has fallen off the bus"
    assert reason_text("xid:13") == (
        "XID 13: Graphics engine exception (illegal instruction or address in user code)"
    )
    assert reason_text("xid:999") == "XID 999 (not in the catalogue)"
    assert reason_text("thermal_throttle") == "thermal throttling"
    assert reasons_text("ecc_dbe,xid:48") == (
        "double-bit (uncorrectable) ECC error; XID 48: Double-bit ECC error (uncorrectable)"
    )
    assert reasons_text(["pcie_replay", "nvlink_errors"]) == "PCIe replays; NVLink errors"
    assert reasons_text("") == ""


# -- rows in scope and the analytics of them -----------------------------------------------


def test_scope_keeps_whole_gpus_of_the_filters() -> None:
    rows = example()
    assert len(scope(rows, Filters())) == 15
    assert uuids(scope(rows, Filters(model="Tesla T4"))) == ["GPU-4"]
    assert len(scope(rows, Filters(allocation="time-slice"))) == 6
    assert scope(rows, Filters(cluster="c2")).empty
    # a team's GPUs come with all their hours, the free slot and other pods' included
    team = scope(rows, Filters(team="team-ml"))
    assert uuids(team) == ["GPU-1", "GPU-3"] and len(team) == 6
    assert len(scope(rows, Filters(namespace="lab"))) == 6
    # the exporter's own pod requests no GPU: it holds none
    assert scope(rows, Filters(namespace="gpu-operator")).empty


def test_the_page_frames_are_the_analytics_of_the_rows_in_scope() -> None:
    view = health_view_of(example(), PRICES, HealthPolicy(), END)
    assert view.gpus == 4
    assert view.readings == Readings(True, True, True, True)
    assert list(view.entries["gpu_uuid"]) == ["GPU-1", "GPU-3", "GPU-2", "GPU-4"]
    assert list(view.entries["state"]) == ["failing", "app_error", "degraded", "degraded"]
    drain = view.drain.iloc[0]
    assert len(view.drain) == 1
    assert (drain["node"], drain["gpu_uuid"], drain["reasons"]) == ("n1", "GPU-1", ["xid:79"])
    assert drain["first_seen"] == H1 + 900
    assert drain["allocated_cost_while_failing_usd"] == pytest.approx(7.0)
    assert drain["pods"] == ["train-0"]
    assert len(view.timeline) == 12
    lab = health_view_of(scope(example(), Filters(team="team-lab")), PRICES, HealthPolicy(), END)
    assert (lab.gpus, list(lab.entries["state"])) == (1, ["degraded"])


def test_missing_readings_are_named_not_shown_as_zero() -> None:
    nothing = Readings.of(empty_frame(HEALTH_COLUMNS))
    assert nothing == Readings(False, False, False, False)
    (sentence,) = missing_readings(nothing)
    assert sentence.startswith("No GPU in scope has a health or efficiency reading")
    util_only = Readings.of(frame([hrow("g4s0", H0, "nb-0", util_s=1800.0, util_data_s=3600.0)]))
    assert util_only == Readings(True, False, False, False)
    clock, counts, profiling = missing_readings(util_only)
    assert clock.startswith("No clock events (DCGM_FI_DEV_CLOCKS_EVENT_REASONS")
    assert counts.startswith("No ECC, PCIe replay, NVLink or row-remap count")
    assert profiling.startswith("No profiling fields (DCGM_FI_PROF_SM_ACTIVE")
    assert missing_readings(Readings(True, True, True, True)) == []


# -- figures ---------------------------------------------------------------------------------


def _timeline(rows: list[tuple[int, str, str, str, str]]) -> pd.DataFrame:
    names = ["ts", "node", "gpu_uuid", "state", "reasons"]
    out = pd.DataFrame(rows, columns=names).assign(cluster="c1", gpu_model="NVIDIA A100")
    return out[["ts", "cluster", "node", "gpu_uuid", "gpu_model", "state", "reasons"]]


TIMELINE = _timeline(
    [
        (H0, "n2", "GPU-B", "degraded", "thermal_throttle"),
        (H1, "n2", "GPU-B", "degraded", "power_throttle,thermal_throttle"),
        (H0, "n1", "GPU-A", "healthy", ""),
        (H1, "n1", "GPU-A", "failing", "xid:79"),
        (H2, "n1", "GPU-A", "failing", "xid:79"),
        (H2 + 7200, "n1", "GPU-A", "failing", "xid:79"),  # after an hour without a reading
    ]
)


def test_state_runs_join_consecutive_hours_of_one_state() -> None:
    runs = state_runs(TIMELINE)
    assert runs[["gpu_uuid", "state", "reasons", "start_ts", "end_ts"]].values.tolist() == [
        ["GPU-A", "healthy", "", H0, H1],
        ["GPU-A", "failing", "xid:79", H1, H2 + 3600],
        ["GPU-A", "failing", "xid:79", H2 + 7200, H2 + 10800],
        ["GPU-B", "degraded", "thermal_throttle", H0, H1],
        ["GPU-B", "degraded", "power_throttle,thermal_throttle", H1, H2],
    ]


def test_timeline_figure_colours_states_and_says_why() -> None:
    labels = {("c1", "GPU-A"): "n1 · GPU-A #7"}
    figure = health_timeline_figure(TIMELINE, labels)
    failing, degraded, healthy = figure["data"]
    assert [t["name"] for t in figure["data"]] == ["failing", "degraded", "healthy"]
    assert failing["y"] == ["n1 · GPU-A #7", "n1 · GPU-A #7"]
    assert failing["base"] == ["2025-11-17T01:00:00", "2025-11-17T04:00:00"]
    assert failing["x"] == [7_200_000, 3_600_000]
    assert failing["marker"]["color"] == "#dc2626"
    assert failing["customdata"][0] == [
        "2025-11-17 01:00 UTC",
        "2025-11-17 03:00 UTC",
        "XID 79: GPU has fallen off the bus",
    ]
    assert degraded["y"] == ["n2 · GPU-B", "n2 · GPU-B"]
    assert [c[2] for c in degraded["customdata"]] == [
        "thermal throttling",
        "power-cap throttling; thermal throttling",
    ]
    assert healthy["customdata"] == [["2025-11-17 00:00 UTC", "2025-11-17 01:00 UTC", ""]]
    assert figure["layout"]["yaxis"]["categoryarray"] == ["n1 · GPU-A #7", "n2 · GPU-B"]
    assert figure["layout"]["xaxis"]["type"] == "date"
    empty = health_timeline_figure(TIMELINE.iloc[:0], {})
    assert empty["layout"]["annotations"][0]["text"] == "No health readings in this window"


def test_a_big_timeline_shows_the_gpus_that_were_not_healthy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(figures_health, "MAX_TIMELINE_GPUS", 1)
    figure = health_timeline_figure(TIMELINE, {})
    assert sorted({y for trace in figure["data"] for y in trace["y"]}) == [
        "n1 · GPU-A",
        "n2 · GPU-B",
    ]
    healthy_b = TIMELINE.assign(state="healthy", reasons="")
    healthy_b.loc[healthy_b["gpu_uuid"].eq("GPU-A"), "state"] = "failing"
    figure = health_timeline_figure(healthy_b, {})
    assert {y for trace in figure["data"] for y in trace["y"]} == {"n1 · GPU-A"}
    assert figure["layout"]["title"]["text"].endswith("; 1 GPUs healthy throughout not shown")


def test_efficiency_figure_draws_the_readings_that_exist() -> None:
    hours = pd.DataFrame(
        {
            "ts": [H0, H1, H2 + 3600],
            "engine_active_pct": [70.0, 80.0, 90.0],
            "sm_active_pct": [20.0, NAN, 30.0],
            "tensor_active_pct": [NAN, NAN, NAN],
            "dram_active_pct": [10.0, 10.0, 10.0],
        }
    )
    figure = efficiency_figure(hours)
    assert [t["name"] for t in figure["data"]] == ["engine active", "SM active", "DRAM active"]
    engine = figure["data"][0]
    # the missing hour H2 breaks the line
    assert engine["x"] == [
        "2025-11-17T00:00:00",
        "2025-11-17T01:00:00",
        "2025-11-17T02:00:00",
        "2025-11-17T03:00:00",
    ]
    assert engine["y"] == [70.0, 80.0, None, 90.0]
    assert figure["data"][1]["y"] == [20.0, None, None, 30.0]
    nothing = efficiency_figure(hours.assign(**dict.fromkeys(list(hours)[1:], NAN)), "why")
    assert nothing["data"] == [] and nothing["layout"]["annotations"][0]["text"] == "why"


# -- the workload's efficiency ----------------------------------------------------------------


def test_workload_rows_include_pods_without_a_workload() -> None:
    rows = example()
    rows.loc[rows["pod"].eq("nb-0"), "workload"] = pd.NA
    assert int(workload_mask(rows, WorkloadKey("c1", "lab", "Pod", "nb-0")).sum()) == 3
    assert int(workload_mask(rows, WorkloadKey("c1", "ml", "Job", "train")).sum()) == 3
    assert not workload_mask(rows, WorkloadKey("c1", "ml", "Job", "nb-0")).any()


def _efficiency(key: WorkloadKey, signals: set[str]) -> EfficiencyView:
    return efficiency_view_of(example(), PRICES, key, frozenset(signals))


def test_workload_efficiency_is_the_analytics_of_its_rows() -> None:
    view = _efficiency(WorkloadKey("c1", "ml", "Job", "train"), {"prof_gr_engine_active"})
    row = view.efficiency.iloc[0]
    assert len(view.efficiency) == 1
    activity = ["engine_active_pct", "sm_active_pct", "tensor_active_pct", "dram_active_pct"]
    assert row[activity].astype(float).tolist() == pytest.approx([70.0, 20.0, 5.0, 10.0])
    assert row["failing_gpu_hours"] == pytest.approx(1.75)
    assert row["failing_cost_usd"] == pytest.approx(7.0)
    assert row["cause"] == "input-bound"
    assert view.timeline["sm_active_pct"].tolist() == pytest.approx([20.0, 20.0, 20.0])
    assert unavailable_text(view) is None


def test_missing_activity_is_said_with_what_the_exporter_sends() -> None:
    notebook = WorkloadKey("c1", "lab", "Deployment", "notebook")
    assert unavailable_text(_efficiency(notebook, {"dev_gpu_util"})) == (
        "SM and tensor activity are unavailable: the exporter sends only "
        "DCGM_FI_DEV_GPU_UTIL for these GPUs (no DCGM_FI_PROF_* profiling fields)."
    )
    assert unavailable_text(_efficiency(notebook, {"prof_gr_engine_active"})) == (
        "SM and tensor activity are unavailable: the exporter sends neither "
        "DCGM_FI_PROF_SM_ACTIVE nor DCGM_FI_PROF_PIPE_TENSOR_ACTIVE for these GPUs."
    )
    rows = example()
    rows.loc[rows["pod"].eq("train-0"), ["tensor_active_s", "tensor_data_s"]] = 0.0
    train = WorkloadKey("c1", "ml", "Job", "train")
    view = efficiency_view_of(rows, PRICES, train, frozenset({"prof_gr_engine_active"}))
    assert np.isnan(view.efficiency["tensor_active_pct"].iloc[0])
    assert unavailable_text(view) == (
        "Tensor activity is unavailable: the exporter does not send "
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE for these GPUs."
    )
