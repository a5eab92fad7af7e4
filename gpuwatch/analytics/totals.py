"""Totals every surface shows, defined once (docs/cost-model.md#potential-savings).

A workload's suggestions are alternatives (reclaim its GPU, or move it to a MIG slice, or to a
cheaper model): their savings overlap and never add up. The **potential savings** of a set of
recommendations is therefore the sum over workloads of each one's largest saving; the CLI's
footer, the dashboard's cards and the weekly CSV's `est_monthly_savings_usd` column all use it.
"""

from __future__ import annotations

import pandas as pd

from gpuwatch.analytics import columns as c

SAVINGS = "est_monthly_savings_usd"


def best_per_workload(recs: pd.DataFrame) -> pd.DataFrame:
    """Per workload (cluster, namespace, kind, name, GPU model): its largest-saving row, in the
    order of ``recs`` among equal savings; columns: the keys, ``team``, ``kind`` and savings."""
    keys = list(c.WORKLOAD_KEYS)
    if recs.empty:
        return pd.DataFrame(columns=[*keys, "team", "kind", SAVINGS])
    ordered = recs.sort_values(SAVINGS, ascending=False, kind="stable")
    best = ordered.drop_duplicates(keys, keep="first")
    return best[[*keys, "team", "kind", SAVINGS]].reset_index(drop=True)


def potential_savings_usd(recs: pd.DataFrame) -> float:
    """Σ over workloads of the largest ``est_monthly_savings_usd`` among their suggestions."""
    if recs.empty:
        return 0.0
    return float(best_per_workload(recs)[SAVINGS].astype("float64").sum())
