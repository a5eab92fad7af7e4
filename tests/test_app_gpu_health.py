"""The GPU health page and the workload's efficiency panel: the reasons in words, the rows in
scope, the figures, and the pages on a store with a failing GPU (tests/browser/health_store.py).

Hand-built rows are the worked example of tests/health_rows.py: GPU-1 (node n1, $4 an hour)
reports XID 79 at 00:15 of the second hour and is failing for 0.75 + 1 = 1.75 GPU-hours held by
train-0: $7.00; GPU-2 is throttled in 1/6 of its clock data and GPU-4 has a burst of 12
correctable ECC errors (degraded); GPU-3 reports XID 13 (application error).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.utils
import pytest
from dash import Dash
from dash._callback import GLOBAL_CALLBACK_MAP

from gpuwatch.app import figures_health
from gpuwatch.app.data import DashboardData, Filters
from gpuwatch.app.efficiency_panel import unavailable_text
from gpuwatch.app.figures_health import efficiency_figure, health_timeline_figure, state_runs
from gpuwatch.app.health_text import missing_readings, reason_text, reasons_text
from gpuwatch.app.server import create_app
from gpuwatch.app.views_gpu import WorkloadKey
from gpuwatch.app.views_health import (
    EfficiencyView,
    Readings,
    efficiency_view_of,
    health_view_of,
    health_window,
    scope,
    workload_mask,
)
from gpuwatch.cli.commands_demo import build_demo_database
from gpuwatch.domain.frames import HEALTH_COLUMNS, empty_frame
from gpuwatch.domain.health import HealthPolicy
from gpuwatch.store import repository
from gpuwatch.store.engine import make_engine
from tests.browser.health_store import FailingGpu, add_failing_gpu, settings_for
from tests.health_rows import END, H0, H1, H2, PRICES, example, frame, hrow

NOW_TS = 1_794_823_200  # a Monday 12:00 UTC: the demo's data ends at this hour
WORKLOAD_QUERY = {
    "cluster": "prod-us-east",
    "namespace": "llm-training",
    "kind": "Job",
    "name": "llm-pretrain",
}
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


# -- the pages, on a store with a failing GPU --------------------------------------------------


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, FailingGpu]:
    path = Path(tmp_path_factory.mktemp("failing")) / "fleet.db"
    build_demo_database(path, days=3, step_s=900, seed=7, now_ts=NOW_TS)
    return path, add_failing_gpu(path)


@pytest.fixture(scope="module")
def app(failing: tuple[Path, FailingGpu]) -> Iterator[Dash]:
    path, gpu = failing
    engine = make_engine(f"sqlite:///{path}")
    settings = settings_for(gpu)
    data = DashboardData(engine, settings, background=False)
    dash_app = create_app(engine, settings, data=data, warm=False)
    with dash_app.server.app_context():
        yield dash_app
    engine.dispose()


def walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, list):
        for item in node:
            yield from walk(item)
    elif isinstance(node, dict) and "props" in node and "type" in node:
        yield node
        for value in node["props"].values():
            yield from walk(value)


def by_id(layout: Any, ident: str) -> dict[str, Any] | None:
    nodes = walk(json.loads(json.dumps(layout, cls=plotly.utils.PlotlyJSONEncoder)))
    return next((n for n in nodes if n["props"].get("id") == ident), None)


def text(node: dict[str, Any] | None) -> str:
    assert node is not None
    parts = [n["props"].get("children") for n in walk(node)]
    return " ".join(p for p in parts if isinstance(p, str))


def rows_of(table: dict[str, Any] | None) -> list[list[dict[str, Any]]]:
    """The body rows of an html table, each a list of its cells."""
    assert table is not None
    body = table["props"]["children"][1]
    return [row["props"]["children"] for row in body["props"]["children"]]


def page(name: str) -> Any:
    return importlib.import_module(f"gpuwatch.app.pages.{name}")


def test_the_window_is_read_once_through_the_repository(
    failing: tuple[Path, FailingGpu], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, gpu = failing
    calls: list[tuple[int, int]] = []
    read = repository.load_health_hourly

    def recording(engine: Any, start_ts: int, end_ts: int) -> pd.DataFrame:
        calls.append((start_ts, end_ts))
        return read(engine, start_ts, end_ts)

    monkeypatch.setattr(repository, "load_health_hourly", recording)
    engine = make_engine(f"sqlite:///{path}")
    snap = DashboardData(engine, settings_for(gpu), background=False).current()
    rows = health_window(snap, "7d")
    assert health_window(snap, "7d") is rows
    assert calls == [(NOW_TS - 7 * 86_400, NOW_TS)]
    assert len(rows) == gpu.rows
    assert sorted(set(rows["ts"])) == list(gpu.hours)
    engine.dispose()


def test_health_page_names_the_failing_gpu_and_its_dollars(
    app: Dash, failing: tuple[Path, FailingGpu]
) -> None:
    _, gpu = failing
    layout = page("gpu_health").layout()
    assert text(by_id(layout, "card-gpu-health-failing")).startswith("Failing 1 ")
    assert text(by_id(layout, "card-gpu-health-degraded")).startswith("Degraded 0 ")
    assert text(by_id(layout, "card-gpu-health-paid-failing")).startswith(
        "Paid while failing $6.00"
    )
    (row,) = rows_of(by_id(layout, "gpu-health-drain"))
    cells = [text(cell) for cell in row]
    assert cells == [
        gpu.node,
        gpu.gpu_uuid[:12],
        "prod-us-east",
        "NVIDIA A100-SXM4-80GB",
        "XID 79: GPU has fallen off the bus",
        "2026-11-16 08:30 UTC",
        cells[6],
        "$6.00",
    ]
    assert cells[6].startswith("llm-pretrain-")
    node_link, gpu_link = ([n["props"].get("href") for n in walk(cell)] for cell in row[:2])
    assert node_link == [None, f"/node?name={gpu.node}&cluster=prod-us-east"]
    assert gpu_link == [None, f"/gpu?id={gpu.gpu_id}"]
    (entry,) = rows_of(by_id(layout, "gpu-health-entries"))
    assert [text(c) for c in entry][3:5] == ["failing", "XID 79: GPU has fallen off the bus"]
    # clock events and profiling are read; no error counter rose
    assert text(by_id(layout, "gpu-health-missing")).startswith("No ECC, PCIe replay")
    assert by_id(layout, "nav-gpu-health") is not None


def test_health_page_without_readings_says_what_is_missing(app: Dash) -> None:
    layout = page("gpu_health").layout(cluster="research-eu")
    assert text(by_id(layout, "gpu-health-missing")).startswith(
        "No GPU in scope has a health or efficiency reading in this window"
    )
    assert by_id(layout, "gpu-health-cards") is None
    assert by_id(layout, "gpu-health-timeline") is None


def test_cards_say_when_throttling_is_unknown(app: Dash) -> None:
    cards = page("gpu_health").cards
    with_clock = cards(health_view_of(example(), PRICES, HealthPolicy(), END))
    assert text(by_id(with_clock, "card-gpu-health-degraded")) == (
        "Degraded 2 of 4 GPUs with readings"
    )
    assert text(by_id(with_clock, "card-gpu-health-paid-failing")).startswith(
        "Paid while failing $7.00"
    )
    no_clock = example().assign(clock_data_s=0.0, throttled_s=0.0, thermal_s=0.0)
    view = health_view_of(no_clock, PRICES, HealthPolicy(), END)
    assert text(by_id(cards(view), "card-gpu-health-degraded")) == (
        "Degraded 1 throttling unknown: no clock events"
    )


def test_filters_that_match_nothing_show_an_empty_state(app: Dash) -> None:
    layout = page("gpu_health").layout(team="no-such-team")
    assert by_id(layout, "gpu-health-empty") is not None


def test_a_timeline_click_opens_the_gpu(app: Dash) -> None:
    registered = [
        output for output, cb in GLOBAL_CALLBACK_MAP.items()
        if {"id": "gpu-health-timeline", "property": "clickData"} in cb["inputs"]
    ]  # fmt: skip
    assert len(registered) == 1
    assert registered[0].startswith("gw-url.href@")
    click = {"points": [{"y": "node-a · GPU-1fb67d84 #12"}]}
    assert page("gpu_health").open_clicked(click, "?window=24h&cluster=c1") == (
        "/gpu?id=12&window=24h"
    )


def test_workload_page_shows_engine_vs_sm_vs_tensor(
    app: Dash, failing: tuple[Path, FailingGpu]
) -> None:
    _, gpu = failing
    layout = page("workload").layout(**WORKLOAD_QUERY)
    (row,) = rows_of(by_id(layout, "workload-efficiency-table"))
    cells = [text(cell) for cell in row]
    hours = f"{gpu.rows:.1f} GPU·h"  # every row a whole hour of one whole GPU
    assert cells[:8] == [
        "NVIDIA A100-SXM4-80GB",
        hours,
        "80.0%",
        "20.0%",
        "30.0%",
        "10.0%",
        "0.0 GPU·h",
        hours,
    ]
    assert cells[9:] == ["1.5 GPU·h", "$6.00", "input-bound"]
    assert by_id(layout, "workload-efficiency-unavailable") is None
    figure = by_id(layout, "workload-efficiency-timeline")
    assert figure is not None
    lines = figure["props"]["figure"]["data"]
    assert [t["name"] for t in lines] == [
        "engine active",
        "SM active",
        "tensor active",
        "DRAM active",
    ]


def test_workload_without_readings_says_they_are_unavailable(app: Dash) -> None:
    query = {**WORKLOAD_QUERY, "name": "llm-sft"}
    layout = page("workload").layout(**query)
    note = by_id(layout, "workload-efficiency-unavailable")
    assert text(note).startswith("SM and tensor activity are unavailable: the exporter sends")
