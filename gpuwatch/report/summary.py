"""The weekly report's totals: what its cards show and what ``report weekly`` echoes.

Each figure is its column's sum over the report's rows, as a spreadsheet adds up the CSV;
the savings count the largest suggestion per workload
(:func:`~gpuwatch.analytics.totals.potential_savings_usd`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from gpuwatch.analytics.totals import potential_savings_usd
from gpuwatch.domain.words import counted
from gpuwatch.report.weekly import IDLE_NAMESPACE


@dataclass(frozen=True)
class ReportTotals:
    rows: int
    workload_rows: int
    allocated_cost_usd: float
    idle_cost_usd: float
    unallocated_cost_usd: float
    monthly_savings_usd: float


def report_totals(frame: pd.DataFrame) -> ReportTotals:
    """The totals of report rows (:func:`~gpuwatch.report.weekly.weekly_report`'s frame)."""
    if frame.empty:
        return ReportTotals(0, 0, 0.0, 0.0, 0.0, 0.0)
    return ReportTotals(
        rows=len(frame),
        workload_rows=int((~frame["namespace"].eq(IDLE_NAMESPACE)).sum()),
        allocated_cost_usd=float(frame["allocated_cost_usd"].astype("float64").sum()),
        idle_cost_usd=float(frame["idle_cost_usd"].astype("float64").sum()),
        unallocated_cost_usd=float(frame["unallocated_cost_usd"].astype("float64").sum()),
        monthly_savings_usd=potential_savings_usd(frame),
    )


def describe_totals(totals: ReportTotals) -> str:
    """One line of totals, dollars to the cent as the CSV has them."""
    return (
        f"{counted(totals.rows, 'row')} ({counted(totals.workload_rows, 'workload row')}); "
        f"allocated ${totals.allocated_cost_usd:,.2f}, idle ${totals.idle_cost_usd:,.2f}, "
        f"unallocated ${totals.unallocated_cost_usd:,.2f}; "
        f"potential savings ${totals.monthly_savings_usd:,.2f} per month"
    )
