"""The Teams page with ``showback.spread_unallocated``: each team's share of the unallocated
cost, the same whatever the page is narrowed to, and only when the setting is on."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import pytest
from dash import Dash

from gpuwatch.app.data import Filters
from gpuwatch.app.server import data_source
from gpuwatch.app.views_showback import team_showback
from gpuwatch.config import Settings
from tests.support.dash_app import demo_app
from tests.test_app_pages import by_id

NOW_TS = 1_794_823_200


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dash]:
    with demo_app(
        tmp_path_factory.mktemp("showback"),
        Settings(showback={"spread_unallocated": True}),
        seed=11,
    ) as dash_app:
        yield dash_app


def _teams_grid(layout: Any) -> dict[str, Any]:
    return by_id(layout, "teams-table")["props"]


def test_the_teams_table_shows_each_teams_share(app: Dash) -> None:
    teams = importlib.import_module("gpuwatch.app.pages.teams")
    grid = _teams_grid(teams.layout(window="24h"))
    fields = [spec["field"] for spec in grid["columnDefs"]]
    assert fields[-2:] == ["unallocated_share_usd", "showback_cost_usd"]
    for row in grid["rowData"]:
        assert row["showback_cost_usd"] == pytest.approx(
            row["allocated_cost_usd"] + row["unallocated_share_usd"], abs=0.011
        )
    assert sum(row["unallocated_share_usd"] for row in grid["rowData"]) > 0
    without = teams.body(data_source().data.current(), Filters(window="24h"))
    plain = [spec["field"] for spec in _teams_grid(without)["columnDefs"]]
    assert "unallocated_share_usd" not in plain  # off: the table as before


def test_a_teams_share_does_not_change_when_the_page_is_narrowed_to_it(app: Dash) -> None:
    snap = data_source().data.current()
    everyone = team_showback(snap, Filters(window="24h")).set_index("team")
    for team in everyone.index:
        alone = team_showback(snap, Filters(window="24h", team=str(team)))
        assert alone["team"].tolist() == [team]
        assert alone["unallocated_share_usd"].iloc[0] == pytest.approx(
            everyone.loc[team, "unallocated_share_usd"]
        )
