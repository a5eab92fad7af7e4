"""Reports: the weekly waste report of an ISO week, previewed, and downloadable as the exact
CSV ``gpuwatch report weekly --week`` writes. ``/reports?week=2026-W46``."""

from __future__ import annotations

from typing import Any

import dash
import pandas as pd
from dash import Input, Output, State, dcc, html

from gpuwatch.analytics.totals import monthly_basis
from gpuwatch.app import format as fmt
from gpuwatch.app import grid
from gpuwatch.app.components import (
    card,
    empty_state,
    no_data,
    records_of,
    section,
    shell,
)
from gpuwatch.app.context import page_context, query_value
from gpuwatch.app.data import DashboardData, Snapshot
from gpuwatch.app.server import data_source
from gpuwatch.app.urls import PAGE_URL_ID, URL_ID, with_param
from gpuwatch.app.views_store import (
    asked_weeks,
    default_week,
    report_weeks,
    weekly,
    weekly_csv,
    weekly_view,
)
from gpuwatch.report.summary import report_totals
from gpuwatch.report.weekly import HEADER, OPTIONAL_PCT

PAGE, PATH, TITLE = "reports", "/reports", "Reports"

_NUMERIC = {
    "gpus_requested": 0,
    "allocated_gpu_hours": 2,
    "used_gpu_hours": 2,
    "efficiency_pct": 1,
    "idle_gpu_hours": 2,
    "stalled_gpu_hours": 2,
    "throttled_gpu_hours": 2,
    "failing_gpu_hours": 2,
    "unallocated_gpu_hours": 2,
} | dict.fromkeys(OPTIONAL_PCT, 1)
_MONEY = {
    "allocated_cost_usd",
    "idle_cost_usd",
    "unused_cost_usd",
    "est_monthly_savings_usd",
    "stalled_cost_usd",
    "failing_cost_usd",
    "unallocated_cost_usd",
}
#: Summed by the totals row: hours and dollars (not counts of GPUs, nor percentages).
_TOTALS = {name for name in HEADER if name.endswith(("_gpu_hours", "_usd"))}
COLUMNS = [
    grid.money_column(name)
    if name in _MONEY
    else grid.number_column(name, digits=_NUMERIC[name], total=name in _TOTALS)
    if name in _NUMERIC
    else grid.text_column(name, pinned=name == "workload")
    for name in HEADER
]
grid.register("reports-table")


def chosen_week(snap: Snapshot, query: dict[str, Any]) -> str | None:
    week = query_value(query, "week")
    return week if week in report_weeks(snap) else default_week(snap)


def download(n_clicks: int | None, week: str | None) -> Any:
    """The week's report as the CLI's CSV, byte for byte."""
    if not n_clicks or not week:
        return dash.no_update
    source = data_source()
    snap = source.data.current()
    if week not in report_weeks(snap):
        return dash.no_update
    return {
        "content": weekly_csv(source.data, snap, week),
        "filename": f"gpuwatch-weekly-{week}.csv",
        "type": "text/csv",
    }


def pick_week(week: str | None, shown: str | None, search: str | None) -> Any:
    """A week picked: the URL's query names it (so the view can be shared)."""
    if not week or week == shown:
        return dash.no_update
    return with_param(search, "week", week)


dash.callback(
    Output("reports-download", "data"),
    Input("reports-download-button", "n_clicks"),
    State("reports-week", "value"),
    prevent_initial_call=True,
)(download)
dash.callback(
    Output(PAGE_URL_ID, "search", allow_duplicate=True),
    Input("reports-week", "value"),
    State("reports-shown-week", "children"),
    State(URL_ID, "search"),
    prevent_initial_call=True,
)(pick_week)


def summary_cards(frame: pd.DataFrame, data_hours: float) -> html.Div:
    """Each card is its column's sum over every row, as a spreadsheet adds up the CSV
    (:func:`~gpuwatch.report.summary.report_totals`, which ``report weekly`` echoes)."""
    totals = report_totals(frame)
    return html.Div(
        [
            card("Rows", fmt.number(totals.rows), f"{totals.workload_rows} workload rows", "rows"),
            card(
                "Allocated cost",
                fmt.usd(totals.allocated_cost_usd),
                "held by workloads",
                "allocated",
            ),
            card(
                "Idle cost",
                fmt.usd(totals.idle_cost_usd),
                "allocated, below the idle threshold",
                "idle",
            ),
            card(
                "Unallocated cost",
                fmt.usd(totals.unallocated_cost_usd),
                "capacity no pod held",
                "unallocated",
            ),
            card(
                "Savings / month",
                fmt.usd(totals.monthly_savings_usd),
                f"largest recommendation per workload, {monthly_basis(data_hours)}",
                "savings",
            ),
        ],
        className="gw-cards",
        id="reports-cards",
    )


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return grid.rows_for(records_of(frame[list(HEADER)]), COLUMNS)


def week_export(week: str) -> grid.Export:
    """The preview's CSV export facts: the ISO week is its window; the report has no filters."""
    span = f"{week} (Monday 00:00 UTC to the next Monday)"
    return grid.Export("weekly-preview", f"Weekly waste report {week}", week, span, {})


def body(data: DashboardData, snap: Snapshot, week: str) -> list[Any]:
    weeks = report_weeks(snap)
    view = weekly_view(data, snap, week)
    frame = view.frame
    picker = html.Div(
        [
            html.Label("ISO week", htmlFor="reports-week"),
            dcc.Dropdown(
                id="reports-week",
                options=[{"label": w, "value": w} for w in weeks],
                value=week,
                clearable=False,
                className="gw-dropdown gw-week",
            ),
            html.Button("Download report CSV", id="reports-download-button", className="gw-button"),
            dcc.Download(id="reports-download"),
            html.Span(week, id="reports-shown-week", hidden=True),
        ],
        className="gw-actions",
    )
    if frame.empty:
        preview: list[Any] = [empty_state(PAGE, "No samples in this week", "Pick another week.")]
    else:
        preview = [
            summary_cards(frame, view.data_hours),
            grid.grid("reports-table", COLUMNS, records(frame), week_export(week), page_size=20),
        ]
    note = (
        "The whole fleet, Monday 00:00 UTC to the next Monday, one row per workload and GPU "
        "model plus one row of unallocated capacity per node (namespace __idle__, kind "
        "Unallocated, its hours and dollars in the unallocated columns only), by idle cost; "
        "every card is its column's sum over all rows. Read "
        "as `gpuwatch report weekly` reads it by default: from the hourly roll-ups, or the "
        "raw samples where the roll-ups do not match the idle threshold."
    )
    return [section(f"Weekly waste report {week}", picker, *preview, note=note)]


def layout(**query: Any) -> html.Div:
    ctx = page_context(query)
    snap, f = ctx.snap, ctx.filters
    week = None if snap.empty else chosen_week(snap, query)
    if week is None:
        return no_data(PAGE, PATH, TITLE, f, snap)
    return shell(PAGE, PATH, TITLE, f, snap, None, body(ctx.source.data, snap, week), filters=False)


def warm(data: DashboardData, snap: Snapshot) -> None:
    """The weeks pages asked for in the last minutes (``data.ASKED_KEEP_S``), and the default
    week for the first snapshot: most data versions nobody opens this page, and a week's
    report costs seconds of every warm-up."""
    weeks = asked_weeks(snap)
    week = default_week(snap) if snap.first else None
    for name in dict.fromkeys([*([week] if week else []), *weeks]):
        weekly(data, snap, name)


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · Reports", order=5, layout=layout
)
