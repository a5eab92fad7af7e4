"""Showback: each cluster's unallocated cost spread over its teams by allocated cost."""

from __future__ import annotations

import pandas as pd
import pytest

from gpuwatch.analytics.showback import SHARE_USD, SHOWBACK_USD, spread_unallocated, with_shares


def _allocated(rows: list[tuple[str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["cluster", "team", "allocated_cost_usd"])


def _unallocated(rows: list[tuple[str, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["cluster", "unallocated_cost_usd"])


def _shares(frame: pd.DataFrame) -> dict[str, float]:
    return {str(t): pytest.approx(v) for t, v in zip(frame["team"], frame[SHARE_USD], strict=True)}


def test_each_cluster_is_split_by_the_teams_allocated_cost_there() -> None:
    allocated = _allocated([("a", "ml", 300.0), ("a", "web", 100.0), ("b", "ml", 50.0),
                            ("b", "data", 150.0)])  # fmt: skip
    unallocated = _unallocated([("a", 40.0), ("b", 20.0)])
    # a: ml 3/4 of 40 = 30, web 1/4 = 10; b: ml 1/4 of 20 = 5, data 3/4 = 15
    assert _shares(spread_unallocated(allocated, unallocated)) == {
        "data": 15.0, "ml": 35.0, "web": 10.0,
    }  # fmt: skip


def test_a_cluster_nobody_used_keeps_its_unallocated_cost() -> None:
    allocated = _allocated([("a", "ml", 10.0), ("idle-cluster", "ml", 0.0)])
    unallocated = _unallocated([("a", 4.0), ("idle-cluster", 100.0), ("unheld", 7.0)])
    shares = spread_unallocated(allocated, unallocated)
    assert _shares(shares) == {"ml": 4.0}  # 100 and 7 are charged to nobody


def test_no_team_no_share() -> None:
    shares = spread_unallocated(_allocated([]), _unallocated([("a", 5.0)]))
    assert shares.empty and list(shares.columns) == ["team", SHARE_USD]


def test_with_shares_adds_the_share_to_the_allocated_cost() -> None:
    teams = pd.DataFrame({"team": ["ml", "new"], "allocated_cost_usd": [300.0, 2.0]})
    shares = pd.DataFrame({"team": ["ml"], SHARE_USD: [35.0]})
    out = with_shares(teams, shares)
    assert out[SHARE_USD].tolist() == [35.0, 0.0]
    assert out[SHOWBACK_USD].tolist() == [335.0, 2.0]
