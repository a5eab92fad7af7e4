"""The Teams page's budgets: month to date and month-end forecast per team, from the store,
against ``showback.monthly_budget_usd`` (docs/cost-model.md#budgets)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import pytest
from dash import Dash

from gpuwatch.app.data import Filters
from gpuwatch.app.server import data_source
from gpuwatch.app.views import breakdown
from gpuwatch.config import Settings
from tests.support.dash_app import NOW_TS, demo_app
from tests.test_app_pages import by_id

#: From the demo's end (2026-11-16 10:00 UTC) to 1 December: 14 days and 14 hours.
HOURS_LEFT = 14 * 24 + 14


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dash]:
    budgets = {"ml-platform": 50.0, "nobody": 10.0}
    with demo_app(
        tmp_path_factory.mktemp("budgets"),
        Settings(showback={"monthly_budget_usd": budgets}),
        seed=11,
    ) as dash_app:
        yield dash_app


def _budget_rows(f: Filters) -> list[dict[str, Any]]:
    teams = importlib.import_module("gpuwatch.app.pages.teams")
    snap = data_source().data.current()
    layout = teams.body(snap, f, data_source().data.settings.showback)
    rows: list[dict[str, Any]] = by_id(layout, "teams-budgets")["props"]["rowData"]
    return rows


def test_month_to_date_and_forecast_per_team(app: Dash) -> None:
    snap = data_source().data.current()
    assert snap.end_ts == NOW_TS
    # Two days of data, all in November and in the last 7 days: the month to date is each
    # team's allocated cost over the whole store, as the 3-day window sums it.
    whole = breakdown(snap, Filters(window="3d"), ("team",)).set_index("team")
    rows = {row["team"]: row for row in _budget_rows(Filters())}
    assert set(rows) == {*map(str, whole.index), "nobody"}
    for team, row in rows.items():
        spent = float(whole["allocated_cost_usd"].get(team, 0.0))
        assert row["month_to_date_usd"] == pytest.approx(spent, abs=0.006)
        assert row["forecast_usd"] == pytest.approx(spent + spent / 168 * HOURS_LEFT, abs=0.006)
    ml = rows["ml-platform"]
    assert ml["monthly_budget_usd"] == 50.0
    assert ml["forecast_budget_pct"] == pytest.approx(ml["forecast_usd"] / 50 * 100, abs=0.06)
    assert rows["nobody"]["forecast_usd"] == 0
    others = [row for team, row in rows.items() if team not in ("ml-platform", "nobody")]
    assert others and all(row["monthly_budget_usd"] is None for row in others)  # no budget


def test_budgets_ignore_the_window_and_follow_the_team_filter(app: Dash) -> None:
    wide = {r["team"]: r for r in _budget_rows(Filters())}
    narrow = _budget_rows(Filters(window="24h", team="ml-platform"))
    assert [r["team"] for r in narrow] == ["ml-platform"]
    assert narrow[0]["forecast_usd"] == wide["ml-platform"]["forecast_usd"]


def test_a_forecast_over_budget_is_red(app: Dash) -> None:
    teams = importlib.import_module("gpuwatch.app.pages.teams")
    layout = teams.body(data_source().data.current(), Filters(), Settings().showback)
    table = by_id(layout, "teams-budgets")["props"]
    column = next(s for s in table["columnDefs"] if s["field"] == "forecast_budget_pct")
    assert column["cellClassRules"] == {"gw-cell-alert": {"function": "params.value > 100"}}
    # Without budgets the section still forecasts every team, and says how to set budgets.
    assert all(row["monthly_budget_usd"] is None for row in table["rowData"])
    assert "No team has a budget: set them in showback.monthly_budget_usd" in str(layout)
