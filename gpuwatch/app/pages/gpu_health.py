"""GPU health: which GPUs are failing and still paid for, which are degraded, and why.

For the filter bar's window and scope: the GPUs failing, in application error and degraded,
and the dollars paid for GPUs held while failing; the drain list; each GPU's state hour by
hour; every GPU that was not healthy, with its reasons; and which readings the exporter does
not send. A click on the timeline opens that GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dash
import pandas as pd
from dash import Input, Output, State, dcc, html

from gpuwatch.app import format as fmt
from gpuwatch.app import grid
from gpuwatch.app.components import card, html_table, no_data, no_match, section, shell
from gpuwatch.app.context import page_context
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.app.figures_health import health_timeline_figure
from gpuwatch.app.figures_heatmap import heatmap_row_label
from gpuwatch.app.health_text import STATE_WORDS, gpu_text, missing_readings, reasons_text
from gpuwatch.app.links import PATH as PATH_GPU
from gpuwatch.app.pages.gpus import node_href, open_clicked
from gpuwatch.app.urls import PAGE_URL_ID, URL_ID
from gpuwatch.app.views import options
from gpuwatch.app.views import unit_ids as units_in_scope
from gpuwatch.app.views_gpu import unit_label
from gpuwatch.app.views_health import HealthView, health_view, unit_ids
from gpuwatch.domain.health import HealthPolicy

PAGE, PATH, TITLE = "gpu-health", "/gpu-health", "GPU health"
grid.register_tables(f"{PAGE}-drain", f"{PAGE}-entries")

GpuIds = Mapping[tuple[str, str], int]


def count_state(entries: pd.DataFrame, state: str) -> int:
    return int(entries["state"].eq(state).sum()) if len(entries) else 0


def cards(view: HealthView) -> html.Div:
    entries = view.entries
    paid = float(entries["allocated_cost_while_failing_usd"].sum()) if len(entries) else 0.0
    of = f"of {view.gpus:,} GPUs with readings"
    degraded_note = of if view.readings.clock_events else "throttling unknown: no clock events"
    return html.Div(
        [
            card("Failing", fmt.number(count_state(entries, "failing")), of, f"{PAGE}-failing"),
            card(
                "Degraded",
                fmt.number(count_state(entries, "degraded")),
                degraded_note,
                f"{PAGE}-degraded",
            ),
            card(
                "Application errors",
                fmt.number(count_state(entries, "app_error")),
                "XIDs of user code (the GPU is fine)",
                f"{PAGE}-app-error",
            ),
            card(
                "Paid while failing",
                fmt.usd(paid),
                "GPU-hours held by pods on failing GPUs",
                f"{PAGE}-paid-failing",
            ),
        ],
        className="gw-cards",
        id=f"{PAGE}-cards",
    )


def gpu_link(f: Filters, ids: GpuIds, row: Mapping[str, Any]) -> Any:
    """The GPU as the other pages name it, linked to its page where the store knows it."""
    label = unit_label(row["gpu_uuid"], None, 0, 1)
    if (str(row["cluster"]), str(row["gpu_uuid"])) not in ids:
        return label
    return dcc.Link(label, href=f.href(PATH_GPU, uuid=str(row["gpu_uuid"])), className="gw-link")


def node_link(f: Filters, row: Mapping[str, Any]) -> Any:
    return dcc.Link(
        fmt.text(row["node"]) or "(unknown node)",
        href=node_href(f, row["cluster"], row["node"]),
        className="gw-link",
    )


def pods_text(pods: object) -> str:
    return ", ".join(str(p) for p in pods) if isinstance(pods, list | tuple) and pods else fmt.DASH


def drain_table(view: HealthView, f: Filters, ids: GpuIds) -> Any:
    if view.drain.empty:
        text = "No GPU failed in this window."
        return html.P(text, className="gw-note", id=f"{PAGE}-drain-none")
    columns = [
        ("Node", lambda r: node_link(f, r)),
        ("GPU", lambda r: gpu_link(f, ids, r)),
        ("Cluster", lambda r: fmt.text(r["cluster"])),
        ("GPU model", lambda r: fmt.text(r["gpu_model"])),
        ("Reasons", lambda r: reasons_text(r["reasons"])),
        ("Failing since", lambda r: fmt.when(r["first_seen"])),
        ("Pods on it", lambda r: pods_text(r["pods"])),
        ("Paid while failing", lambda r: fmt.usd(r["allocated_cost_while_failing_usd"])),
    ]
    return html_table(f"{PAGE}-drain", columns, view.drain.to_dict("records"))


def entries_table(view: HealthView, f: Filters, ids: GpuIds) -> Any:
    if view.entries.empty:
        text = "Every GPU with readings was healthy in this window."
        return html.P(text, className="gw-note", id=f"{PAGE}-entries-none")
    columns = [
        ("GPU", lambda r: gpu_link(f, ids, r)),
        ("Node", lambda r: node_link(f, r)),
        ("GPU model", lambda r: fmt.text(r["gpu_model"])),
        ("State", lambda r: STATE_WORDS.get(str(r["state"]), str(r["state"]))),
        ("Reasons", lambda r: reasons_text(r["reasons"])),
        ("First seen", lambda r: fmt.when(r["first_seen"])),
        ("Last seen", lambda r: fmt.when(r["last_seen"])),
        ("Hours in state", lambda r: fmt.number(r["state_hours"], 1)),
        ("Throttled", lambda r: fmt.pct(r["throttled_pct"])),
        ("Paid while failing", lambda r: fmt.usd(r["allocated_cost_while_failing_usd"])),
        ("Pods in state", lambda r: pods_text(r["pods"])),
        ("Held at its last sample", lambda r: "yes" if r["allocated"] else "no"),
    ]
    return html_table(f"{PAGE}-entries", columns, view.entries.to_dict("records"))


def timeline_labels(view: HealthView, ids: GpuIds) -> dict[tuple[str, str], str]:
    """Timeline rows: node and short UUID, with the unit id a click opens."""
    gpus = view.timeline[["cluster", "node", "gpu_uuid"]].drop_duplicates(["cluster", "gpu_uuid"])
    out = {}
    for cluster, node, uuid in gpus.astype(str).itertuples(index=False):
        gpu_id = ids.get((cluster, uuid))
        short = unit_label(uuid, None, 0, 1)
        label = gpu_text(node, uuid) if gpu_id is None else heatmap_row_label(node, short, gpu_id)
        out[(cluster, uuid)] = label
    return out


def missing_section(view: HealthView) -> list[Any]:
    sentences = missing_readings(view.readings)
    if not sentences:
        return []
    items = html.Ul([html.Li(s) for s in sentences], id=f"{PAGE}-missing")
    return [section("Missing readings", items, key=f"{PAGE}-readings")]


def rules_note(policy: HealthPolicy) -> str:
    return (
        "A GPU's state is the physical GPU's (an event on any of its MIG instances or slots "
        "is the GPU's). Failing: a double-bit ECC error, a row-remap failure or an XID that "
        "NVIDIA's catalogue marks hardware or driver, from the first such event to the GPU's "
        "last hour. Application error: an XID of user code. Degraded: throttled (thermal, "
        f"power cap, HW slowdown) in ≥ {policy.throttle_degraded_pct:g}% of its hours with "
        f"clock data, or an hour with ≥ {policy.sbe_burst_per_hour:,} single-bit ECC errors, "
        f"≥ {policy.pcie_replays_per_hour:,} PCIe replays or ≥ "
        f"{policy.nvlink_errors_per_hour:,} NVLink errors, or an XID the catalogue does not "
        "list. The worst state wins."
    )


def body(snap: Snapshot, f: Filters, policy: HealthPolicy) -> list[Any]:
    view = health_view(snap, f, policy)
    if not view.readings.rows:
        return missing_section(view)
    ids = unit_ids(snap.units)
    figure = health_timeline_figure(view.timeline, timeline_labels(view, ids), view.gpus)
    return [
        cards(view),
        section(
            "Drain candidates",
            grid.exportable(
                drain_table(view, f, ids),
                grid.page_export("gpu-health-drain", "Drain list", snap, f),
            ),
            note="Failing GPUs, by the dollars paid for them while failing: GPU-hours their "
            "pods held from the first failing event on (that hour from the event's instant) "
            "× the GPU's price. Open the node to cordon and drain it.",
            key=f"{PAGE}-drain-section",
        ),
        section(
            "State per GPU over time",
            dcc.Graph(id=f"{PAGE}-timeline", figure=figure),
            note=rules_note(policy) + " Click a row for the GPU's history.",
        ),
        section(
            "GPUs not healthy",
            grid.exportable(
                entries_table(view, f, ids),
                grid.page_export("gpu-health-gpus", "GPUs not healthy", snap, f),
            ),
            note="Worst state first. First and last seen: the first and last evidence of the "
            "state; throttled: share of its hours with clock data (— without clock events).",
        ),
        *missing_section(view),
    ]


dash.callback(
    Output(PAGE_URL_ID, "href", allow_duplicate=True),
    Input(f"{PAGE}-timeline", "clickData"),
    State(URL_ID, "search"),
    prevent_initial_call=True,
)(open_clicked)


def layout(**query: Any) -> html.Div:
    ctx = page_context(query)
    snap, f = ctx.snap, ctx.filters
    if snap.empty:
        return no_data(PAGE, PATH, TITLE, f, snap)
    policy = ctx.source.settings.health.policy()
    content: Any = (
        body(snap, f, policy) if len(units_in_scope(snap, f)) else no_match(PAGE, f, PATH)
    )
    return shell(PAGE, PATH, TITLE, f, snap, options(snap, f), content)


def warm(data: DashboardData, snap: Snapshot) -> None:
    if not snap.empty:
        body(snap, Filters(), data.settings.health.policy())


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · GPU health", order=8, layout=layout
)
