"""Team budgets: month to date, run rate and month-end forecast (docs/cost-model.md#budgets).

Pure: hourly allocated cost per team and the end of the data in, one row per team out. The
alert ``GPUTeamBudgetForecastExceeded`` renders the same definition in PromQL
(:mod:`gpuwatch.alerts.recording_budgets`), with :data:`RUN_RATE_DAYS` from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.domain.durations import DAY_S, HOUR_S

#: The run rate is the team's allocated cost over this many days ÷ their hours.
RUN_RATE_DAYS = 7
RUN_RATE_HOURS = RUN_RATE_DAYS * DAY_S // HOUR_S
#: A forecast above this share of its budget is over budget (page and alert).
OVER_BUDGET_PCT = 100.0
BUDGET_USD = "monthly_budget_usd"
MONTH_TO_DATE_USD = "month_to_date_usd"
RUN_RATE_USD_PER_HOUR = "run_rate_usd_per_hour"
FORECAST_USD = "forecast_usd"
FORECAST_BUDGET_PCT = "forecast_budget_pct"
COLUMNS = (
    "team",
    BUDGET_USD,
    MONTH_TO_DATE_USD,
    RUN_RATE_USD_PER_HOUR,
    FORECAST_USD,
    FORECAST_BUDGET_PCT,
)


def month_bounds(now_ts: int) -> tuple[int, int]:
    """The first instant of the UTC month holding the instant before ``now_ts``, and of the
    next month (seconds): the data up to ``now_ts`` belongs to that month.

    >>> month_bounds(1_795_219_200)  # 2026-11-21 00:00 UTC
    (1793491200, 1796083200)
    """
    last = datetime.fromtimestamp(now_ts - 1, tz=UTC)
    start = datetime(last.year, last.month, 1, tzinfo=UTC)
    following = datetime(last.year + last.month // 12, last.month % 12 + 1, 1, tzinfo=UTC)
    return int(start.timestamp()), int(following.timestamp())


def reads_from(now_ts: int) -> int:
    """The first hour :func:`forecast` needs: the month's start or the run rate's, earlier."""
    return min(month_bounds(now_ts)[0], now_ts - RUN_RATE_DAYS * DAY_S)


def _per_team(rows: pd.DataFrame, start_ts: int, end_ts: int) -> pd.Series:
    ts = rows["ts"].to_numpy(dtype="int64")
    kept = rows[(ts >= start_ts) & (ts < end_ts)]
    return kept.groupby("team", sort=True)[c.ALLOCATED_COST_USD].sum()


def forecast(rows: pd.DataFrame, now_ts: int, budgets: Mapping[str, float]) -> pd.DataFrame:
    """Each team's month to date, run rate, forecast and forecast share of its budget.

    ``rows``: hourly allocated cost, columns ``ts`` (the hour's start), ``team`` and
    ``allocated_cost_usd``, covering at least ``[reads_from(now_ts), now_ts)``. Teams: every
    team with cost in either span, and every team with a budget; a team without a budget has
    NaN budget and percentage. Sorted by forecast share of budget, then forecast, highest first.
    """
    month_start = month_bounds(now_ts)[0]
    rows = rows.astype({"team": object})
    spent = _per_team(rows, month_start, now_ts)
    recent = _per_team(rows, now_ts - RUN_RATE_DAYS * DAY_S, now_ts)
    return forecast_from(spent, recent, now_ts, budgets)


def forecast_from(
    spent: pd.Series, recent: pd.Series, now_ts: int, budgets: Mapping[str, float]
) -> pd.DataFrame:
    """:func:`forecast` from each team's allocated cost summed already: ``spent`` over the
    month to ``now_ts``, ``recent`` over the last :data:`RUN_RATE_DAYS` days (both indexed by
    team)."""
    month_end = month_bounds(now_ts)[1]
    teams = sorted({*map(str, spent.index), *map(str, recent.index), *budgets})
    out = pd.DataFrame({"team": pd.Series(teams, dtype=object)})
    out[BUDGET_USD] = [float(budgets[t]) if t in budgets else np.nan for t in teams]
    out[MONTH_TO_DATE_USD] = spent.reindex(teams).fillna(0.0).to_numpy(dtype="float64")
    rate = recent.reindex(teams).fillna(0.0).to_numpy(dtype="float64") / RUN_RATE_HOURS
    out[RUN_RATE_USD_PER_HOUR] = rate
    out[FORECAST_USD] = out[MONTH_TO_DATE_USD] + rate * (month_end - now_ts) / HOUR_S
    out[FORECAST_BUDGET_PCT] = out[FORECAST_USD] / out[BUDGET_USD] * 100
    ordered = out.sort_values(
        [FORECAST_BUDGET_PCT, FORECAST_USD], ascending=False, na_position="last", kind="stable"
    )
    return ordered.reset_index(drop=True)[list(COLUMNS)]


def over_budget(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of :func:`forecast` whose forecast is above their budget."""
    return table[table[FORECAST_BUDGET_PCT] > OVER_BUDGET_PCT].reset_index(drop=True)
