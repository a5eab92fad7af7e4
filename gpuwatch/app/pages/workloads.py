"""Workloads: every workload that held GPUs in the window; each name links to its page."""

from __future__ import annotations

from typing import Any

import dash
import pandas as pd
from dash import html

from gpuwatch.analytics.totals import monthly_basis
from gpuwatch.app import grid
from gpuwatch.app.components import no_data, no_match, records_of, section, shell
from gpuwatch.app.context import page_context
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.app.links import workload_href
from gpuwatch.app.views import data_hours, options, workloads

PAGE, PATH, TITLE = "workloads", "/workloads", "Workloads"

COLUMNS = [
    grid.text_column("workload", link=grid.HREF, pinned=True),
    grid.text_column("workload_kind"),
    grid.text_column("namespace"),
    grid.text_column("cluster"),
    grid.text_column("team"),
    grid.text_column("gpu_models"),
    grid.text_column("allocation"),
    grid.number_column("allocated_gpu_hours", total=True),
    grid.number_column("efficiency_pct"),
    grid.money_column("allocated_cost_usd"),
    grid.money_column("idle_cost_usd"),
    grid.money_column("est_monthly_savings_usd"),
]
grid.register("workloads-table")


def records(frame: pd.DataFrame, f: Filters) -> list[dict[str, Any]]:
    """Table rows; each row's ``href`` is the link to the workload's page."""
    rows = grid.rows_for(records_of(frame[[col.key for col in COLUMNS]]), COLUMNS)
    for row in rows:
        row[grid.HREF] = workload_href(f, row)
    return rows


def layout(**query: Any) -> html.Div:
    ctx = page_context(query)
    snap, f = ctx.snap, ctx.filters
    if snap.empty:
        return no_data(PAGE, PATH, TITLE, f, snap)
    frame = workloads(snap, f)
    if frame.empty:
        content: Any = no_match(PAGE, f, PATH)
    else:
        table = grid.grid(
            "workloads-table",
            COLUMNS,
            records(frame, f),
            grid.page_export("workloads", TITLE, snap, f),
        )
        content = section(
            f"{len(frame)} workloads",
            table,
            note="Sorted by idle cost. Click a workload for its GPUs, pods, cost and "
            "recommendations; type in the row under the headings to filter. Savings: its "
            f"largest recommendation, {monthly_basis(data_hours(snap, f.window))}.",
        )
    return shell(PAGE, PATH, TITLE, f, snap, options(snap, f), content)


def warm(data: DashboardData, snap: Snapshot) -> None:
    if not snap.empty:
        records(workloads(snap, Filters()), Filters())


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · Workloads", order=2, layout=layout
)
