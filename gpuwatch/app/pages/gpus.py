"""GPUs & nodes: utilization per GPU over time, health per GPU, and the nodes they sit on.

A click on the heatmap or a GPU's name opens that GPU's history; a node's name opens its page.
"""

from __future__ import annotations

from typing import Any

import dash
import pandas as pd
from dash import Input, Output, State, dcc, html

from gpuwatch.app import grid
from gpuwatch.app.components import no_data, no_match, records_of, section, shell
from gpuwatch.app.context import page_context
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.app.figures_heatmap import gpu_id_of, heatmap_figure, node_of
from gpuwatch.app.links import gpu_href
from gpuwatch.app.server import data_source
from gpuwatch.app.urls import PAGE_URL_ID, URL_ID
from gpuwatch.app.views import options
from gpuwatch.app.views_gpu import gpu_table, node_table
from gpuwatch.app.views_heatmap import MAX_UNIT_ROWS, Heatmap, heatmap

PAGE, PATH, TITLE = "gpus", "/gpus", "GPUs & nodes"

HEALTH_COLUMNS = [
    grid.text_column("unit", "GPU", link=grid.HREF, pinned=True),
    grid.text_column("node"),
    grid.text_column("gpu_model"),
    grid.number_column("util_pct", "Utilization (%)"),
    grid.number_column("held_gpu_hours", "Held (GPU·h)", total=True),
    grid.number_column("temp_c_max", "Peak temperature (°C)", 0),
    grid.number_column("power_w_max", "Peak hourly power (W)", 0),
    grid.number_column("memory_peak_pct", "Peak memory (%)"),
    grid.number_column("xid_hours", "Hours with XID", 0, total=True),
    grid.number_column("xid_last", "XID code", 0),
    grid.number_column("coverage_pct", "Coverage (%)"),
]
grid.register("gpus-health", "gpus-nodes")


def health_records(frame: pd.DataFrame, f: Filters, snap: Snapshot) -> list[dict[str, Any]]:
    """GPU rows for the health table; each row's ``href`` is the link to the GPU's page."""
    out = frame.assign(coverage_pct=100.0 * frame["coverage_ratio"])
    names = [col.key for col in HEALTH_COLUMNS]
    rows = grid.rows_for(records_of(out[[*names, "gpu_id"]]), HEALTH_COLUMNS)
    for row in rows:
        row[grid.HREF] = gpu_href(f, snap, int(row.pop("gpu_id")))
    return rows


def health_alerts(temperature_c: float, memory_full_pct: float) -> dict[str, dict[str, str]]:
    """Cells past a threshold, in red (class ``gw-cell-alert``)."""
    return {
        "temp_c_max": {"gw-cell-alert": f"params.value >= {temperature_c:g}"},
        "memory_peak_pct": {"gw-cell-alert": f"params.value >= {memory_full_pct:g}"},
        "xid_hours": {"gw-cell-alert": "params.value > 0"},
    }


def open_clicked(click: dict[str, Any] | None, search: str | None) -> Any:
    """A click on the heatmap: the clicked GPU's page, or the clicked node's (window kept)."""
    try:
        label = click["points"][0]["y"]  # type: ignore[index]
    except (TypeError, KeyError, IndexError):
        return dash.no_update
    query = {k: v for k, v in _parse(search).items() if k in ("window",)}
    f = Filters.from_query(query)
    gpu_id, node = gpu_id_of(label), node_of(label)
    if gpu_id is not None:
        return gpu_href(f, data_source().data.current(), gpu_id)
    if node is not None:
        return node_href(f, *node)
    return dash.no_update


def _parse(search: str | None) -> dict[str, str]:
    from urllib.parse import parse_qsl

    return dict(parse_qsl((search or "").lstrip("?")))


for _graph in ("gpus-heatmap", "node-heatmap"):
    dash.callback(
        Output(PAGE_URL_ID, "href", allow_duplicate=True),
        Input(_graph, "clickData"),
        State(URL_ID, "search"),
        prevent_initial_call=True,
    )(open_clicked)


def node_href(f: Filters, cluster: object, node: object) -> str:
    return f.with_(cluster=str(cluster)).href("/node", name=str(node))


NODE_COLUMNS = [
    grid.text_column("node", link=grid.HREF, pinned=True),
    grid.text_column("cluster"),
    grid.text_column("gpu_model"),
    grid.number_column("gpu_units", "GPU units", 0, total=True),
    grid.text_column("capacity", "Capacity"),
    grid.text_column("gpu_sharing", "Allocation"),
    grid.number_column("allocated_pct", "Allocated (%)"),
    grid.number_column("efficiency_pct", "Utilization of allocated (%)"),
    grid.money_column("idle_cost_usd"),
    grid.money_column("unallocated_cost_usd"),
]


def node_records(frame: pd.DataFrame, f: Filters) -> list[dict[str, Any]]:
    """Node rows for the nodes table; each row's ``href`` is the link to the node's page."""
    out = frame.assign(capacity=frame["capacity_type"].astype(object))
    rows = grid.rows_for(records_of(out), NODE_COLUMNS)
    for row in rows:
        row[grid.HREF] = node_href(f, row["cluster"], row["node"])
        row["capacity"] = row["capacity"].replace("_", "-")
    return [{k: row[k] for k in (grid.HREF, *(c.key for c in NODE_COLUMNS))} for row in rows]


def nodes_section(snap: Snapshot, f: Filters) -> Any:
    return grid.grid(
        "gpus-nodes",
        NODE_COLUMNS,
        node_records(node_table(snap, f), f),
        grid.page_export("nodes", "Nodes", snap, f),
    )


def heatmap_note(hm: Heatmap) -> str:
    if hm.by_node:
        return (
            f"A row per node: more than {MAX_UNIT_ROWS} GPU units are in scope. Downsampled to "
            "whole hours per column; click a row for that node's GPUs."
        )
    return "Downsampled to whole hours per column; click a cell for that GPU's history."


def body(snap: Snapshot, f: Filters, temperature_c: float) -> list[Any]:
    hm = heatmap(snap, f)
    figure = heatmap_figure(hm)
    health = gpu_table(snap, f, temperature_c)
    table = grid.grid(
        "gpus-health",
        HEALTH_COLUMNS,
        health_records(health, f, snap),
        grid.page_export("gpu-health", "GPU health", snap, f),
        cell_classes=health_alerts(temperature_c, snap.policy.memory_full_pct),
    )
    return [
        section(
            "Utilization heatmap",
            dcc.Graph(id="gpus-heatmap", figure=figure),
            note=heatmap_note(hm),
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
