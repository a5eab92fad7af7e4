"""Overview: where the GPU money goes in the window, and what changing it would save."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

import dash
from dash import Input, Output, State, dcc, html

from gpuwatch.analytics.totals import monthly_basis
from gpuwatch.app import format as fmt
from gpuwatch.app import grid
from gpuwatch.app.components import (
    card,
    no_data,
    no_match,
    records_of,
    section,
    shell,
)
from gpuwatch.app.context import page_context, query_value
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.app.figures import bar_figure, capacity_figure
from gpuwatch.app.links import workload_href
from gpuwatch.app.urls import PAGE_URL_ID, URL_ID, with_param
from gpuwatch.app.views import Headline, breakdown, capacity_series, headline, options, workloads
from gpuwatch.app.views_compare import (
    COMPARE_PARAM,
    COMPARE_PREVIOUS,
    Period,
    change_points,
    change_usd,
    previous_period,
)
from gpuwatch.app.views_queues import SchedulingTotals, scheduling_totals
from gpuwatch.domain.scheduling import SchedulingPolicy

PAGE, PATH, TITLE = "overview", "/", "Overview"
TOP_WORKLOADS = 10


def headline_cards(h: Headline, idle_pct: float, before: Period | None = None) -> list[html.Div]:
    """The headline figures, each with its unit and what it means; with ``before``, the
    change of each rate and cost since the previous period."""
    d = _deltas(h, before)
    return [
        card("GPU units", fmt.number(h.gpu_units), "with samples in the window", "gpus"),
        card(
            "Allocated",
            fmt.pct(h.allocated_pct),
            f"{fmt.gpu_hours(h.allocated_gpu_hours)} of {fmt.gpu_hours(h.capacity_gpu_hours)}",
            "allocated",
            delta=d.get("allocated"),
        ),
        card(
            "Utilization of allocated GPUs",
            fmt.pct(h.efficiency_pct),
            "used ÷ allocated GPU-hours",
            "efficiency",
            delta=d.get("efficiency"),
        ),
        card(
            "Total GPU cost",
            fmt.usd(h.total_cost_usd),
            "allocated + unallocated",
            "total-cost",
            delta=d.get("total"),
        ),
        card(
            "Idle cost",
            fmt.usd(h.idle_cost_usd),
            f"allocated GPUs below {idle_pct:g}% utilization",
            "idle-cost",
            delta=d.get("idle"),
        ),
        card(
            "Unallocated cost",
            fmt.usd(h.unallocated_cost_usd),
            "capacity no pod held",
            "unallocated-cost",
            delta=d.get("unallocated"),
        ),
        card(
            "Potential savings / month",
            fmt.usd(h.monthly_savings_usd),
            f"largest of {h.recommendations} recommendations per workload, "
            f"{monthly_basis(h.data_hours)}",
            "savings",
        ),
        card(
            "Data coverage",
            fmt.ratio_pct(h.coverage_ratio),
            "hours with samples ÷ hours GPUs existed",
            "coverage",
        ),
    ]


def _deltas(h: Headline, before: Period | None) -> dict[str, str]:
    if before is None:
        return {}
    return {
        "allocated": change_points(h.allocated_pct, before.allocated_pct),
        "efficiency": change_points(h.efficiency_pct, before.efficiency_pct),
        "total": change_usd(h.total_cost_usd, before.total_cost_usd),
        "idle": change_usd(h.idle_cost_usd, before.idle_cost_usd),
        "unallocated": change_usd(h.unallocated_cost_usd, before.unallocated_cost_usd),
    }


def compare_control(on: bool, before: Period | str | None) -> html.Div:
    """The "compare with the previous period" switch, and which period that is (or why
    there is none)."""
    children: list[Any] = [
        dcc.Checklist(
            id="overview-compare",
            options=[{"label": " Compare with the previous period", "value": COMPARE_PREVIOUS}],
            value=[COMPARE_PREVIOUS] if on else [],
            className="gw-compare",
        )
    ]
    if isinstance(before, Period):
        span = f"Previous period: {fmt.when(before.start_ts)} to {fmt.when(before.end_ts)}"
        children.append(html.Span(span, className="gw-note", id="overview-compare-period"))
    elif isinstance(before, str):
        children.append(html.Span(before, className="gw-note", id="overview-compare-period"))
    return html.Div(children, className="gw-actions")


def toggle_compare(values: list[str] | None, search: str | None) -> Any:
    """The switch changed: ``compare=previous`` in the URL, or not."""
    on = COMPARE_PREVIOUS in (values or [])
    new = with_param(search, COMPARE_PARAM, COMPARE_PREVIOUS if on else None)
    return dash.no_update if new == (search or "") else new


dash.callback(
    Output(PAGE_URL_ID, "search", allow_duplicate=True),
    Input("overview-compare", "value"),
    State(URL_ID, "search"),
    prevent_initial_call=True,
)(toggle_compare)


def scheduling_cards(t: SchedulingTotals, f: Filters) -> list[html.Div]:
    """Stalled gangs and stranded capacity (:mod:`gpuwatch.app.views_queues`), each a link
    to the Queues page."""
    href = f.href("/queues")
    return [
        card(
            "Stalled gangs",
            dcc.Link(fmt.usd(t.stalled_cost_usd), href=href, className="gw-link"),
            f"{fmt.gpu_hours(t.stalled_gpu_hours)} held by {t.stalled_gangs} gangs "
            "while a sibling waited",
            "stalled-gangs",
        ),
        card(
            "Stranded capacity",
            dcc.Link(fmt.gpu_hours(t.stranded_gpu_hours), href=href, className="gw-link"),
            f"{fmt.usd(t.stranded_cost_usd)} of free GPUs too scattered for waiting pods",
            "stranded",
        ),
    ]


TOP_COLUMNS = [
    grid.text_column("workload", link=grid.HREF, pinned=True),
    grid.text_column("workload_kind"),
    grid.text_column("namespace"),
    grid.text_column("cluster"),
    grid.text_column("team"),
    grid.money_column("idle_cost_usd"),
    grid.number_column("efficiency_pct"),
    grid.money_column("est_monthly_savings_usd"),
]
grid.register("overview-top-workloads")


def top_workloads_table(snap: Snapshot, f: Filters) -> Any:
    frame = workloads(snap, f)
    frame = frame[frame["idle_cost_usd"] > 0].head(TOP_WORKLOADS)
    if frame.empty:
        return html.P("No workload sat idle on its GPUs in this window.", className="gw-note")
    rows = grid.rows_for(records_of(frame), TOP_COLUMNS)
    for row in rows:
        row[grid.HREF] = workload_href(f, row)
    export = grid.page_export("top-workloads", "Top wasting workloads", snap, f)
    return grid.grid("overview-top-workloads", TOP_COLUMNS, rows, export)


def body(
    snap: Snapshot, f: Filters, idle_pct: float, policy: SchedulingPolicy, compare: bool = False
) -> list[Any]:
    h = headline(snap, f)
    before = previous_period(snap, f) if compare else None
    period = before if isinstance(before, Period) else None
    waste = scheduling_cards(scheduling_totals(snap, f, policy), f)
    basis = monthly_basis(h.data_hours)
    teams = breakdown(snap, f, ("team",))
    namespaces = breakdown(snap, f, ("cluster", "namespace"))
    return [
        compare_control(compare, before),
        html.Div(
            [*headline_cards(h, idle_pct, period), *waste],
            className="gw-cards",
            id="overview-cards",
        ),
        section(
            "Capacity and demand",
            dcc.Graph(
                id="overview-capacity",
                figure=capacity_figure(capacity_series(snap, f)),
                config={"displaylogo": False},
            ),
        ),
        html.Div(
            [
                dcc.Graph(
                    id="overview-idle-by-team",
                    figure=bar_figure(
                        teams,
                        "team",
                        "idle_cost_usd",
                        "Idle cost by team (click a bar for its workloads)",
                        "idle cost ($)",
                        keys=BAR_KEYS["overview-idle-by-team"],
                    ),
                ),
                dcc.Graph(
                    id="overview-idle-by-namespace",
                    figure=bar_figure(
                        namespaces,
                        "namespace",
                        "idle_cost_usd",
                        "Idle cost by namespace (click a bar for its workloads)",
                        "idle cost ($)",
                        keys=BAR_KEYS["overview-idle-by-namespace"],
                    ),
                ),
            ],
            className="gw-grid-2",
        ),
        section(
            "Top wasting workloads",
            top_workloads_table(snap, f),
            note="By idle cost in the window; open one for its GPUs, pods and recommendations. "
            f"Savings: its largest recommendation, {basis}.",
        ),
    ]


#: What a bar of each chart names: the filters a click on it sets on the Workloads page.
BAR_KEYS: dict[str, tuple[str, ...]] = {
    "overview-idle-by-team": ("team",),
    "overview-idle-by-namespace": ("cluster", "namespace"),
}


def open_bar(click: dict[str, Any] | None, search: str | None, keys: tuple[str, ...]) -> Any:
    """A click on a bar: the Workloads page narrowed to its team (or cluster and namespace),
    the page's other filters kept."""
    try:
        values = click["points"][0]["customdata"]  # type: ignore[index]
    except (TypeError, KeyError, IndexError):
        return dash.no_update
    if not isinstance(values, list) or len(values) != len(keys):
        return dash.no_update
    f = Filters.from_query(dict(parse_qsl((search or "").lstrip("?"))))
    return f.with_(**dict(zip(keys, map(str, values), strict=True))).href("/workloads")


def open_team_bar(click: dict[str, Any] | None, search: str | None) -> Any:
    return open_bar(click, search, BAR_KEYS["overview-idle-by-team"])


def open_namespace_bar(click: dict[str, Any] | None, search: str | None) -> Any:
    return open_bar(click, search, BAR_KEYS["overview-idle-by-namespace"])


for _graph, _handler in (
    ("overview-idle-by-team", open_team_bar),
    ("overview-idle-by-namespace", open_namespace_bar),
):
    dash.callback(
        Output(PAGE_URL_ID, "href", allow_duplicate=True),
        Input(_graph, "clickData"),
        State(URL_ID, "search"),
        prevent_initial_call=True,
    )(_handler)


def layout(**query: Any) -> html.Div:
    ctx = page_context(query)
    snap, f = ctx.snap, ctx.filters
    if snap.empty:
        return no_data(PAGE, PATH, TITLE, f, snap)
    if headline(snap, f).capacity_gpu_hours <= 0:
        content: Any = no_match(PAGE, f, PATH)
    else:
        settings = ctx.source.settings
        compare = query_value(query, COMPARE_PARAM) == COMPARE_PREVIOUS
        policy = settings.scheduling.policy()
        content = body(snap, f, settings.thresholds.idle_util_pct, policy, compare)
    return shell(PAGE, PATH, TITLE, f, snap, options(snap, f), content)


def warm(data: DashboardData, snap: Snapshot) -> None:
    """The default view, and that of each of ``dashboard.warm_windows``, computed ahead of the
    first visit."""
    if not snap.empty:
        settings = data.settings
        idle_pct, policy = settings.thresholds.idle_util_pct, settings.scheduling.policy()
        body(snap, Filters(), idle_pct, policy)
        for window in dict.fromkeys(settings.dashboard.warm_windows):
            body(snap, Filters(window=window), idle_pct, policy)


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · Overview", order=0, layout=layout
)
