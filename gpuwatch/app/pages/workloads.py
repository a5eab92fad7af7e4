"""Workloads: every workload that held GPUs in the window; a click opens its page."""

from __future__ import annotations

from typing import Any

import dash
import pandas as pd
from dash import Input, Output, html

from gpuwatch.analytics.totals import monthly_basis
from gpuwatch.app.components import (
    URL_ID,
    data_table,
    money_column,
    no_data,
    no_match,
    number_column,
    records_of,
    row_link,
    section,
    shell,
    text_column,
)
from gpuwatch.app.context import page_context
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.app.views import data_hours, options, workloads

PAGE, PATH, TITLE = "workloads", "/workloads", "Workloads"

COLUMNS = [
    text_column("workload"),
    text_column("workload_kind"),
    text_column("namespace"),
    text_column("cluster"),
    text_column("team"),
    text_column("gpu_models"),
    text_column("allocation"),
    number_column("allocated_gpu_hours"),
    number_column("efficiency_pct"),
    money_column("allocated_cost_usd"),
    money_column("idle_cost_usd"),
    money_column("est_monthly_savings_usd"),
]
_TEXT = ["workload", "workload_kind", "namespace", "cluster", "team", "gpu_models", "allocation"]
_NUMBERS = [col["id"] for col in COLUMNS if col["id"] not in _TEXT]


def workload_href(f: Filters, row: dict[str, Any]) -> str:
    return f.href(
        "/workload",
        cluster=row["cluster"],
        namespace=row["namespace"],
        kind=row["workload_kind"],
        name=row["workload"],
    )


def records(frame: pd.DataFrame, f: Filters) -> list[dict[str, Any]]:
    """Table rows; each row's ``id`` is the link to the workload's page."""
    out = frame[_TEXT + _NUMBERS].copy()
    for name in _NUMBERS:
        out[name] = out[name].astype("float64").round(2)
    rows = records_of(out.astype(object).where(out.notna(), None))
    for row in rows:
        row["id"] = workload_href(f, row)
        for name in _TEXT:
            row[name] = "" if row[name] is None else str(row[name])
    return rows


def open_row(active_cell: dict[str, Any] | None) -> Any:
    """A click on a row: the workload's page (the row id is its link)."""
    return row_link(active_cell, "/workload")


dash.callback(
    Output(URL_ID, "href", allow_duplicate=True),
    Input("workloads-table", "active_cell"),
    prevent_initial_call=True,
)(open_row)


def layout(**query: Any) -> html.Div:
    ctx = page_context(query)
    snap, f = ctx.snap, ctx.filters
    if snap.empty:
        return no_data(PAGE, PATH, TITLE, f, snap)
    frame = workloads(snap, f)
    if frame.empty:
        content: Any = no_match(PAGE, f, PATH)
    else:
        table = data_table(
            "workloads-table",
            COLUMNS,
            records(frame, f),
            filter_action="native",
            style_data_conditional=[
                {"if": {"column_id": "workload"}, "color": "#2563eb", "cursor": "pointer"}
            ],
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
