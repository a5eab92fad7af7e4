"""Pages and callbacks, called as plain functions inside the app's context."""

from __future__ import annotations

import csv
import importlib
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dash
import plotly.utils
import pytest
from dash import Dash
from sqlalchemy import Engine

from gpuwatch.alerts.render import (
    OPERATOR_FILE,
    PLAIN_FILE,
)
from gpuwatch.app import format as fmt
from gpuwatch.app.components import filters_to_search
from gpuwatch.app.data import DashboardData, Filters
from gpuwatch.app.server import create_app, data_source
from gpuwatch.app.urls import search_with, with_param
from gpuwatch.app.views import headline, window_bounds
from gpuwatch.app.views import options as views_options
from gpuwatch.app.views import workloads as workloads_view
from gpuwatch.cli.commands_demo import build_demo_database
from gpuwatch.config import Settings
from gpuwatch.report.weekly import iso_week_bounds
from gpuwatch.store.engine import make_engine

NOW_TS = 1_794_823_200  # a Monday 12:00 UTC
XSS = "<img src=x onerror=alert(1)>"


def _app(path: Path) -> tuple[Dash, Engine]:
    engine = make_engine(f"sqlite:///{path}")
    settings = Settings()
    data = DashboardData(engine, settings, background=False)
    return create_app(engine, settings, data=data, warm=False), engine


@pytest.fixture(scope="module")
def fleet_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("fleet")) / "fleet.db"
    build_demo_database(path, days=9, step_s=1800, seed=7, now_ts=NOW_TS)
    return path


@pytest.fixture(scope="module")
def app(fleet_path: Path) -> Iterator[Dash]:
    dash_app, engine = _app(fleet_path)
    with dash_app.server.app_context():
        yield dash_app
    engine.dispose()


def test_a_new_app_serves_every_script_of_its_page_before_its_first_visitor(
    fleet_path: Path,
) -> None:
    """Dash registers the scripts it serves in its first-request setup. Left to a visitor's
    first request, a second thread of the same worker skipped the setup in progress and
    answered 404 for React, and the page stayed at "Loading...". The app does the setup as it
    is made, so every script of the page is servable before anyone asks."""
    fresh, engine = _app(fleet_path)
    try:
        assert any(path.startswith("deps/react-dom@") for path in fresh.registered_paths["dash"])
        client = fresh.server.test_client()
        index = client.get("/").get_data(as_text=True)
        scripts = re.findall(r'<script src="(/_dash-component-suites/[^"]+)"', index)
        assert any("react-dom" in src for src in scripts) and len(scripts) >= 5
        assert {src: client.get(src).status_code for src in scripts} == dict.fromkeys(scripts, 200)
    finally:
        engine.dispose()


def page(name: str) -> Any:
    return importlib.import_module(f"gpuwatch.app.pages.{name}")


def as_json(component: Any) -> str:
    return json.dumps(component, cls=plotly.utils.PlotlyJSONEncoder)


def walk(node: Any) -> Iterator[dict[str, Any]]:
    """Every component of a layout, as its JSON form."""
    if isinstance(node, list):
        for item in node:
            yield from walk(item)
    elif isinstance(node, dict) and "props" in node and "type" in node:
        yield node
        for value in node["props"].values():
            yield from walk(value)


def tree(component: Any) -> list[dict[str, Any]]:
    return list(walk(json.loads(as_json(component))))


def by_id(component: Any, ident: str) -> dict[str, Any]:
    found = [n for n in tree(component) if n["props"].get("id") == ident]
    assert found, f"no component {ident}"
    return found[0]


def texts(node: Any) -> list[str]:
    out: list[str] = []
    for item in walk(node) if isinstance(node, dict) else []:
        children = item["props"].get("children")
        items = children if isinstance(children, list) else [children]
        out.extend(str(c) for c in items if isinstance(c, str | int | float))
    return out


PAGES = {
    "overview": {},
    "teams": {"window": "3d"},
    "cost": {"window": "7d", "by": "namespace"},
    "workloads": {"team": "ml-platform"},
    "workload": {
        "cluster": "prod-us-east",
        "namespace": "llm-training",
        "kind": "Job",
        "name": "llm-pretrain",
    },
    "gpus": {"cluster": "research-eu"},
    "node": {},
    "gpu": {"id": "5"},
    "savings": {"window": "14d"},
    "reports": {},
    "alerts": {},
    "health": {},
}


@pytest.mark.parametrize("name", sorted(PAGES))
def test_every_page_renders_its_body(app: Dash, name: str) -> None:
    query = dict(PAGES[name])
    if name == "node":
        units = data_source().data.current().units
        query = {"cluster": str(units["cluster"].iloc[0]), "name": str(units["node"].iloc[0])}
    layout = page(name).layout(**query)
    nodes = tree(layout)
    ids = {str(n["props"].get("id")) for n in nodes}
    assert f"{name}-page" in ids and f"{name}-body" in ids
    assert not any(str(i).endswith("-empty") for i in ids), f"{name} shows an empty state"
    assert "gw-nav" in as_json(layout)


def test_overview_cards_show_the_headline(app: Dash) -> None:
    snap = data_source().data.current()
    f = Filters(cluster="research-eu", window="3d")
    h = headline(snap, f)
    layout = page("overview").layout(cluster="research-eu", window="3d")
    assert texts(by_id(layout, "card-total-cost"))[1] == fmt.usd(h.total_cost_usd)
    assert texts(by_id(layout, "card-idle-cost"))[1] == fmt.usd(h.idle_cost_usd)
    assert texts(by_id(layout, "card-allocated"))[1] == fmt.pct(h.allocated_pct)
    assert texts(by_id(layout, "card-gpus"))[1] == str(h.gpu_units)
    whole = headline(snap, Filters(window="3d"))
    assert h.total_cost_usd < whole.total_cost_usd


def test_unknown_filter_values_show_an_empty_state(app: Dash) -> None:
    layout = page("overview").layout(team="no-such-team")
    assert "overview-empty" in {str(n["props"].get("id")) for n in tree(layout)}
    assert "Clear filters" in as_json(layout)


def test_detail_pages_for_unknown_subjects(app: Dash) -> None:
    assert "gpu-empty" in as_json(page("gpu").layout(id="not-a-number"))
    assert "node-empty" in as_json(page("node").layout(cluster="x", name="y"))
    assert "workload-empty" in as_json(page("workload").layout())


def test_filter_change_rewrites_the_query() -> None:
    ids = [{"type": "gw-filter", "name": n} for n in ("cluster", "team", "window")]
    new = filters_to_search(["c1", None, "14d"], ids, "?week=2026-W01&team=old")
    assert new == "?week=2026-W01&cluster=c1&window=14d"
    assert filters_to_search([None, None, "7d"], ids, "") is dash.no_update
    # Filters as the URL has them, after a page's own parameter: nothing to rewrite (a
    # rewrite would reorder the query, and one fired on leaving the page would drop filters).
    assert filters_to_search([None, None, "3d"], ids, "?window=3d&by=namespace") is dash.no_update
    assert filters_to_search([None, None, None], ids, "?compare=previous") is dash.no_update
    assert search_with("?id=3", {"window": "bogus"}) == "?id=3&window=bogus"


def test_a_page_parameter_is_set_or_dropped_others_kept(app: Dash) -> None:
    assert with_param("?window=3d&by=team", "by", "cluster") == "?window=3d&by=cluster"
    assert with_param("?by=team&window=3d", "by", None) == "?window=3d"
    assert with_param("", "week", "2026-W46") == "?week=2026-W46"
    assert with_param("?week=2026-W46", "week", None) == ""
    reports = page("reports")
    assert reports.pick_week("2026-W47", "2026-W46", "?week=2026-W46") == "?week=2026-W47"
    assert reports.pick_week("2026-W46", "2026-W46", "?week=2026-W46") is dash.no_update


def test_table_names_link_down_and_heatmap_clicks_open_pages(app: Dash) -> None:
    import pandas as pd

    teams = page("teams")
    frame = pd.DataFrame([{"team": "ml-platform", "cluster": "prod-us-east",
                           "namespace": "search-prod", "allocated_gpu_hours": 2.0}])  # fmt: skip
    (row,) = teams.records(frame, ["team"], teams.TEAM_COLUMNS, Filters(window="3d"))
    assert row["href"] == "/teams?team=ml-platform&window=3d"
    (row,) = teams.records(frame, ["cluster", "namespace"], teams.NAMESPACE_COLUMNS, Filters())
    assert row["href"] == "/teams?cluster=prod-us-east&namespace=search-prod"
    assert row["allocated_gpu_hours"] == 2.0 and row["idle_cost_usd"] is None
    workload = {"workload": "c", "workload_kind": "Job", "namespace": "b", "cluster": "a"}
    (row,) = page("workloads").records(pd.DataFrame([workload]).reindex(
        columns=[col.key for col in page("workloads").COLUMNS]), Filters(team="t"))  # fmt: skip
    assert row["href"] == "/workload?cluster=a&namespace=b&kind=Job&name=c&team=t"
    click = {"points": [{"y": "node-1 · GPU-abc #42", "x": "2026-01-01"}]}
    units = data_source().data.current().units.set_index("gpu_id")
    uuid = units.loc[42, "gpu_uuid"]  # a whole GPU: the UUID alone names it
    assert (units.loc[42, "mig_gi_id"], units.loc[42, "slot"]) == (-1, 0)
    assert page("gpus").open_clicked(click, "?window=14d&team=x") == f"/gpu?uuid={uuid}&window=14d"
    assert page("gpus").open_clicked({"points": []}, "") is dash.no_update
    by_node = {"points": [{"y": "gpu-n7 · 8 GPU units @prod-us-east", "x": "2026-01-01"}]}
    assert (
        page("gpus").open_clicked(by_node, "?window=14d&team=x")
        == "/node?name=gpu-n7&cluster=prod-us-east&window=14d"
    )


def _cli(store: Path, cwd: Path, *args: str) -> str:
    """What the ``gpuwatch`` command prints on ``store``, run as a user would."""
    env = {"PATH": os.environ.get("PATH", ""), "GPUWATCH_DATABASE_URL": f"sqlite:///{store}"}
    done = subprocess.run([sys.executable, "-m", "gpuwatch", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300, check=True)  # fmt: skip
    return done.stdout


def _iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: Contract section 3 in SQL: a unit's hours × g/7 (A30: g/4) for a MIG instance, / its slots.
GPU_EQUIVALENT_HOURS = """
SELECT sum(h.data_s / 3600.0 / g.timeslice_replicas * CASE WHEN g.mig_profile IS NULL THEN 1.0
    ELSE CAST(substr(g.mig_profile, 1, instr(g.mig_profile, 'g') - 1) AS REAL)
         / (CASE WHEN g.model_name LIKE '%A30%' THEN 4 ELSE 7 END) END)
FROM gpu_samples_hourly h JOIN gpus g ON g.id = h.gpu_id
WHERE h.hour_ts >= ? AND h.hour_ts < ?
"""


def test_weekly_download_is_the_cli_csv(app: Dash, fleet_path: Path, tmp_path: Path) -> None:
    source = data_source()
    week = page("reports").chosen_week(source.data.current(), {})
    assert week is not None
    got = page("reports").download(1, week)
    assert got["filename"] == f"gpuwatch-weekly-{week}.csv"
    # byte for byte what `gpuwatch report weekly` writes for the week
    assert got["content"] == _cli(fleet_path, tmp_path, "report", "weekly", "--week", week)
    # and its hours are every GPU-equivalent hour the store holds for the week, held or not
    rows = list(csv.DictReader(io.StringIO(got["content"])))
    assert len(rows) > 10
    start, end = iso_week_bounds(week)
    with sqlite3.connect(fleet_path) as conn:
        (stored,) = conn.execute(GPU_EQUIVALENT_HOURS, (start, end)).fetchone()
    held = sum(float(r["allocated_gpu_hours"]) + float(r["unallocated_gpu_hours"]) for r in rows)
    assert held == pytest.approx(stored, abs=0.01 * len(rows))  # rows are rounded to 0.01 h


def test_savings_download_is_the_recommend_csv(app: Dash, fleet_path: Path, tmp_path: Path) -> None:
    snap = data_source().data.current()
    start, end = window_bounds(snap, Filters(window="3d"))
    got = page("savings").download_csv(1, "?window=3d")
    expected = _cli(fleet_path, tmp_path, "recommend", "--format", "csv",
                    "--start", _iso(start), "--end", _iso(end))  # fmt: skip
    assert got["content"] == expected
    assert expected.count("\n") > 10


def test_rule_downloads_are_the_committed_files(app: Dash) -> None:
    committed = Path(__file__).resolve().parents[1] / "alerts"
    operator = (committed / OPERATOR_FILE).read_text(encoding="utf-8")
    plain = (committed / PLAIN_FILE).read_text(encoding="utf-8")
    assert page("alerts").download_operator(1)["content"] == operator
    assert page("alerts").download_plain(2)["content"] == plain
    assert "kind: PrometheusRule" in operator
    assert page("alerts").download_operator(None) is dash.no_update


def test_alert_conditions_are_listed(app: Dash) -> None:
    layout = page("alerts").layout()
    names = {str(n["props"].get("id")) for n in tree(layout)}
    for alert in ("GPUAllocatedIdle", "GPUMemoryNearFull", "GPUHighTemperature", "GPUXidError"):
        assert f"card-cond-{alert}" in names
    # The store evaluates the hardware XIDs; the page names the alerts only Prometheus does.
    assert "card-cond-GPUXidHardwareError" in names
    assert "card-cond-GPUFellOffBus" not in names
    assert "Only Prometheus evaluates the other rules: GPUNamespaceIdleCost," in as_json(layout)


@pytest.fixture(scope="module")
def hostile_app(fleet_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dash]:
    path = Path(tmp_path_factory.mktemp("hostile")) / "hostile.db"
    shutil.copy(fleet_path, path)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE pods SET name = ?, workload_name = ?, team = ? WHERE id = "
            "(SELECT pod_id FROM gpu_samples WHERE pod_id IS NOT NULL ORDER BY ts DESC LIMIT 1)",
            (XSS, XSS, XSS),
        )
    dash_app, engine = _app(path)
    with dash_app.server.app_context():
        yield dash_app
    engine.dispose()


def test_hostile_names_are_rendered_as_text(hostile_app: Dash) -> None:
    snap = data_source().data.current()
    pods = snap.pods[snap.pods["pod"].eq(XSS)]
    assert len(pods) == 1
    pod = pods.iloc[0]
    layouts = [
        page("workload").layout(
            cluster=pod["cluster"], namespace=pod["namespace"], kind=pod["workload_kind"], name=XSS
        ),
        page("overview").layout(team=XSS),
        page("teams").layout(),
    ]
    shown = []
    for layout in layouts:
        for node in tree(layout):
            assert node["type"] != "Markdown"
            assert not node["props"].get("dangerously_allow_html")
            assert node["props"].get("markdown_options", {}).get("html") in (None, False)
        shown.extend(
            texts(
                {
                    "type": "Div",
                    "namespace": "x",
                    "props": {"children": json.loads(as_json(layout))},
                }
            )
        )
    assert any(XSS in text for text in shown)


def test_allocation_filter_and_columns_follow_the_modes(app: Dash) -> None:
    """The demo fleet hands GPUs out every way: the filter offers each mode, a mode narrows the
    workloads to those holding GPUs that way, and the Data health page checks the claims."""
    snap = data_source().data.current()
    opts = views_options(snap, Filters())
    assert opts.allocations == ["device-plugin", "dra", "mig", "mps", "time-slice"]
    dra = workloads_view(snap, Filters(allocation="dra"))
    assert {"embedder-shared", "semantic-cache", "asr-streaming"} <= set(dra["workload"])
    assert set(dra["allocation"]) == {"dra"}
    mps = workloads_view(snap, Filters(allocation="mps"))
    assert {"intent-router", "face-blur"} <= set(mps["workload"])
    assert set(mps["allocation"]) == {"mps"}
    assert not {"semantic-cache", "embedder-shared"} & set(mps["workload"])
    layout = page("workloads").layout(allocation="mps")
    assert "intent-router" in as_json(layout) and "semantic-cache" not in as_json(layout)
    health = as_json(page("health").layout())
    assert "Every device a ResourceClaim holds is attributed to its pods." in health


def test_overview_bars_carry_what_a_click_opens(app: Dash) -> None:
    layout = page("overview").layout(window="3d")
    bars = by_id(layout, "overview-idle-by-team")["props"]["figure"]["data"][0]
    assert [row[0] for row in bars["customdata"]] == bars["y"]  # the team each bar shows
    spaces = by_id(layout, "overview-idle-by-namespace")["props"]["figure"]["data"][0]
    assert [row[1] for row in spaces["customdata"]] == spaces["y"]
    assert {row[0] for row in spaces["customdata"]} <= {"prod-us-east", "research-eu"}


def test_a_bar_click_opens_the_workloads_of_its_team_or_namespace(app: Dash) -> None:
    overview = page("overview")
    team = {"points": [{"y": "ml-platform", "customdata": ["ml-platform"]}]}
    assert overview.open_team_bar(team, "?window=3d&cluster=c1") == (
        "/workloads?cluster=c1&team=ml-platform&window=3d"
    )
    space = {"points": [{"customdata": ["research-eu", "vision-research"]}]}
    assert overview.open_namespace_bar(space, "?team=vision") == (
        "/workloads?cluster=research-eu&team=vision&namespace=vision-research"
    )
    assert overview.open_team_bar({"points": [{"y": "x"}]}, "") is dash.no_update
    assert overview.open_team_bar(None, "") is dash.no_update


def _links(node: dict[str, Any]) -> list[str]:
    return [str(n["props"]["href"]) for n in walk(node) if "href" in n["props"]]


def test_detail_pages_show_where_they_sit(app: Dash) -> None:
    layout = page("workload").layout(
        cluster="prod-us-east", namespace="llm-training", kind="Job", name="llm-pretrain",
        window="3d",
    )  # fmt: skip
    crumbs = by_id(layout, "workload-crumbs")
    assert texts(crumbs) == [
        "Workloads", "team ml-platform", "namespace llm-training", "Job llm-pretrain",
    ]  # fmt: skip
    assert _links(crumbs) == [
        "/workloads?window=3d",
        "/workloads?team=ml-platform&window=3d",
        "/workloads?cluster=prod-us-east&namespace=llm-training&window=3d",
    ]
    snap = data_source().data.current()
    unit = snap.units.iloc[0]
    cluster, node = str(unit["cluster"]), str(unit["node"])
    gpu = by_id(page("gpu").layout(id=str(int(unit["gpu_id"]))), "gpu-crumbs")
    assert texts(gpu)[:3] == ["GPUs & nodes", f"cluster {cluster}", f"node {node}"]
    assert texts(gpu)[3].startswith("GPU ")
    assert _links(gpu) == [
        "/gpus",
        f"/gpus?cluster={cluster}",
        f"/node?name={node}&cluster={cluster}",
    ]
    at_node = by_id(page("node").layout(cluster=cluster, name=node), "node-crumbs")
    assert texts(at_node) == ["GPUs & nodes", f"cluster {cluster}", f"node {node}"]


def test_gpus_are_addressed_by_uuid_and_old_links_still_open(app: Dash) -> None:
    from gpuwatch.app.links import find_unit, gpu_href

    snap = data_source().data.current()
    units = snap.units
    mig = units[units["mig_gi_id"] >= 0].sort_values(["gpu_uuid", "mig_gi_id"]).iloc[1]
    uuid, gi, gpu_id = str(mig["gpu_uuid"]), int(mig["mig_gi_id"]), int(mig["gpu_id"])
    assert gpu_href(Filters(window="3d"), snap, gpu_id) == f"/gpu?uuid={uuid}&gi={gi}&window=3d"
    for query in ({"uuid": uuid, "gi": str(gi)}, {"id": str(gpu_id)}):
        found = find_unit(snap, query)
        assert found is not None and int(found["gpu_id"]) == gpu_id, query
    first = units[units["gpu_uuid"].astype(object).eq(uuid)]["mig_gi_id"].min()
    alone = find_unit(snap, {"uuid": uuid})  # the GPU has no whole-GPU unit: its first instance
    assert alone is not None and int(alone["mig_gi_id"]) == int(first)
    assert find_unit(snap, {"uuid": uuid, "gi": "99"}) is None
    missing = as_json(page("gpu").layout(uuid="GPU-gone", gi="3"))
    assert "gpu-empty" in missing
    assert "No GPU GPU-gone (MIG instance 3) in this store" in missing
