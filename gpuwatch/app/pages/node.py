"""One node: its facts, its GPUs' utilization and health, its cost and the pods it ran.

``/node?cluster=..&name=..``.
"""

from __future__ import annotations

from typing import Any

import dash
import pandas as pd
from dash import dcc, html

from gpuwatch.app import format as fmt
from gpuwatch.app import grid
from gpuwatch.app.components import breadcrumbs, card, empty_state, records_of, section, shell
from gpuwatch.app.context import page_context, query_value
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.figures_heatmap import heatmap_figure
from gpuwatch.app.links import gpu_href, workload_href
from gpuwatch.app.pages.gpus import HEALTH_COLUMNS, health_alerts
from gpuwatch.app.views import window_bounds
from gpuwatch.app.views_gpu import gpu_table, node_table
from gpuwatch.app.views_heatmap import heatmap
from gpuwatch.app.views_pod import pod_href

PAGE, PATH, TITLE = "node", "/node", "Node"


def node_facts(snap: Snapshot, f: Filters, cluster: str, node: str) -> pd.Series | None:
    """The node's row of the nodes table (window sums included), ``None`` if unknown."""
    table = node_table(snap, Filters(cluster=cluster, window=f.window))
    rows = table[table["node"].eq(node)]
    return None if rows.empty else rows.iloc[0]


def cards(facts: pd.Series) -> html.Div:
    mig = "MIG capable" if bool(facts.get("mig_capable")) else "no MIG"
    replicas = facts.get("timeslice_replicas")
    sharing = (
        f"time-sliced × {int(replicas)}"
        if pd.notna(replicas) and int(replicas) > 1
        else "not time-sliced"
    )
    return html.Div(
        [
            card(
                "GPU model", fmt.text(facts["gpu_model"]), f"{mig}, {sharing}", "model", text=True
            ),
            card(
                "GPU units",
                fmt.number(facts["gpu_units"]),
                fmt.text(facts["instance_type"]) or "instance type unknown",
                "units",
            ),
            card(
                "Capacity",
                fmt.text(facts["capacity_type"]).replace("_", "-"),
                "pricing capacity type",
                "capacity",
                text=True,
            ),
            card(
                "Allocated",
                fmt.pct(facts["allocated_pct"]),
                "of its GPU-hours with data",
                "allocated",
            ),
            card(
                "Utilization of allocated",
                fmt.pct(facts["efficiency_pct"]),
                "used ÷ allocated",
                "efficiency",
            ),
            card(
                "Idle cost",
                fmt.usd(facts["idle_cost_usd"]),
                "held below the idle threshold",
                "idle-cost",
            ),
            card(
                "Unallocated cost",
                fmt.usd(facts["unallocated_cost_usd"]),
                "no pod held it",
                "unallocated-cost",
            ),
        ],
        className="gw-cards",
        id="node-cards",
    )


#: The GPUs & nodes page's health columns, but the node's own.
GPU_COLUMNS = [column for column in HEALTH_COLUMNS if column.key != "node"]
POD_COLUMNS = [
    grid.text_column("pod", "Pod", link=grid.HREF, pinned=True),
    grid.text_column("workload", link="workload_href"),
    grid.text_column("namespace"),
    grid.number_column("gpu_count", "GPUs", 0),
    grid.text_column("gpu_resource", "GPU resource"),
    grid.time_column("started_ts", "Started"),
    grid.time_column("finished_ts", "Finished"),
]
grid.register("node-gpus", "node-pods")


def gpus_section(snap: Snapshot, f: Filters, node: tuple[str, str], temperature_c: float) -> Any:
    frame = gpu_table(snap, Filters(cluster=node[0], window=f.window), temperature_c, node)
    frame = frame.assign(coverage_pct=100.0 * frame["coverage_ratio"])
    rows = grid.rows_for(records_of(frame), GPU_COLUMNS)
    for row, gpu_id in zip(rows, frame["gpu_id"], strict=True):
        row[grid.HREF] = gpu_href(f, snap, int(gpu_id))
    export = grid.page_export("node-gpus", f"GPUs of node {node[1]}", snap, f, {"node": node[1]})
    alerts = health_alerts(temperature_c, snap.policy.memory_full_pct)
    return grid.grid("node-gpus", GPU_COLUMNS, rows, export, cell_classes=alerts)


def pods_section(snap: Snapshot, f: Filters, node: tuple[str, str]) -> Any:
    start, end = window_bounds(snap, f)
    pods = snap.pods[snap.pods["cluster"].eq(node[0]) & snap.pods["node"].eq(node[1])]
    alive = pods["created_ts"].fillna(0).lt(end) & pods["finished_ts"].fillna(end).ge(start)
    pods = pods[alive.astype(bool)].sort_values("created_ts", ascending=False).head(200)
    if pods.empty:
        return html.P("No pod ran on this node in this window.", className="gw-note")
    rows = grid.rows_for(records_of(pods), POD_COLUMNS)
    for row in rows:
        row[grid.HREF] = pod_href(f, node[0], row["namespace"], row["pod"])
        row["workload_href"] = workload_href(f, row)
    export = grid.page_export("node-pods", f"Pods on node {node[1]}", snap, f, {"node": node[1]})
    return grid.grid("node-pods", POD_COLUMNS, rows, export)


def node_trail(f: Filters, cluster: str) -> list[tuple[str, str]]:
    """GPUs & nodes, then its cluster's."""
    return [
        ("GPUs & nodes", f.href("/gpus")),
        (f"cluster {cluster}", f.with_(cluster=cluster).href("/gpus")),
    ]


def layout(**query: Any) -> html.Div:
    ctx = page_context(query)
    snap, f = ctx.snap, ctx.filters
    cluster, name = query_value(query, "cluster"), query_value(query, "name")
    facts = None if snap.empty or not cluster or not name else node_facts(snap, f, cluster, name)
    if facts is None or cluster is None or name is None:
        content: Any = empty_state(
            PAGE,
            "Unknown node",
            "This node has no GPU unit in the store.",
            (f.href("/gpus"), "All GPUs & nodes"),
        )
        return shell(PAGE, PATH, TITLE, f, snap, None, content)
    key = (cluster, name)
    temperature_c = ctx.source.settings.thresholds.temperature_c
    figure = heatmap_figure(heatmap(snap, Filters(cluster=cluster, window=f.window), node=key))
    content = [
        cards(facts),
        section("Utilization per GPU", dcc.Graph(id="node-heatmap", figure=figure)),
        section("GPUs", gpus_section(snap, f, key, temperature_c)),
        section("Pods", pods_section(snap, f, key), note="Pods that existed in the window."),
    ]
    crumbs = breadcrumbs(PAGE, node_trail(f, cluster), f"node {name}")
    note = f"Cluster {cluster}"
    return shell(PAGE, PATH, f"Node {name}", f, snap, None, content, note=note, crumbs=crumbs)


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · Node", order=21, layout=layout
)
