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
from gpuwatch.analytics.budgets import forecast, reads_from
from gpuwatch.analytics.showback import spread_unallocated, with_shares
from gpuwatch.analytics.summary import sample_measures
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.views import breakdown
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
        rows = snap.hourly_between(reads_from(snap.end_ts), snap.end_ts)
        rows = rows[rows["pod_id"] != NO_POD]
        cost = sample_measures(rows, snap.policy.idle_threshold_ratio)[c.ALLOCATED_COST_USD]
        hourly = pd.DataFrame(
            {
                "ts": rows["ts"].to_numpy(dtype="int64"),
                "team": rows["team"].astype(object).to_numpy(),
                c.ALLOCATED_COST_USD: cost,
            }
        )
        return forecast(hourly, snap.end_ts, budgets)

    return snap.memo(("team_budgets", tuple(sorted(budgets.items()))), compute)
