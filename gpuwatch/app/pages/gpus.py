"""GPUs & nodes: utilization per GPU over time, health per GPU, and the nodes they sit on.

A click on the heatmap or a GPU row opens that GPU's history; a node opens the node's page.
"""

from __future__ import annotations

from typing import Any

import dash
import pandas as pd
from dash import Input, Output, State, dcc, html

from gpuwatch.app import format as fmt
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
from gpuwatch.app.figures import gpu_id_of, heatmap_figure
from gpuwatch.app.links import gpu_href
from gpuwatch.app.server import data_source
from gpuwatch.app.views import options
from gpuwatch.app.views_gpu import gpu_table, heatmap, node_table

PAGE, PATH, TITLE = "gpus", "/gpus", "GPUs & nodes"

HEALTH_COLUMNS = [
    text_column("unit", "GPU"),
    text_column("node"),
    text_column("gpu_model"),
    number_column("util_pct", "Utilization (%)"),
    number_column("held_gpu_hours", "Held (GPU·h)"),
    number_column("temp_c_max", "Peak temperature (°C)", 0),
    number_column("power_w_max", "Peak hourly power (W)", 0),
    number_column("memory_peak_pct", "Peak memory (%)"),
    number_column("xid_hours", "Hours with XID", 0),
    number_column("xid_last", "XID code", 0),
    number_column("coverage_pct", "Coverage (%)"),
]


def health_records(frame: pd.DataFrame, f: Filters, snap: Snapshot) -> list[dict[str, Any]]:
    """GPU rows for the health table; the row id is the link to the GPU's page."""
    out = frame.assign(coverage_pct=100.0 * frame["coverage_ratio"])
    names = [col["id"] for col in HEALTH_COLUMNS]
    out = out[[*names, "gpu_id"]].copy()
    for name in names[3:]:
        out[name] = out[name].astype("float64").round(1)
    rows = records_of(out.astype(object).where(out.notna(), None))
    for row in rows:
        row["id"] = gpu_href(f, snap, int(row.pop("gpu_id")))
        for name in names[:3]:
            row[name] = fmt.text(row[name])
    return rows


def health_styles(temperature_c: float, memory_full_pct: float) -> list[dict[str, Any]]:
    """Cells past a threshold in red."""
    alert = {"backgroundColor": "#fee2e2", "color": "#991b1b", "fontWeight": "600"}
    rules = (
        ("temp_c_max", f"{{temp_c_max}} >= {temperature_c}"),
        ("memory_peak_pct", f"{{memory_peak_pct}} >= {memory_full_pct}"),
        ("xid_hours", "{xid_hours} > 0"),
    )
    styles = [{"if": {"column_id": col, "filter_query": q}} | alert for col, q in rules]
    return [*styles, {"if": {"column_id": "unit"}, "color": "#2563eb", "cursor": "pointer"}]


def open_gpu(active_cell: dict[str, Any] | None) -> Any:
    """A click on a GPU row: the GPU's page."""
    if not active_cell or not str(active_cell.get("row_id", "")).startswith("/gpu?"):
        return dash.no_update
    return str(active_cell["row_id"])


def open_clicked(click: dict[str, Any] | None, search: str | None) -> Any:
    """A click on the heatmap: the clicked GPU's page (filters kept)."""
    try:
        gpu_id = gpu_id_of(click["points"][0]["y"])  # type: ignore[index]
    except (TypeError, KeyError, IndexError):
        return dash.no_update
    if gpu_id is None:
        return dash.no_update
    query = {k: v for k, v in _parse(search).items() if k in ("window",)}
    return gpu_href(Filters.from_query(query), data_source().data.current(), gpu_id)


def _parse(search: str | None) -> dict[str, str]:
    from urllib.parse import parse_qsl

    return dict(parse_qsl((search or "").lstrip("?")))


dash.callback(
    Output(URL_ID, "href", allow_duplicate=True),
    Input("gpus-health", "active_cell"),
    prevent_initial_call=True,
)(open_gpu)
for _graph in ("gpus-heatmap", "node-heatmap"):
    dash.callback(
        Output(URL_ID, "href", allow_duplicate=True),
        Input(_graph, "clickData"),
        State(URL_ID, "search"),
        prevent_initial_call=True,
    )(open_clicked)


def node_href(f: Filters, cluster: object, node: object) -> str:
    return f.with_(cluster=str(cluster)).href("/node", name=str(node))


NODE_COLUMNS = [
    text_column("node"),
    text_column("cluster"),
    text_column("gpu_model"),
    number_column("gpu_units", "GPU units", 0),
    text_column("capacity", "Capacity"),
    text_column("gpu_sharing", "Allocation"),
    number_column("allocated_pct", "Allocated (%)"),
    number_column("efficiency_pct", "Utilization of allocated (%)"),
    money_column("idle_cost_usd"),
    money_column("unallocated_cost_usd"),
]


def node_records(frame: pd.DataFrame, f: Filters) -> list[dict[str, Any]]:
    """Node rows for the nodes table; the row id is the link to the node's page."""
    rows = []
    for r in records_of(frame):
        rows.append(
            {
                "id": node_href(f, r["cluster"], r["node"]),
                "node": fmt.text(r["node"]),
                "cluster": fmt.text(r["cluster"]),
                "gpu_model": fmt.text(r["gpu_model"]),
                "gpu_units": _number(r["gpu_units"], 0),
                "capacity": fmt.text(r["capacity_type"]).replace("_", "-"),
                "gpu_sharing": fmt.text(r["gpu_sharing"]),
                "allocated_pct": _number(r["allocated_pct"], 1),
                "efficiency_pct": _number(r["efficiency_pct"], 1),
                "idle_cost_usd": _number(r["idle_cost_usd"], 2),
                "unallocated_cost_usd": _number(r["unallocated_cost_usd"], 2),
            }
        )
    return rows


def _number(value: Any, digits: int) -> float | None:
    return None if value is None or pd.isna(value) else round(float(value), digits)


def open_node(active_cell: dict[str, Any] | None) -> Any:
    """A click on a node row: the node's page."""
    return row_link(active_cell, "/node?")


dash.callback(
    Output(URL_ID, "href", allow_duplicate=True),
    Input("gpus-nodes", "active_cell"),
    prevent_initial_call=True,
)(open_node)


def nodes_section(snap: Snapshot, f: Filters) -> Any:
    return data_table(
        "gpus-nodes",
        NODE_COLUMNS,
        node_records(node_table(snap, f), f),
        filter_action="native",
        style_data_conditional=[
            {"if": {"column_id": "node"}, "color": "#2563eb", "cursor": "pointer"}
        ],
    )


def body(snap: Snapshot, f: Filters, temperature_c: float) -> list[Any]:
    figure = heatmap_figure(heatmap(snap, f))
    health = gpu_table(snap, f, temperature_c)
    table = data_table(
        "gpus-health",
        HEALTH_COLUMNS,
        health_records(health, f, snap),
        filter_action="native",
        style_data_conditional=health_styles(temperature_c, snap.policy.memory_full_pct),
    )
    return [
        section(
            "Utilization heatmap",
            dcc.Graph(id="gpus-heatmap", figure=figure),
            note="Downsampled to whole hours per column; click a cell for that GPU's history.",
        ),
        section(
            "GPU health",
            table,
            note=f"Red: temperature ≥ {temperature_c:g} °C, memory ≥ "
            f"{snap.policy.memory_full_pct:g}% or an XID error in the window. From the "
            "hourly roll-ups: peak power is the highest hourly mean, XID counts hours with an "
            "error. Click a GPU for its sample-by-sample history.",
        ),
        section("Nodes", nodes_section(snap, f), note="Click a node for its page."),
    ]


def layout(**query: Any) -> html.Div:
    ctx = page_context(query)
    snap, f = ctx.snap, ctx.filters
    if snap.empty:
        return no_data(PAGE, PATH, TITLE, f, snap)
    temperature_c = ctx.source.settings.thresholds.temperature_c
    if heatmap(snap, f).units.empty:
        content: Any = no_match(PAGE, f, PATH)
    else:
        content = body(snap, f, temperature_c)
    return shell(PAGE, PATH, TITLE, f, snap, options(snap, f), content)


def warm(data: DashboardData, snap: Snapshot) -> None:
    if not snap.empty:
        body(snap, Filters(), data.settings.thresholds.temperature_c)


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · GPUs", order=3, layout=layout
)
