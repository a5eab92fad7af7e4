"""The GPU health page and the workload's efficiency panel on a store with a failing GPU
(tests/browser/health_store.py): XID 79 half-way through the second of the last three hours,
1.5 GPU-hours held at $4.00: $6.00 paid while failing; the workload busy at 80 % with SM 20 %,
tensor 30 % and DRAM 10 % active (input-bound)."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.utils
import pytest
from dash import Dash

from gpuwatch.app.data import DashboardData
from gpuwatch.app.server import create_app, data_source
from gpuwatch.app.views import window_recommendations
from gpuwatch.app.views_health import health_view_of, health_window
from gpuwatch.cli.commands_demo import build_demo_database
from gpuwatch.domain.health import HealthPolicy
from gpuwatch.store import repository
from gpuwatch.store.engine import make_engine
from tests.browser.health_store import FailingGpu, add_failing_gpu, settings_for
from tests.health_rows import END, PRICES, example

NOW_TS = 1_794_823_200  # a Monday 12:00 UTC: the demo's data ends at this hour
WORKLOAD_QUERY = {
    "cluster": "prod-us-east",
    "namespace": "llm-training",
    "kind": "Job",
    "name": "llm-pretrain",
}


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

    def recording(engine: Any, start_ts: int, end_ts: int, **kwargs: Any) -> pd.DataFrame:
        calls.append((start_ts, end_ts))
        return read(engine, start_ts, end_ts, **kwargs)

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
    assert gpu_link == [None, f"/gpu?uuid={gpu.gpu_uuid}"]
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


REGISTERED_CLICKS = """
import sys
from dash._callback import GLOBAL_CALLBACK_MAP
from gpuwatch.app.data import DashboardData
from gpuwatch.app.server import create_app, data_source
from gpuwatch.config import Settings
from gpuwatch.store.engine import make_engine

engine = make_engine(sys.argv[1])
settings = Settings()
create_app(engine, settings, data=DashboardData(engine, settings, background=False), warm=False)
click = {"id": "gpu-health-timeline", "property": "clickData"}
print([out for out, cb in GLOBAL_CALLBACK_MAP.items() if click in cb["inputs"]])
"""


def test_a_timeline_click_opens_the_gpu(app: Dash, failing: tuple[Path, FailingGpu]) -> None:
    # Dash hands every `dash.callback` to the first app that starts in a process, so the
    # registration is read in a process of its own, right after the app is built.
    run = subprocess.run(
        [sys.executable, "-c", REGISTERED_CLICKS, f"sqlite:///{failing[0]}"],
        capture_output=True, text=True, check=True, cwd=Path(__file__).parent.parent,
    )  # fmt: skip
    registered = ast.literal_eval(run.stdout.strip().splitlines()[-1])
    assert len(registered) == 1
    assert registered[0].startswith("gw-page-url.href@")
    click = {"points": [{"y": "node-a · GPU-1fb67d84 #12"}]}
    uuid = data_source().data.current().units.set_index("gpu_id").loc[12, "gpu_uuid"]
    assert page("gpu_health").open_clicked(click, "?window=24h&cluster=c1") == (
        f"/gpu?uuid={uuid}&window=24h"
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


def test_dashboard_recommendations_include_investigate_efficiency(
    failing: tuple[Path, FailingGpu],
) -> None:
    """The Savings page's recommendations read the window's health roll-up as `gpuwatch
    recommend` does: the input-bound workload gets investigate_efficiency, no saving claimed."""
    path, gpu = failing
    engine = make_engine(f"sqlite:///{path}")
    snap = DashboardData(engine, settings_for(gpu), background=False).current()
    recs = window_recommendations(snap, "7d")
    mine = recs[(recs["kind"] == "investigate_efficiency") & (recs["workload"] == "llm-pretrain")]
    assert len(mine) == 1
    assert mine["est_monthly_savings_usd"].tolist() == [0.0]
    assert mine["evidence"].iloc[0]["cause"] == "input-bound"
    engine.dispose()
