"""Cost over time: every grouping adds up to the fleet's cost in the window, groups match the
Teams page's figures, node pools and pod labels come from the stored labels, and the page's
callbacks keep the grouping in the URL and open a clicked group."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import dash
import pandas as pd
import pytest
from dash import Dash

from gpuwatch.analytics.summary import sample_measures
from gpuwatch.analytics.timeline import OTHER, UNALLOCATED
from gpuwatch.app.data import Filters
from gpuwatch.app.figures import UNALLOCATED_COLOR
from gpuwatch.app.figures_cost import GROUP_COLORS, cost_over_time_figure, legend_links
from gpuwatch.app.server import data_source
from gpuwatch.app.views import breakdown, hourly_rows
from gpuwatch.app.views_cost import NO_POOL, CostTimeline, cost_timeline
from gpuwatch.config import Settings
from gpuwatch.config.sections import NODE_POOL_LABELS
from tests.support.dash_app import demo_app
from tests.test_app_pages import by_id

POOLS = [*NODE_POOL_LABELS]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dash]:
    settings = Settings(dashboard={"pod_labels": ["app"]})
    with demo_app(tmp_path_factory.mktemp("cost"), settings, days=3, seed=11) as dash_app:
        yield dash_app


def _fleet_cost(f: Filters) -> float:
    """Allocated plus unallocated cost of the window, as the Teams page's sums add it up."""
    clusters = breakdown(data_source().data.current(), f, ("cluster",))
    return float((clusters["allocated_cost_usd"] + clusters["unallocated_cost_usd"]).sum())


@pytest.mark.parametrize("window", ["24h", "7d"])
@pytest.mark.parametrize(
    "by", ["team", "namespace", "workload", "gpu_model", "node_pool", "cluster", "label:app"]
)
def test_every_grouping_adds_up_to_the_fleets_cost(app: Dash, by: str, window: str) -> None:
    f = Filters(window=window)
    timeline = cost_timeline(data_source().data.current(), f, by, POOLS)
    assert timeline.series["cost_usd"].sum() == pytest.approx(_fleet_cost(f), rel=1e-9)
    assert timeline.bucket_s == (3600 if window == "24h" else 86400)


def test_days_are_utc_days_each_the_cost_of_its_hours(app: Dash) -> None:
    """Per UTC day (the store's daily sums), not per 24 hours counted back from the data's end:
    each bar is what the window's hours of that day cost."""
    snap = data_source().data.current()
    f = Filters(window="7d")
    series = cost_timeline(snap, f, "team", POOLS).series
    per_day = series.groupby("bucket_ts")["cost_usd"].sum()
    hourly = hourly_rows(snap, f)
    m = sample_measures(hourly, snap.policy.idle_threshold_ratio)
    cost = pd.Series(m["allocated_cost_usd"] + m["unallocated_cost_usd"])
    want = cost.groupby(hourly["ts"].to_numpy() // 86400 * 86400).sum()
    assert snap.end_ts % 86400 != 0 and len(want) == 4  # 3 days of data: 4 UTC days
    assert list(per_day.index) == list(want.index)
    for got, expected in zip(per_day, want, strict=True):
        assert got == pytest.approx(expected, rel=1e-9)


def test_teams_cost_as_the_teams_page_sums_it(app: Dash) -> None:
    snap = data_source().data.current()
    f = Filters(window="3d")
    series = cost_timeline(snap, f, "team", POOLS).series
    per_team = series.groupby("group")["cost_usd"].sum()
    teams = breakdown(snap, f, ("team",)).set_index("team")["allocated_cost_usd"]
    assert set(per_team.index) == {*map(str, teams.index), UNALLOCATED}
    for team, cost in teams.items():
        assert per_team[str(team)] == pytest.approx(float(cost), rel=1e-9)


def test_a_team_filter_leaves_that_team_alone(app: Dash) -> None:
    series = cost_timeline(
        data_source().data.current(), Filters(team="research"), "namespace", POOLS
    ).series
    assert UNALLOCATED not in set(series["group"])  # nobody's capacity is the team's
    assert series["cost_usd"].sum() == pytest.approx(_fleet_cost(Filters(team="research")))


def test_node_pools_and_pod_labels_from_the_stored_labels(app: Dash) -> None:
    snap = data_source().data.current()
    pools = set(cost_timeline(snap, Filters(), "node_pool", POOLS).series["group"])
    assert {"gpu-a100", "a100"} <= pools  # Karpenter's and GKE's pool labels
    only_gke = cost_timeline(snap, Filters(), "node_pool", ["cloud.google.com/gke-nodepool"])
    assert NO_POOL in set(only_gke.series["group"])
    apps = set(cost_timeline(snap, Filters(), "label:app", POOLS).series["group"])
    assert "llm-pretrain" in apps and "(no app)" not in apps


def test_groups_link_to_their_pages(app: Dash) -> None:
    snap = data_source().data.current()
    hrefs = cost_timeline(snap, Filters(window="3d"), "team", POOLS).hrefs
    assert hrefs["research"] == "/teams?team=research&window=3d"
    assert hrefs[UNALLOCATED] is None
    models = cost_timeline(snap, Filters(), "gpu_model", POOLS).hrefs
    assert all(h is None or h.startswith("/gpus?model=") for h in models.values())


def _timeline() -> CostTimeline:
    series = pd.DataFrame(
        {
            "group": ["ml", "ml", OTHER, UNALLOCATED],
            "bucket_ts": [0, 3600, 0, 3600],
            "cost_usd": [1.234, 2.0, 0.5, 3.0],
            "rank": [0, 0, 1, 2],
        }
    )
    return CostTimeline(series, {"ml": "/teams?team=ml", UNALLOCATED: None}, 3600)


def test_the_figure_stacks_one_series_per_group() -> None:
    figure = cost_over_time_figure(_timeline(), "Team")
    names = [t["name"] for t in figure["data"]]
    assert names == ["ml", OTHER, UNALLOCATED]
    ml, _, free = figure["data"]
    assert ml["x"] == ["1970-01-01T00:00:00", "1970-01-01T01:00:00"]
    assert ml["y"] == [1.23, 2.0]
    assert ml["customdata"] == ["/teams?team=ml"] * 2
    assert ml["marker"]["color"] == GROUP_COLORS[0]
    assert free["marker"]["color"] == UNALLOCATED_COLOR and free["customdata"] == [None]
    assert figure["layout"]["barmode"] == "stack"
    assert figure["layout"]["title"]["text"] == "Cost per hour by team ($)"


def test_the_legend_links_each_group_with_a_page_in_its_colour() -> None:
    timeline = _timeline()
    timeline.hrefs["research"] = "/teams?team=research"  # no series: not in the legend
    assert legend_links(timeline) == [("ml", GROUP_COLORS[0], "/teams?team=ml")]


def test_the_page_draws_the_legend_as_links(app: Dash) -> None:
    cost = importlib.import_module("gpuwatch.app.pages.cost")
    layout = cost.layout(window="3d")
    hrefs = [
        item["props"]["children"][1]["props"]["href"]
        for item in by_id(layout, "cost-legend-links")["props"]["children"][1]["props"]["children"]
    ]
    assert "/teams?team=research&window=3d" in hrefs
    figure = by_id(layout, "cost-chart")["props"]["figure"]
    drawn = [t["customdata"][0] for t in figure["data"] if t["customdata"][0] is not None]
    assert hrefs == drawn  # every group with a page, in the legend's order


def test_the_grouping_is_in_the_url_and_a_click_opens_the_group() -> None:
    cost = importlib.import_module("gpuwatch.app.pages.cost")
    assert cost.pick_by("namespace", "?window=7d") == "?window=7d&by=namespace"
    assert cost.pick_by("team", "?window=7d&by=namespace") == "?window=7d"
    assert cost.pick_by("team", "?window=7d") is dash.no_update
    click: dict[str, Any] = {"points": [{"customdata": "/teams?team=ml"}]}
    assert cost.open_group(click) == "/teams?team=ml"
    assert cost.open_group({"points": [{"customdata": None}]}) is dash.no_update


def test_the_page_shows_the_chosen_grouping(app: Dash) -> None:
    cost = importlib.import_module("gpuwatch.app.pages.cost")
    layout = cost.layout(by="label:app", window="7d")
    assert by_id(layout, "cost-by")["props"]["value"] == "label:app"
    figure = by_id(layout, "cost-chart")["props"]["figure"]
    assert figure["layout"]["title"]["text"] == "Cost per UTC day by pod label app ($)"
    unknown = cost.layout(by="label:secret")  # not in dashboard.pod_labels
    assert by_id(unknown, "cost-by")["props"]["value"] == "team"
