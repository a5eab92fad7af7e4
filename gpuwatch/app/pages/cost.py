"""Cost over time: the window's cost per hour or day, stacked by team, namespace, workload, GPU
model, node pool, cluster or a pod label (``?by=``); a click on a bar opens its group."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, dcc, html

from gpuwatch.app.components import no_data, section, shell
from gpuwatch.app.context import page_context, query_value
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.app.figures_cost import clicked_href, cost_over_time_figure, legend_links
from gpuwatch.app.urls import PAGE_URL_ID, URL_ID, with_param
from gpuwatch.app.views import options
from gpuwatch.app.views_cost import CostTimeline, aggregate_choices, cost_timeline
from gpuwatch.config import DashboardSettings

PAGE, PATH, TITLE = "cost", "/cost", "Cost over time"
DEFAULT_BY = "team"


def chosen_by(query: dict[str, Any], settings: DashboardSettings) -> str:
    by = query_value(query, "by")
    return by if by in aggregate_choices(settings.pod_labels) else DEFAULT_BY


def pick_by(by: str | None, search: str | None) -> Any:
    """A new grouping: the URL's query names it (so the view can be shared)."""
    new = with_param(search, "by", by if by and by != DEFAULT_BY else None)
    return dash.no_update if new == (search or "") else new


def open_group(click: dict[str, Any] | None) -> Any:
    """A click on a bar: its group's page (team, namespace, workload, GPU model, cluster)."""
    href = clicked_href(click)
    return dash.no_update if href is None else href


dash.callback(
    Output(PAGE_URL_ID, "search", allow_duplicate=True),
    Input("cost-by", "value"),
    State(URL_ID, "search"),
    prevent_initial_call=True,
)(pick_by)
dash.callback(
    Output(PAGE_URL_ID, "href", allow_duplicate=True),
    Input("cost-chart", "clickData"),
    prevent_initial_call=True,
)(open_group)


def body(snap: Snapshot, f: Filters, by: str, settings: DashboardSettings) -> list[Any]:
    choices = aggregate_choices(settings.pod_labels)
    timeline = cost_timeline(snap, f, by, settings.node_pool_labels)
    picker = html.Div(
        [
            html.Label("Aggregate by", htmlFor="cost-by"),
            dcc.Dropdown(
                id="cost-by",
                options=[{"label": name, "value": key} for key, name in choices.items()],
                value=by,
                clearable=False,
                className="gw-dropdown",
            ),
        ],
        className="gw-actions",
    )
    note = (
        "Allocated cost of each group and the cost of GPU time no pod held (unallocated): "
        "each bar is what the GPUs in scope cost in that hour or day. The ten largest groups "
        "are drawn on their own, the rest as other. Click a legend entry to hide or show it, "
        "a bar or a name under the chart to open its group. Node pools: the first of "
        "dashboard.node_pool_labels on the node; pod labels: dashboard.pod_labels."
    )
    chart = dcc.Graph(id="cost-chart", figure=cost_over_time_figure(timeline, choices[by]))
    return [section("Cost over time", picker, chart, _legend(timeline), note=note)]


def _legend(timeline: CostTimeline) -> html.Nav:
    """The chart's legend as links: each group's page, in the legend's colours (the chart's
    own legend hides and shows series)."""
    items = [
        html.Li(
            [
                html.Span(className="gw-swatch", style={"background": colour}),
                dcc.Link(name, href=href, className="gw-link"),
            ]
        )
        for name, colour, href in legend_links(timeline)
    ]
    named: dict[str, Any] = {"aria-label": "The chart's groups"}
    return html.Nav(
        [html.Span("Open a group:", className="gw-legend-title"), html.Ul(items)],
        className="gw-legend-links",
        id="cost-legend-links",
        **named,
    )


def layout(**query: Any) -> html.Div:
    ctx = page_context(query)
    snap, f = ctx.snap, ctx.filters
    if snap.empty:
        return no_data(PAGE, PATH, TITLE, f, snap)
    settings = ctx.source.settings.dashboard
    content = body(snap, f, chosen_by(query, settings), settings)
    return shell(PAGE, PATH, TITLE, f, snap, options(snap, f), content)


def warm(data: DashboardData, snap: Snapshot) -> None:
    if not snap.empty:
        body(snap, Filters(), DEFAULT_BY, data.settings.dashboard)


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · Cost over time", order=10, layout=layout
)
