"""Cost over time by group: the largest groups, the rest as one, and unallocated capacity.

Pure: one row per (bucket, group) in, the stacked series out. Every bucket's groups add up to
what the fleet's GPUs cost in it (allocated cost of every group plus unallocated cost), so the
stack's height is the fleet's cost, as the Overview's cards add it up.
"""

from __future__ import annotations

import pandas as pd

#: The group of GPU time no pod held (its cost is ``unallocated_cost_usd``).
UNALLOCATED = "unallocated"
#: The groups beyond the largest, summed.
OTHER = "other"
#: Groups drawn on their own; the others are summed as :data:`OTHER`.
TOP_GROUPS = 10
COST_USD = "cost_usd"


def stack(costs: pd.DataFrame, top: int = TOP_GROUPS) -> pd.DataFrame:
    """The series to stack: the ``top`` groups by cost over every bucket, :data:`OTHER`, then
    :data:`UNALLOCATED`.

    ``costs``: columns ``bucket_ts``, ``group`` (:data:`UNALLOCATED` for GPU time no pod
    held) and ``cost_usd``, any number of rows per pair. Returns one row per (``group``,
    ``bucket_ts``) with the summed ``cost_usd`` and ``rank`` (0: the largest group; groups of
    equal cost by name), ordered by rank, then bucket.

    >>> costs = pd.DataFrame({"bucket_ts": [0, 0, 0, 3600], "group": ["a", "b", "c", "a"],
    ...                       "cost_usd": [5.0, 3.0, 1.0, 2.0]})
    >>> stack(costs, top=1).to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
    [{'group': 'a', 'bucket_ts': 0, 'cost_usd': 5.0, 'rank': 0},
     {'group': 'a', 'bucket_ts': 3600, 'cost_usd': 2.0, 'rank': 0},
     {'group': 'other', 'bucket_ts': 0, 'cost_usd': 4.0, 'rank': 1}]
    """
    frame = costs.astype({"group": object, "bucket_ts": "int64", COST_USD: "float64"})
    totals = frame[frame["group"] != UNALLOCATED].groupby("group")[COST_USD].sum()
    ranked = sorted(totals.items(), key=lambda item: (-item[1], str(item[0])))
    kept = [str(name) for name, _ in ranked[:top]]
    order = {name: i for i, name in enumerate(kept)}
    named = frame["group"].where(frame["group"].isin(kept) | frame["group"].eq(UNALLOCATED), OTHER)
    order[OTHER] = len(kept)
    order[UNALLOCATED] = len(kept) + 1
    summed = (
        frame.assign(group=named)
        .groupby(["group", "bucket_ts"], sort=False)[COST_USD]
        .sum()
        .reset_index()
    )
    summed["rank"] = summed["group"].map(order).astype("int64")
    ordered = summed.sort_values(["rank", "bucket_ts"], kind="stable").reset_index(drop=True)
    return ordered[["group", "bucket_ts", COST_USD, "rank"]]
