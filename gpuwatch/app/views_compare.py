"""Compare with the previous period: the Overview's figures over the window just before the
chosen one, of the same length and under the same filters (``?compare=previous``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.app import format as fmt
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.views import cost_rows, pct_of, sums, window_bounds

#: The URL's query parameter and the value that turns the comparison on.
COMPARE_PARAM, COMPARE_PREVIOUS = "compare", "previous"


@dataclass(frozen=True)
class Period:
    """The figures of one window that the cards compare."""

    start_ts: int
    end_ts: int
    total_cost_usd: float
    idle_cost_usd: float
    unallocated_cost_usd: float
    allocated_pct: float
    efficiency_pct: float


def _period(rows: pd.DataFrame, start_ts: int, end_ts: int) -> Period:
    total = sums(rows, []).iloc[0]
    return Period(
        start_ts=start_ts,
        end_ts=end_ts,
        total_cost_usd=float(total[c.CAPACITY_COST_USD]),
        idle_cost_usd=float(total[c.IDLE_COST_USD]),
        unallocated_cost_usd=float(total[c.UNALLOCATED_COST_USD]),
        allocated_pct=pct_of(total[c.ALLOCATED_GPU_HOURS], total[c.CAPACITY_GPU_HOURS]),
        efficiency_pct=pct_of(total[c.USED_GPU_HOURS], total[c.ALLOCATED_GPU_HOURS]),
    )


def previous_period(snap: Snapshot, f: Filters) -> Period | str:
    """The figures of the window before ``f``'s, summed by the store, or why there are none
    (the reason as text): the store must hold data from the previous window's start on."""
    start, end = window_bounds(snap, f)
    previous = start - (end - start)
    if snap.first_ts is None or snap.first_ts > previous:
        return f"no previous period: the data starts after {fmt.when(previous)}"

    def compute() -> Period:
        return _period(cost_rows(snap, f, skip_s=end - start), previous, start)

    return snap.memo(("previous_period", f), compute)


def change_usd(now: float, before: float) -> str:
    """``+$1,234 (+12.3%)`` from ``before`` to ``now``."""
    delta = now - before
    sign = "+" if delta >= 0 else "-"
    text = f"{sign}{fmt.usd(abs(delta))}"
    if before > 0:
        text += f" ({100.0 * delta / before:+.1f}%)"
    return text


def change_points(now: float, before: float) -> str:
    """``+3.1 points`` from one percentage to another (``–`` where either is missing)."""
    if not (np.isfinite(now) and np.isfinite(before)):
        return fmt.DASH
    return f"{now - before:+.1f} points"
