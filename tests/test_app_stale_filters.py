"""A shared link whose filters match nothing in the store says so, naming each such filter and
linking to the page without it, instead of dropping the filter silently."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest
from dash import Dash

from gpuwatch.app.components import unknown_filters
from gpuwatch.app.data import Filters
from gpuwatch.app.server import data_source
from gpuwatch.app.views import options
from tests.support.dash_app import demo_app
from tests.test_app_pages import by_id, texts, tree


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dash]:
    with demo_app(tmp_path_factory.mktemp("stale"), seed=3) as dash_app:
        yield dash_app


def _notice(layout: object, page: str) -> dict[str, object] | None:
    found = [n for n in tree(layout) if n["props"].get("id") == f"{page}-stale-filters"]
    return found[0] if found else None


def test_a_team_the_store_does_not_hold_is_named_with_a_way_out(app: Dash) -> None:
    workloads = importlib.import_module("gpuwatch.app.pages.workloads")
    layout = workloads.layout(team="ghost-team", window="24h")
    notice = by_id(layout, "workloads-stale-filters")
    assert "No team “ghost-team” in this store: " in texts(notice)
    links = [n["props"]["href"] for n in tree(notice) if "href" in n["props"]]
    assert links == ["/workloads?window=24h"]


def test_known_filters_show_no_notice(app: Dash) -> None:
    snap = data_source().data.current()
    opts = options(snap, Filters())
    team = opts.teams[0]
    teams = importlib.import_module("gpuwatch.app.pages.teams")
    assert _notice(teams.layout(team=team), "teams") is None
    assert unknown_filters(Filters(cluster=opts.clusters[0], team=team), opts) == []


def test_a_namespace_of_another_cluster_is_flagged_for_the_chosen_cluster(app: Dash) -> None:
    snap = data_source().data.current()
    clusters = options(snap, Filters()).clusters
    assert len(clusters) >= 2
    first = options(snap, Filters(cluster=clusters[0])).namespaces
    other = [n for n in options(snap, Filters(cluster=clusters[1])).namespaces if n not in first]
    f = Filters(cluster=clusters[0], namespace=other[0], model="No Such GPU")
    assert unknown_filters(f, options(snap, f)) == [
        ("namespace", other[0]), ("model", "No Such GPU"),
    ]  # fmt: skip
    overview = importlib.import_module("gpuwatch.app.pages.overview")
    layout = overview.layout(cluster=clusters[0], namespace=other[0])
    text = " ".join(texts(by_id(layout, "overview-stale-filters")))
    assert f"No namespace “{other[0]}” in this store for the chosen cluster and team" in text
