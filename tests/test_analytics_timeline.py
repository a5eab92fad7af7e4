"""Cost over time, stacked: the largest groups, the rest as other, unallocated on top."""

from __future__ import annotations

import pandas as pd

from gpuwatch.analytics.timeline import OTHER, UNALLOCATED, stack


def _costs(rows: list[tuple[int, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["bucket_ts", "group", "cost_usd"])


def test_largest_groups_then_other_then_unallocated() -> None:
    costs = _costs(
        [
            (0, "web", 2.0),
            (0, "ml", 5.0),
            (0, "ml", 1.0),  # several rows of one (bucket, group) add up
            (0, UNALLOCATED, 9.0),  # the largest, yet never a ranked group
            (3600, "ml", 4.0),
            (3600, "data", 1.5),
            (3600, "lab", 0.5),
            (3600, UNALLOCATED, 1.0),
        ]
    )
    out = stack(costs, top=2)
    assert out.to_dict("records") == [
        {"group": "ml", "bucket_ts": 0, "cost_usd": 6.0, "rank": 0},
        {"group": "ml", "bucket_ts": 3600, "cost_usd": 4.0, "rank": 0},
        {"group": "web", "bucket_ts": 0, "cost_usd": 2.0, "rank": 1},
        {"group": OTHER, "bucket_ts": 3600, "cost_usd": 2.0, "rank": 2},
        {"group": UNALLOCATED, "bucket_ts": 0, "cost_usd": 9.0, "rank": 3},
        {"group": UNALLOCATED, "bucket_ts": 3600, "cost_usd": 1.0, "rank": 3},
    ]


def test_each_bucket_keeps_its_total() -> None:
    costs = _costs([(0, f"g{i}", float(i)) for i in range(15)] + [(0, UNALLOCATED, 3.0)])
    out = stack(costs, top=10)
    assert out["cost_usd"].sum() == sum(range(15)) + 3.0
    assert out.loc[out["group"] == OTHER, "cost_usd"].tolist() == [0.0 + 1 + 2 + 3 + 4]


def test_ties_rank_by_name() -> None:
    out = stack(_costs([(0, "b", 1.0), (0, "a", 1.0)]), top=1)
    assert out["group"].tolist() == ["a", OTHER]
