"""Time windows: presets, month to date, last month and any hour-aligned UTC range."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dash
import pytest
from dash import Dash

from gpuwatch.app import views
from gpuwatch.app.data import Filters
from gpuwatch.app.server import data_source
from gpuwatch.app.views_compare import Period, previous_period
from gpuwatch.app.window_form import point, range_search, range_window
from gpuwatch.app.windows import WindowError, bounds, is_window, label, range_bounds, range_text
from tests.support.dash_app import demo_app

NOW = 1_794_823_200  # Monday 2026-11-16 10:00 UTC
NOV_1, OCT_1, DEC_1 = 1_793_491_200, 1_790_812_800, 1_796_083_200
NOV_15 = 1_794_700_800
HOUR, DAY = 3600, 86_400


def test_presets_end_where_the_data_ends() -> None:
    assert bounds("24h", NOW) == (NOW - DAY, NOW)
    assert bounds("30d", NOW) == (NOW - 30 * DAY, NOW)
    assert bounds("mtd", NOW) == (NOV_1, NOW)
    assert bounds("last-month", NOW) == (OCT_1, NOV_1)
    # data up to midnight of 1 December: November is the month to date, October the last
    assert bounds("mtd", DEC_1) == (NOV_1, DEC_1)
    assert bounds("last-month", DEC_1) == (OCT_1, NOV_1)


def test_a_range_of_days_includes_its_last_day_and_hours_end_where_written() -> None:
    assert range_bounds("2026-11-01..2026-11-14") == (NOV_1, NOV_15)
    assert range_bounds("2026-11-02T06..2026-11-03T18") == (1_793_599_200, 1_793_728_800)
    assert bounds("2026-11-01..2026-11-14", NOW) == (NOV_1, NOV_15)
    assert range_text(NOV_1, NOV_15) == "2026-11-01..2026-11-14"
    assert range_text(1_793_599_200, 1_793_728_800) == "2026-11-02T06..2026-11-03T18"
    assert label("2026-11-01..2026-11-14") == "2026-11-01 00:00 to 2026-11-15 00:00 UTC"
    assert label("mtd") == "Month to date"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("2026-11-14..2026-11-01", "ends before it starts"),
        ("2026-11-14T06..2026-11-14T06", "ends before it starts"),
        ("2026-13-01..2026-13-02", "2026-13-01 is not a date"),
        ("2026-11-01T24..2026-11-02", "T24 is not an hour"),
        ("2025-01-01..2026-11-01", "spans more than 400 days"),
        ("last week", "is not a range"),
        ("2026-11-01T06:30..2026-11-02", "is not a range"),
    ],
)
def test_what_is_no_window_says_why(text: str, reason: str) -> None:
    with pytest.raises(WindowError, match=reason):
        range_bounds(text)
    assert not is_window(text)


def test_the_url_keeps_a_range_and_drops_what_is_no_window() -> None:
    kept = Filters.from_query({"window": "2026-11-01..2026-11-14", "team": "ml"})
    assert kept.window == "2026-11-01..2026-11-14"
    assert kept.query() == {"team": "ml", "window": "2026-11-01..2026-11-14"}
    assert Filters.from_query({"window": "2026-11-14..2026-11-01"}).window == "7d"
    assert Filters.from_query({"window": "mtd"}).window == "mtd"


def test_the_form_reads_dates_and_whole_hours() -> None:
    assert point(" 2026-11-02 ", "From") == "2026-11-02"
    assert point("2026-11-02 06:00", "From") == "2026-11-02T06"
    assert point("2026-11-02T06", "To") == "2026-11-02T06"
    with pytest.raises(WindowError, match="To: windows are whole hours"):
        point("2026-11-02 06:30", "To")
    with pytest.raises(WindowError, match="From: enter a date"):
        point("", "From")
    assert range_window("2026-11-01", "2026-11-14 18:00") == "2026-11-01..2026-11-14T18"


def test_the_form_writes_the_range_into_the_url_keeping_the_filters() -> None:
    search, message = range_search(1, None, None, "2026-11-14", "2026-11-15 06:00", "?team=ml")
    assert search == "?team=ml&window=2026-11-14..2026-11-15T06" and message == ""
    search, message = range_search(1, None, None, "2026-11-15", "2026-11-14", "?team=ml")
    assert search is dash.no_update
    assert message == "the range '2026-11-15..2026-11-14' ends before it starts"
    # a page drawing the form anew (nothing pressed yet) changes nothing and says nothing
    assert range_search(0, None, None, None, None, "?team=ml") == (dash.no_update,) * 2


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dash]:
    with demo_app(Path(tmp_path_factory.mktemp("fleet")), days=4) as dash_app:
        yield dash_app


def test_a_range_as_long_as_a_preset_shows_the_same_figures(app: Dash) -> None:
    snap = data_source().data.current()
    assert snap.end_ts == NOW
    ranged = Filters(window=range_text(NOW - 3 * DAY, NOW))
    assert ranged.window == "2026-11-13T10..2026-11-16T10"
    assert views.headline(snap, ranged) == views.headline(snap, Filters(window="3d"))
    assert views.capacity_series(snap, ranged).equals(
        views.capacity_series(snap, Filters(window="3d"))
    )


def test_a_range_inside_the_data_is_its_own_hours(app: Dash) -> None:
    snap = data_source().data.current()
    day = Filters(window="2026-11-14..2026-11-14")
    start, end = views.window_bounds(snap, day)
    assert (start, end) == (NOV_15 - DAY, NOV_15)
    assert views.data_window(snap, day.window) == (start, end)
    series = views.capacity_series(snap, day)
    assert series["bucket_ts"].tolist() == list(range(start, end, HOUR))
    whole = views.headline(snap, Filters(window="3d")).total_cost_usd
    assert 0 < views.headline(snap, day).total_cost_usd < whole
    before = previous_period(snap, day)  # the day before, as long
    assert isinstance(before, Period) and (before.start_ts, before.end_ts) == (start - DAY, start)
