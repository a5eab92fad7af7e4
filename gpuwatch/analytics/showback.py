"""Showback: unallocated cost spread over the teams that hold GPUs (docs/cost-model.md#showback).

Pure: per-cluster figures in, per-team shares out. Each cluster's unallocated cost (GPU time no
pod held) is split over the teams in proportion to their allocated cost on that cluster, so a
team pays its part of the capacity kept for everyone where it runs, priced as that capacity
is. A cluster where no team held a GPU keeps its unallocated cost unspread: there is nobody to
charge it to, and the total of the shares says so by being smaller.
"""

from __future__ import annotations

import pandas as pd

from gpuwatch.analytics import columns as c

#: A team's part of the unallocated cost, in dollars.
SHARE_USD = "unallocated_share_usd"
#: A team's allocated cost plus its share.
SHOWBACK_USD = "showback_cost_usd"


def spread_unallocated(allocated: pd.DataFrame, unallocated: pd.DataFrame) -> pd.DataFrame:
    """Each team's share of the clusters' unallocated cost.

    ``allocated``: one row per (``cluster``, ``team``) with ``allocated_cost_usd``;
    ``unallocated``: one row per ``cluster`` with ``unallocated_cost_usd``. Returns one row per
    team of ``allocated`` with :data:`SHARE_USD`, sorted by team.

    >>> allocated = pd.DataFrame({"cluster": ["a", "a", "b"], "team": ["x", "y", "x"],
    ...                           "allocated_cost_usd": [30.0, 10.0, 5.0]})
    >>> unallocated = pd.DataFrame({"cluster": ["a", "b"], "unallocated_cost_usd": [8.0, 1.0]})
    >>> spread_unallocated(allocated, unallocated).to_dict("records")
    [{'team': 'x', 'unallocated_share_usd': 7.0}, {'team': 'y', 'unallocated_share_usd': 2.0}]
    """
    if allocated.empty:
        return pd.DataFrame({"team": pd.Series(dtype=object), SHARE_USD: pd.Series(dtype=float)})
    rows = allocated[["cluster", "team", c.ALLOCATED_COST_USD]].astype(
        {"cluster": object, "team": object, c.ALLOCATED_COST_USD: "float64"}
    )
    costs = unallocated[["cluster", c.UNALLOCATED_COST_USD]].astype(
        {"cluster": object, c.UNALLOCATED_COST_USD: "float64"}
    )
    pool = costs.groupby("cluster", sort=False)[c.UNALLOCATED_COST_USD].sum()
    held = rows.groupby("cluster", sort=False)[c.ALLOCATED_COST_USD].transform("sum")
    idle = rows["cluster"].map(pool).fillna(0.0)
    weight = rows[c.ALLOCATED_COST_USD].div(held.where(held > 0)).fillna(0.0)
    shares = rows.assign(**{SHARE_USD: idle * weight})
    out = shares.groupby("team", sort=True)[SHARE_USD].sum().reset_index()
    return out.astype({"team": object})


def with_shares(teams: pd.DataFrame, shares: pd.DataFrame) -> pd.DataFrame:
    """``teams`` (one row per team with ``allocated_cost_usd``) with each team's share and its
    allocated cost plus that share; a team without a share gets 0."""
    out = teams.merge(shares, on="team", how="left")
    out[SHARE_USD] = out[SHARE_USD].astype("float64").fillna(0.0)
    out[SHOWBACK_USD] = out[c.ALLOCATED_COST_USD].astype("float64") + out[SHARE_USD]
    return out
