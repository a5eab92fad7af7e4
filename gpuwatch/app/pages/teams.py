"""Teams & namespaces: who holds GPUs, how well they use them, and what it costs.

Each team and namespace name is a link narrowing the page (and every other page) to it.
"""

from __future__ import annotations

from typing import Any

import dash
import pandas as pd
from dash import dcc, html

from gpuwatch.analytics import budgets as b
from gpuwatch.analytics.showback import SHARE_USD, SHOWBACK_USD
from gpuwatch.analytics.totals import monthly_basis
from gpuwatch.app import format as fmt
from gpuwatch.app import grid
from gpuwatch.app.components import html_table, no_data, no_match, records_of, section, shell
from gpuwatch.app.context import page_context
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.app.pages.queues import queue_href
from gpuwatch.app.views import breakdown, data_hours, options
from gpuwatch.app.views_queues import submitted_queues
from gpuwatch.app.views_showback import team_budgets, team_showback
from gpuwatch.config import ShowbackSettings

PAGE, PATH, TITLE = "teams", "/teams", "Teams & namespaces"
grid.register_tables("teams-queues")


MEASURES = [
    grid.number_column("allocated_gpu_hours", total=True),
    grid.number_column("used_gpu_hours", total=True),
    grid.number_column("efficiency_pct"),
    grid.number_column("idle_gpu_hours", total=True),
    grid.money_column("allocated_cost_usd"),
    grid.money_column("idle_cost_usd"),
    grid.money_column("unused_cost_usd"),
    grid.money_column("est_monthly_savings_usd"),
]
TEAM_COLUMNS = [grid.text_column("team", link=grid.HREF, pinned=True), *MEASURES]
#: With ``showback.spread_unallocated``: each team's share of the unallocated cost, and its
#: allocated cost plus that share (docs/cost-model.md#showback).
SHOWBACK_COLUMNS = [
    *TEAM_COLUMNS,
    grid.money_column(SHARE_USD, "Unallocated share ($)"),
    grid.money_column(SHOWBACK_USD, "Allocated + share ($)"),
]
NAMESPACE_COLUMNS = [
    grid.text_column("namespace", link=grid.HREF, pinned=True),
    grid.text_column("cluster"),
    *MEASURES,
]
#: Month to date and month-end forecast against each team's budget (docs/cost-model.md#budgets).
BUDGET_COLUMNS = [
    grid.text_column("team", link=grid.HREF, pinned=True),
    grid.money_column(b.BUDGET_USD, "Monthly budget ($)", total=False),
    grid.money_column(b.MONTH_TO_DATE_USD, "Month to date ($)"),
    grid.money_column(b.RUN_RATE_USD_PER_HOUR, "Run rate, last 7 days ($/h)"),
    grid.money_column(b.FORECAST_USD, "Forecast, month end ($)"),
    grid.number_column(b.FORECAST_BUDGET_PCT, "Forecast % of budget"),
]
#: A forecast above its budget, in red (the condition of ``GPUTeamBudgetForecastExceeded``).
OVER_BUDGET = {b.FORECAST_BUDGET_PCT: {"gw-cell-alert": f"params.value > {b.OVER_BUDGET_PCT:g}"}}
grid.register("teams-table", "teams-namespaces", "teams-budgets")


def records(
    frame: pd.DataFrame, keys: list[str], columns: list[grid.Column], f: Filters
) -> list[dict[str, Any]]:
    """Table rows; each row's ``href`` is this page narrowed to the row's keys."""
    rows = grid.rows_for(records_of(frame), columns)
    for row in rows:
        row[grid.HREF] = f.with_(**{k: row[k] for k in keys}).href(PATH)
    return rows


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
    table = grid.exportable(
        html_table("teams-queues", columns, rows),
        grid.page_export("team-queues", "Queues per team", snap, f),
    )
    note = "The Kueue or Volcano queues its pods ran or waited in; open one for its quota."
    return [section("Queues", table, note=note, key="teams-queues-section")]


def teams_section(snap: Snapshot, f: Filters, spread: bool) -> Any:
    """The teams table; with ``spread``, each team's share of the unallocated cost too."""
    teams = team_showback(snap, f) if spread else breakdown(snap, f, ("team",))
    columns = SHOWBACK_COLUMNS if spread else TEAM_COLUMNS
    note = (
        "Click a team to narrow every view to it. Savings: the largest recommendation per "
        f"workload, {monthly_basis(data_hours(snap, f.window))}."
    )
    if spread:
        note += (
            " Unallocated share: each cluster's unallocated cost spread over its teams by "
            "their allocated cost there (showback.spread_unallocated), whatever team or "
            "namespace the page is narrowed to."
        )
    return section(
        "Teams",
        grid.grid(
            "teams-table",
            columns,
            records(teams, ["team"], columns, f),
            grid.page_export("teams", "Teams", snap, f),
        ),
        note=note,
    )


def budgets_section(snap: Snapshot, f: Filters, budgets: dict[str, float]) -> Any:
    """Each team's month to date and month-end forecast against its monthly budget."""
    table = team_budgets(snap, budgets)
    if f.team is not None:
        table = table[table["team"] == f.team]
    month_start, month_end = b.month_bounds(snap.end_ts)
    note = (
        f"Allocated cost in every cluster from {fmt.when(month_start)} to the end of the data "
        f"({fmt.when(snap.end_ts)}), whatever the window and cluster filter. Forecast: month to "
        f"date + the last {b.RUN_RATE_DAYS} days' cost per hour × the "
        f"{(month_end - snap.end_ts) / 3600:,.0f} hours left in the month; in red above the "
        "budget (the GPUTeamBudgetForecastExceeded alert). "
    )
    note += (
        "Budgets: showback.monthly_budget_usd."
        if budgets
        else "No team has a budget: set them in showback.monthly_budget_usd."
    )
    rows = records(table, ["team"], BUDGET_COLUMNS, f)
    export = grid.page_export("budgets", "Team budgets", snap, f)
    content = grid.grid("teams-budgets", BUDGET_COLUMNS, rows, export, cell_classes=OVER_BUDGET)
    return section("Budgets", content, note=note)


def body(snap: Snapshot, f: Filters, showback: ShowbackSettings | None = None) -> list[Any]:
    showback = showback or ShowbackSettings()
    namespaces = breakdown(snap, f, ("cluster", "namespace"))
    return [
        teams_section(snap, f, showback.spread_unallocated),
        budgets_section(snap, f, showback.monthly_budget_usd),
        section(
            "Namespaces",
            grid.grid(
                "teams-namespaces",
                NAMESPACE_COLUMNS,
                records(namespaces, ["cluster", "namespace"], NAMESPACE_COLUMNS, f),
                grid.page_export("namespaces", "Namespaces", snap, f),
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
    showback = ctx.source.settings.showback
    content: Any = body(snap, f, showback) if len(teams) else no_match(PAGE, f, PATH)
    return shell(PAGE, PATH, TITLE, f, snap, options(snap, f), content)


def warm(data: DashboardData, snap: Snapshot) -> None:
    if not snap.empty:
        body(snap, Filters(), data.settings.showback)


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · Teams", order=1, layout=layout
)
