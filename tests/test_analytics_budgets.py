"""Team budgets: month to date, run rate and month-end forecast (docs/cost-model.md#budgets),
with the worked example of the docs and the edges of a month."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest

from gpuwatch.analytics.budgets import (
    FORECAST_BUDGET_PCT,
    FORECAST_USD,
    MONTH_TO_DATE_USD,
    RUN_RATE_USD_PER_HOUR,
    forecast,
    month_bounds,
    over_budget,
    reads_from,
)

HOUR = 3600


def _ts(*when: int) -> int:
    return int(datetime(*when, tzinfo=UTC).timestamp())  # type: ignore[arg-type]


def _hours(team: str, start_ts: int, end_ts: int, usd_per_hour: float) -> pd.DataFrame:
    ts = np.arange(start_ts, end_ts, HOUR)
    return pd.DataFrame({"ts": ts, "team": team, "allocated_cost_usd": usd_per_hour})


@pytest.mark.parametrize(
    ("now", "start", "end"),
    [
        ((2026, 11, 21), (2026, 11, 1), (2026, 12, 1)),
        ((2026, 11, 21, 13), (2026, 11, 1), (2026, 12, 1)),
        # The data up to midnight belongs to the month that just ended.
        ((2027, 1, 1), (2026, 12, 1), (2027, 1, 1)),
        ((2027, 1, 1, 1), (2027, 1, 1), (2027, 2, 1)),
        ((2028, 2, 29, 23), (2028, 2, 1), (2028, 3, 1)),
    ],
)
def test_month_bounds(now: tuple[int, ...], start: tuple[int, ...], end: tuple[int, ...]) -> None:
    assert month_bounds(_ts(*now)) == (_ts(*start), _ts(*end))


def test_reads_from_the_month_start_or_seven_days_back() -> None:
    assert reads_from(_ts(2026, 11, 21)) == _ts(2026, 11, 1)
    assert reads_from(_ts(2026, 11, 3, 6)) == _ts(2026, 10, 27, 6)


def test_the_worked_example_of_the_docs() -> None:
    now = _ts(2026, 11, 21)
    week = _ts(2026, 11, 14)
    # ml: $9,000 since 1 November, $2,520 of it in the last 7 days (168 h × $15).
    ml = pd.concat(
        [
            _hours("ml", _ts(2026, 11, 1), week, (9000 - 2520) / (13 * 24)),
            _hours("ml", week, now, 15.0),
        ]
    )
    # web: $1,000 this month, $168 of it in the last week; and $500 in October, not counted.
    web = pd.concat(
        [
            _hours("web", _ts(2026, 10, 31), _ts(2026, 11, 1), 500 / 24),
            _hours("web", _ts(2026, 11, 1), week, (1000 - 168) / (13 * 24)),
            _hours("web", week, now, 1.0),
        ]
    )
    table = forecast(pd.concat([web, ml]), now, {"ml": 12000, "web": 5000, "idle-team": 100})
    rows = table.set_index("team")
    assert list(table["team"]) == ["ml", "web", "idle-team"]
    assert rows.loc["ml", MONTH_TO_DATE_USD] == pytest.approx(9000)
    assert rows.loc["ml", RUN_RATE_USD_PER_HOUR] == pytest.approx(15)
    assert rows.loc["ml", FORECAST_USD] == pytest.approx(12600)
    assert rows.loc["ml", FORECAST_BUDGET_PCT] == pytest.approx(105)
    assert rows.loc["web", MONTH_TO_DATE_USD] == pytest.approx(1000)
    assert rows.loc["web", FORECAST_USD] == pytest.approx(1240)
    assert rows.loc["web", FORECAST_BUDGET_PCT] == pytest.approx(24.8)
    # A budget and no cost: $0 everywhere, 0% of the budget.
    assert rows.loc["idle-team", FORECAST_USD] == 0
    assert rows.loc["idle-team", FORECAST_BUDGET_PCT] == 0
    assert list(over_budget(table)["team"]) == ["ml"]


def test_a_team_without_budget_and_a_team_gone_this_month() -> None:
    now = _ts(2026, 11, 3)  # 2 days into November, 28 days (672 h) left
    rows = pd.concat(
        [
            # Ran until 31 October: nothing this month, but in the run rate (24 h × $7).
            _hours("old", _ts(2026, 10, 31), _ts(2026, 11, 1), 7.0),
            _hours("new", _ts(2026, 11, 1), now, 2.0),
        ]
    )
    table = forecast(rows, now, {}).set_index("team")
    assert table.loc["old", MONTH_TO_DATE_USD] == 0
    assert table.loc["old", FORECAST_USD] == pytest.approx(24 * 7 / 168 * 672)
    assert table.loc["new", FORECAST_USD] == pytest.approx(96 + 48 * 2 / 168 * 672)
    assert np.isnan(table.loc["new", FORECAST_BUDGET_PCT])


def test_hours_at_or_after_now_are_not_counted() -> None:
    now = _ts(2026, 11, 10)
    rows = _hours("ml", _ts(2026, 11, 9), _ts(2026, 11, 11), 1.0)
    table = forecast(rows, now, {"ml": 1000}).set_index("team")
    assert table.loc["ml", MONTH_TO_DATE_USD] == 24
