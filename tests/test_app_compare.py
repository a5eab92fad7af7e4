"""Compare with the previous period: the Overview's cards say how each rate and cost changed
since the window before, of the same length and filters; the switch lives in the URL."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import dash
import pytest
from dash import Dash

from gpuwatch.app.data import Filters
from gpuwatch.app.server import data_source
from gpuwatch.app.views import breakdown
from gpuwatch.app.views_compare import Period, change_points, change_usd, previous_period
from tests.support.dash_app import demo_app
from tests.test_app_pages import as_json, by_id


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dash]:
    with demo_app(tmp_path_factory.mktemp("compare"), days=15, seed=11) as dash_app:
        yield dash_app


def _total(f: Filters, column: str) -> float:
    return float(breakdown(data_source().data.current(), f, ("cluster",))[column].sum())


@pytest.mark.parametrize("team", [None, "research"])
def test_the_previous_period_is_the_window_before(app: Dash, team: str | None) -> None:
    snap = data_source().data.current()
    week, fortnight = Filters(window="7d", team=team), Filters(window="14d", team=team)
    before = previous_period(snap, week)
    assert isinstance(before, Period)
    assert before.end_ts == snap.end_ts - 7 * 86400
    assert before.start_ts == snap.end_ts - 14 * 86400
    # The 14 days minus the last 7: the 7 before them.
    for field, column in (
        ("total_cost_usd", "capacity_cost_usd"),
        ("idle_cost_usd", "idle_cost_usd"),
        ("unallocated_cost_usd", "unallocated_cost_usd"),
    ):
        expected = _total(fortnight, column) - _total(week, column)
        assert getattr(before, field) == pytest.approx(expected, rel=1e-9), field
    held = _total(fortnight, "allocated_gpu_hours") - _total(week, "allocated_gpu_hours")
    used = _total(fortnight, "used_gpu_hours") - _total(week, "used_gpu_hours")
    assert before.efficiency_pct == pytest.approx(100 * used / held, rel=1e-9)


def test_no_previous_period_before_the_data(app: Dash) -> None:
    snap = data_source().data.current()
    assert "the data starts after" in str(previous_period(snap, Filters(window="14d")))
    assert isinstance(previous_period(snap, Filters(window="3d")), Period)


def test_changes_as_the_cards_write_them() -> None:
    assert change_usd(1234.0, 1000.0) == "+$234 (+23.4%)"
    assert change_usd(50.0, 100.0) == "-$50.00 (-50.0%)"
    assert change_usd(10.0, 0.0) == "+$10.00"
    assert change_points(41.25, 40.0) == "+1.2 points"
    assert change_points(float("nan"), 40.0) == "—"


def test_the_cards_show_the_change_only_when_asked(app: Dash) -> None:
    overview = importlib.import_module("gpuwatch.app.pages.overview")
    plain = overview.layout(window="3d")
    assert "vs previous period" not in as_json(plain)
    assert by_id(plain, "overview-compare")["props"]["value"] == []
    compared = overview.layout(window="3d", compare="previous")
    snap = data_source().data.current()
    before = previous_period(snap, Filters(window="3d"))
    assert isinstance(before, Period)
    total = _total(Filters(window="3d"), "capacity_cost_usd")
    card: Any = by_id(compared, "card-total-cost")
    assert f"vs previous period: {change_usd(total, before.total_cost_usd)}" in as_json(card)
    assert by_id(compared, "overview-compare")["props"]["value"] == ["previous"]
    assert "Previous period: " in as_json(by_id(compared, "overview-compare-period"))


def test_the_switch_is_in_the_url() -> None:
    overview = importlib.import_module("gpuwatch.app.pages.overview")
    assert overview.toggle_compare(["previous"], "?window=3d") == "?window=3d&compare=previous"
    assert overview.toggle_compare([], "?window=3d&compare=previous") == "?window=3d"
    assert overview.toggle_compare([], "?window=3d") is dash.no_update
