"""One node: its facts, its GPUs' utilization and health, its cost and the pods it ran.

``/node?cluster=..&name=..``.
"""

from __future__ import annotations

from typing import Any

import dash
import pandas as pd
from dash import dcc, html

from gpuwatch.app import format as fmt
from gpuwatch.app.components import breadcrumbs, card, empty_state, html_table, section, shell
from gpuwatch.app.context import page_context, query_value
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.figures import heatmap_figure
from gpuwatch.app.links import gpu_href
from gpuwatch.app.views import window_bounds
from gpuwatch.app.views_gpu import gpu_table, heatmap, node_table

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


def gpus_section(snap: Snapshot, f: Filters, node: tuple[str, str], temperature_c: float) -> Any:
    frame = gpu_table(snap, Filters(cluster=node[0], window=f.window), temperature_c, node)
    columns = [
        (
            "GPU",
            lambda r: dcc.Link(
                fmt.text(r["unit"]), href=gpu_href(f, snap, int(r["gpu_id"])), className="gw-link"
            ),
        ),
        ("Utilization", lambda r: fmt.pct(r["util_pct"])),
        ("Held", lambda r: fmt.gpu_hours(r["held_gpu_hours"])),
        ("Peak temperature", lambda r: fmt.with_unit(r["temp_c_max"], "°C")),
        ("Peak hourly power", lambda r: fmt.with_unit(r["power_w_max"], "W")),
        ("Peak memory", lambda r: fmt.pct(r["memory_peak_pct"])),
        ("Hours with XID", lambda r: fmt.number(r["xid_hours"])),
        ("Coverage", lambda r: fmt.ratio_pct(r["coverage_ratio"])),
    ]
    return html_table("node-gpus", columns, frame.to_dict("records"))


def pods_section(snap: Snapshot, f: Filters, node: tuple[str, str]) -> Any:
    start, end = window_bounds(snap, f)
    pods = snap.pods[snap.pods["cluster"].eq(node[0]) & snap.pods["node"].eq(node[1])]
    alive = pods["created_ts"].fillna(0).lt(end) & pods["finished_ts"].fillna(end).ge(start)
    pods = pods[alive.astype(bool)].sort_values("created_ts", ascending=False).head(200)
    if pods.empty:
        return html.P("No pod ran on this node in this window.", className="gw-note")

    def link(r: dict[str, Any]) -> Any:
        href = f.href(
            "/workload",
            cluster=r["cluster"],
            namespace=r["namespace"],
            kind=r["workload_kind"],
            name=r["workload"],
        )
        return dcc.Link(fmt.text(r["workload"]), href=href, className="gw-link")

    columns = [
        ("Pod", lambda r: fmt.text(r["pod"])),
        ("Workload", link),
        ("Namespace", lambda r: fmt.text(r["namespace"])),
        ("GPUs", lambda r: f"{fmt.number(r['gpu_count'])} × {fmt.text(r['gpu_resource'])}"),
        ("Started", lambda r: fmt.when(r["started_ts"])),
        ("Finished", lambda r: fmt.when(r["finished_ts"])),
    ]
    return html_table("node-pods", columns, pods.astype(object).to_dict("records"))


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
