"""The Teams page's showback figures: each team's share of the unallocated cost.

The shares are computed over the whole of what the page's cluster, GPU model and allocation
filters keep, before its team and namespace filters narrow the rows shown: a team's share does
not change when the page is narrowed to it (docs/cost-model.md#showback).
"""

from __future__ import annotations

import pandas as pd

from gpuwatch.analytics.showback import spread_unallocated, with_shares
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.views import breakdown


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
