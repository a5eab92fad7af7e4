"""Teams & namespaces: who holds GPUs, how well they use them, and what it costs.

A click on a team or namespace row narrows the page (and every other page) to it.
"""

from __future__ import annotations

from typing import Any

import dash
import pandas as pd
from dash import Input, Output, State, dcc, html

from gpuwatch.analytics.totals import monthly_basis
from gpuwatch.app.components import (
    URL_ID,
    data_table,
    html_table,
    money_column,
    no_data,
    no_match,
    number_column,
    records_of,
    search_with,
    section,
    shell,
    text_column,
)
from gpuwatch.app.context import page_context
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.app.pages.queues import queue_href
from gpuwatch.app.views import breakdown, data_hours, options
from gpuwatch.app.views_queues import submitted_queues

PAGE, PATH, TITLE = "teams", "/teams", "Teams & namespaces"

MEASURES = [
    number_column("allocated_gpu_hours"),
    number_column("used_gpu_hours"),
    number_column("efficiency_pct"),
    number_column("idle_gpu_hours"),
    money_column("allocated_cost_usd"),
    money_column("idle_cost_usd"),
    money_column("unused_cost_usd"),
    money_column("est_monthly_savings_usd"),
]
_NUMBERS = [column["id"] for column in MEASURES]


def records(frame: pd.DataFrame, keys: list[str]) -> list[dict[str, Any]]:
    """Table rows: the keys as text, measures rounded, and an ``id`` the drill-down reads."""
    out = frame[[*keys, *_NUMBERS]].copy()
    for name in _NUMBERS:
        out[name] = out[name].astype("float64").round(2)
    rows = records_of(out.astype(object).where(out.notna(), None))
    for row in rows:
        row["id"] = "\x1f".join(str(row[k]) for k in keys)
        for k in keys:
            row[k] = str(row[k])
    return rows


def drill_down(active_cell: dict[str, Any] | None, search: str | None, keys: list[str]) -> Any:
    """A click on a row's key cell: the URL's query narrowed to that row."""
    if not active_cell or active_cell.get("column_id") not in keys:
        return dash.no_update
    values = str(active_cell.get("row_id", "")).split("\x1f")
    if len(values) != len(keys):
        return dash.no_update
    return search_with(search, dict(zip(keys, values, strict=True)))


def open_team(active_cell: dict[str, Any] | None, search: str | None) -> Any:
    return drill_down(active_cell, search, ["team"])


def open_namespace(active_cell: dict[str, Any] | None, search: str | None) -> Any:
    return drill_down(active_cell, search, ["cluster", "namespace"])


for _table, _handler in (("teams-table", open_team), ("teams-namespaces", open_namespace)):
    dash.callback(
        Output(URL_ID, "search", allow_duplicate=True),
        Input(_table, "active_cell"),
        State(URL_ID, "search"),
        prevent_initial_call=True,
    )(_handler)


def queue_links(f: Filters, cluster: str, queues: list[str]) -> html.Span:
    links: list[Any] = []
    for queue in queues:
        if links:
            links.append(", ")
        links.append(dcc.Link(queue, href=queue_href(f, cluster, queue), className="gw-link"))
    return html.Span(links)


def queues_section(snap: Snapshot, f: Filters) -> list[Any]:
    """The queues each team's namespaces submit to, each a link to its Queues page."""
    pairs = submitted_queues(snap, f)
    if pairs.empty:
        return []
    keys = ["team", "cluster", "namespace"]
    rows = [
        {"team": t, "cluster": c, "namespace": n, "queues": sorted(map(str, g["queue"]))}
        for (t, c, n), g in pairs.groupby(keys, sort=True)
    ]
    columns = [
        ("Team", lambda r: str(r["team"])),
        ("Cluster", lambda r: str(r["cluster"])),
        ("Namespace", lambda r: str(r["namespace"])),
        ("Queues", lambda r: queue_links(f, str(r["cluster"]), r["queues"])),
    ]
    table = html_table("teams-queues", columns, rows)
    note = "The Kueue or Volcano queues its pods ran or waited in; open one for its quota."
    return [section("Queues", table, note=note, key="teams-queues-section")]


def body(snap: Snapshot, f: Filters) -> list[Any]:
    teams = breakdown(snap, f, ("team",))
    namespaces = breakdown(snap, f, ("cluster", "namespace"))
    return [
        section(
            "Teams",
            data_table("teams-table", [text_column("team"), *MEASURES], records(teams, ["team"])),
            note="Click a team to narrow every view to it. Savings: the largest recommendation "
            f"per workload, {monthly_basis(data_hours(snap, f.window))}.",
        ),
        section(
            "Namespaces",
            data_table(
                "teams-namespaces",
                [text_column("cluster"), text_column("namespace"), *MEASURES],
                records(namespaces, ["cluster", "namespace"]),
            ),
            note="Click a namespace to narrow every view to it.",
        ),
        *queues_section(snap, f),
    ]


def layout(**query: Any) -> html.Div:
    ctx = page_context(query)
    snap, f = ctx.snap, ctx.filters
    if snap.empty:
        return no_data(PAGE, PATH, TITLE, f, snap)
    teams = breakdown(snap, f, ("team",))
    content: Any = body(snap, f) if len(teams) else no_match(PAGE, f, PATH)
    return shell(PAGE, PATH, TITLE, f, snap, options(snap, f), content)


def warm(data: DashboardData, snap: Snapshot) -> None:
    if not snap.empty:
        body(snap, Filters())


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · Teams", order=1, layout=layout
)
