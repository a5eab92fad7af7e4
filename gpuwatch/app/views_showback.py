"""The Teams page's showback figures: each team's share of the unallocated cost, and each
team's month-end forecast against its budget.

The shares are computed over the whole of what the page's cluster, GPU model and allocation
filters keep, before its team and namespace filters narrow the rows shown: a team's share does
not change when the page is narrowed to it (docs/cost-model.md#showback).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.budgets import RUN_RATE_DAYS, forecast_from, month_bounds
from gpuwatch.analytics.showback import spread_unallocated, with_shares
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.views import breakdown
from gpuwatch.app.window_costs import span_cost_rows
from gpuwatch.domain.durations import DAY_S
from gpuwatch.domain.frames import NO_POD


def team_showback(snap: Snapshot, f: Filters) -> pd.DataFrame:
    """``breakdown(snap, f, ("team",))`` with each team's unallocated share and its
    allocated cost plus that share."""

    def compute() -> pd.DataFrame:
        pool = f.with_(team=None, namespace=None)
        shares = spread_unallocated(
            breakdown(snap, pool, ("cluster", "team")), breakdown(snap, pool, ("cluster",))
        )
        teams = breakdown(snap, f, ("team",))
        return with_shares(teams.astype({"team": object}), shares)

    return snap.memo(("team_showback", f), compute)


def team_budgets(snap: Snapshot, budgets: Mapping[str, float]) -> pd.DataFrame:
    """Each team's month to date, run rate and month-end forecast against its budget, over the
    whole store (every cluster), at the end of the data (docs/cost-model.md#budgets)."""

    def compute() -> pd.DataFrame:
        end = snap.end_ts
        spent = _team_cost(span_cost_rows(snap, month_bounds(end)[0], end))
        recent = _team_cost(span_cost_rows(snap, end - RUN_RATE_DAYS * DAY_S, end))
        return forecast_from(spent, recent, end, budgets)

    return snap.memo(("team_budgets", tuple(sorted(budgets.items()))), compute)


def _team_cost(rows: pd.DataFrame) -> pd.Series:
    """Allocated cost per team of cost rows."""
    held = rows[rows["pod_id"] != NO_POD].astype({"team": object})
    return held.groupby("team", sort=True)[c.ALLOCATED_COST_USD].sum()
