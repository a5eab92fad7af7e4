"""Queues: GPU quota that sat unused while work waited, gangs that held GPUs waiting for their
siblings, and free GPUs too scattered for the pods that wanted them.

For the filter bar's window and scope: per Kueue ClusterQueue (or Volcano queue) and flavor,
quota vs allocated vs busy GPUs hour by hour, what it borrowed and lent, its pending work and
its idle quota in dollars; the stalled gangs with their dollars; the stranded capacity per GPU
model with the largest request that fit no node. ``queue`` in the query narrows to one queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dash
import pandas as pd
from dash import dcc, html

from gpuwatch.analytics.queues import QUEUE_REPORT_COLUMNS
from gpuwatch.app import format as fmt
from gpuwatch.app import grid
from gpuwatch.app.components import card, html_table, no_data, section, shell
from gpuwatch.app.context import page_context, query_value
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.app.figures import bar_figure
from gpuwatch.app.figures_queues import lending_figure, queue_figure, queue_title, stranded_figure
from gpuwatch.app.views import options
from gpuwatch.app.views_queues import QUEUE_KEY, QueuesView, queues_view, totals_of
from gpuwatch.domain.scheduling import SchedulingPolicy

PAGE, PATH, TITLE = "queues", "/queues", "Queues"
grid.register_tables(f"{PAGE}-table", f"{PAGE}-gangs", f"{PAGE}-capacity")

#: At most this many queues get a chart of their own (by idle quota dollars).
MAX_QUEUE_CHARTS = 12
NO_QUEUES = (
    "No queues: the store holds no Kueue ClusterQueue or Volcano queue"
    " with GPU quota for this scope. Stalled gangs and stranded capacity below do not need one."
)


def queue_href(f: Filters, cluster: object, queue: object) -> str:
    """The Queues page narrowed to one queue of one cluster (other filters kept)."""
    return f.with_(cluster=str(cluster)).href(PATH, queue=str(queue))


def queue_link(f: Filters, row: Mapping[str, Any]) -> Any:
    return dcc.Link(
        fmt.text(row["queue"]),
        href=queue_href(f, row["cluster"], row["queue"]),
        className="gw-link",
    )


def cards(view: QueuesView) -> html.Div:
    totals = totals_of(view)
    idle_usd = float(view.queues["idle_quota_usd"].sum()) if len(view.queues) else 0.0
    pending = float(view.queues["pending_gpu_hours"].sum()) if len(view.queues) else 0.0
    return html.Div(
        [
            card(
                "Idle quota",
                fmt.usd(idle_usd),
                "quota unused while cohort work waited",
                f"{PAGE}-idle-quota",
            ),
            card(
                "Pending work",
                fmt.gpu_hours(pending),
                "GPUs asked for × hours waiting",
                f"{PAGE}-pending",
            ),
            card(
                "Stalled gangs",
                fmt.usd(totals.stalled_cost_usd),
                f"{fmt.gpu_hours(totals.stalled_gpu_hours)} held by {totals.stalled_gangs} "
                "gangs while a sibling waited",
                f"{PAGE}-stalled",
            ),
            card(
                "Stranded capacity",
                fmt.gpu_hours(totals.stranded_gpu_hours),
                f"{fmt.usd(totals.stranded_cost_usd)} of free GPUs no waiting pod fit",
                f"{PAGE}-stranded",
            ),
        ],
        className="gw-cards",
        id=f"{PAGE}-cards",
    )


def hours(column: str) -> tuple[str, Any]:
    """A GPU-hours column: its heading and cells to one decimal."""
    return fmt.HEADINGS[column], lambda r: fmt.number(r[column], 1)


def text_of(column: str) -> tuple[str, Any]:
    return fmt.HEADINGS[column], lambda r: fmt.text(r[column])


def usd_of(column: str) -> tuple[str, Any]:
    return fmt.HEADINGS[column].removesuffix(" ($)"), lambda r: fmt.usd(r[column])


#: The report's GPU-hour figures, in the contract's order.
QUEUE_HOURS = tuple(name for name in QUEUE_REPORT_COLUMNS if name.endswith("_gpu_hours"))


def queues_table(view: QueuesView, f: Filters) -> Any:
    rows = view.queues.sort_values("idle_quota_usd", ascending=False, kind="stable")
    columns = [
        ("Queue", lambda r: queue_link(f, r)),
        *(text_of(name) for name in ("cluster", "cohort", "flavor", "gpu_model")),
        ("Nominal GPUs", lambda r: fmt.number(r["nominal_gpus"], 1)),
        *(hours(name) for name in QUEUE_HOURS),
        usd_of("idle_quota_usd"),
    ]
    return html_table(f"{PAGE}-table", columns, rows.to_dict("records"))


def queue_charts(view: QueuesView) -> list[Any]:
    top = view.queues.sort_values("idle_quota_usd", ascending=False, kind="stable")
    charts: list[Any] = []
    for i, row in enumerate(top.head(MAX_QUEUE_CHARTS).to_dict("records")):
        mask = pd.Series(True, index=view.queue_hours.index)
        for key in QUEUE_KEY:
            mask &= view.queue_hours[key].astype(str).eq(str(row[key]))
        title = queue_title(str(row["cluster"]), str(row["queue"]), fmt.text(row["flavor"]))
        figure = queue_figure(view.queue_hours[mask.to_numpy(dtype=bool)], title)
        charts.append(dcc.Graph(id=f"{PAGE}-chart-{i}", figure=figure))
    if len(top) > MAX_QUEUE_CHARTS:
        left = len(top) - MAX_QUEUE_CHARTS
        charts.append(
            html.P(f"{left} more queues not charted: open one from the table.", className="gw-note")
        )
    return charts


def queue_sections(view: QueuesView, f: Filters, snap: Snapshot) -> list[Any]:
    if not view.has_queues:
        return [section("Queues", html.P(NO_QUEUES, className="gw-note", id=f"{PAGE}-none"))]
    if view.queues.empty:
        text = "No queue with GPU quota matches these filters in this window."
        return [section("Queues", html.P(text, className="gw-note", id=f"{PAGE}-no-match"))]
    labelled = view.queues.assign(
        label=[
            queue_title(str(c), str(q), fmt.text(fl))
            for c, q, fl in view.queues[list(QUEUE_KEY)].itertuples(index=False)
        ]
    )
    idle = bar_figure(labelled, "label", "idle_quota_usd", "Idle quota per queue", "idle quota ($)")
    return [
        section(
            "Queues",
            grid.exportable(queues_table(view, f), grid.page_export("queues", "Queues", snap, f)),
            note="Per ClusterQueue and flavor, by idle quota dollars. Quota: nominal GPUs × "
            "hours the queue existed; allocated and busy: GPU-hours its pods held and used; "
            "pending: GPUs its waiting work asked for × hours waiting; idle quota: nominal GPUs "
            "unallocated in hours when work of its cohort waited, × the flavor's price.",
            key=f"{PAGE}-queues",
        ),
        section(
            "Quota vs allocated vs busy",
            *queue_charts(view),
            note="Allocated above the quota is borrowed from the cohort.",
            key=f"{PAGE}-charts",
        ),
        html.Div(
            [
                dcc.Graph(id=f"{PAGE}-idle", figure=idle),
                dcc.Graph(id=f"{PAGE}-lending", figure=lending_figure(view.queues)),
            ],
            className="gw-grid-2",
        ),
    ]


def workload_link(f: Filters, row: Mapping[str, Any]) -> Any:
    if pd.isna(row["workload"]):
        return fmt.DASH
    href = f.href(
        "/workload",
        cluster=row["cluster"],
        namespace=row["namespace"],
        kind=row["workload_kind"],
        name=row["workload"],
    )
    return dcc.Link(fmt.text(row["workload"]), href=href, className="gw-link")


def gangs_table(view: QueuesView, f: Filters) -> Any:
    gangs = view.gangs[view.gangs["stalled_gpu_hours"].gt(0)]
    if gangs.empty:
        text = "No gang held GPUs while a sibling waited in this window."
        return html.P(text, className="gw-note", id=f"{PAGE}-gangs-none")
    gangs = gangs.sort_values("stalled_cost_usd", ascending=False, kind="stable")
    columns = [
        ("Gang", lambda r: f"{fmt.text(r['gang_kind'])} {fmt.text(r['gang_name'])}"),
        ("Workload", lambda r: workload_link(f, r)),
        ("Namespace", lambda r: fmt.text(r["namespace"])),
        ("Cluster", lambda r: fmt.text(r["cluster"])),
        ("Team", lambda r: fmt.text(r["team"])),
        ("Queue", lambda r: fmt.text(r["queue"])),
        ("Gang size", lambda r: fmt.number(r["gang_size"])),
        ("Stalled from", lambda r: fmt.when(r["first_stalled_ts"])),
        ("Stalled until", lambda r: fmt.when(r["last_stalled_ts"])),
        hours("stalled_gpu_hours"),
        usd_of("stalled_cost_usd"),
    ]
    return html_table(f"{PAGE}-gangs", columns, gangs.to_dict("records"))


#: At most this many nodes are named in a consolidate hint.
MAX_HINT_NODES = 3


def consolidate_hint(row: Mapping[str, Any], moves: pd.DataFrame) -> str:
    """What to do about a GPU model's stranded capacity, in words: the nodes whose pods could
    move to make room for its largest unplaceable request
    (:func:`~gpuwatch.analytics.capacity.consolidate_hint`), fewest GPUs to move first."""
    request = row["largest_unplaceable_request"]
    if pd.isna(request) or float(request) <= 0:
        return "None needed: every waiting pod that fit the free GPUs found a node."
    mine = moves[
        moves["cluster"].astype(str).eq(str(row["cluster"]))
        & moves["gpu_model"].astype(str).eq(str(row["gpu_model"]))
    ]
    asked = f"A pod asking for {float(request):.0f} GPUs fit the free GPUs but no single node"
    if mine.empty:
        return f"{asked}: no node could take it by moving pods to the other free GPUs."
    places = [
        f"{fmt.number(m)} GPUs' pods off {n}"
        for n, m in mine[["node", "move_gpus"]].head(MAX_HINT_NODES).itertuples(index=False)
    ]
    return f"{asked}. Consolidate: move " + ", or ".join(places) + "."


def capacity_table(view: QueuesView) -> Any:
    rows = view.capacity.sort_values("stranded_cost_usd", ascending=False, kind="stable")
    columns = [
        text_of("cluster"),
        text_of("gpu_model"),
        hours("free_gpu_hours"),
        hours("stranded_gpu_hours"),
        usd_of("stranded_cost_usd"),
        (
            fmt.HEADINGS["largest_unplaceable_request"],
            lambda r: fmt.number(r["largest_unplaceable_request"]),
        ),
        ("Consolidate", lambda r: consolidate_hint(r, view.moves)),
    ]
    return html_table(f"{PAGE}-capacity", columns, rows.to_dict("records"))


def body(view: QueuesView, f: Filters, policy: SchedulingPolicy, snap: Snapshot) -> list[Any]:
    stall_after = fmt.duration(policy.gang_stall_after_s)
    return [
        cards(view),
        *queue_sections(view, f, snap),
        section(
            "Stalled gangs",
            grid.exportable(
                gangs_table(view, f), grid.page_export("stalled-gangs", "Stalled gangs", snap, f)
            ),
            note="GPUs held by a gang's running pods while one of its pods had been Pending "
            f"longer than {stall_after} (from that moment on), × their price.",
            key=f"{PAGE}-gangs-section",
        ),
        section(
            "Stranded capacity",
            grid.exportable(
                capacity_table(view),
                grid.page_export("stranded-capacity", "Stranded capacity", snap, f),
            ),
            dcc.Graph(id=f"{PAGE}-stranded-chart", figure=stranded_figure(view.capacity_hours)),
            note="Free GPUs (no pod held them) in hours when a waiting pod's request fit the "
            "free GPUs of that model in total but no single node. Per cluster and GPU model: "
            "team and namespace filters do not apply.",
            key=f"{PAGE}-capacity-section",
        ),
    ]


def layout(**query: Any) -> html.Div:
    ctx = page_context(query)
    snap, f = ctx.snap, ctx.filters
    if snap.empty:
        return no_data(PAGE, PATH, TITLE, f, snap)
    policy = ctx.source.settings.scheduling.policy()
    queue = query_value(query, "queue")
    view = queues_view(snap, f, policy, queue)
    note = None if queue is None else f"Queue {queue} only: clear it with the Queues link above."
    return shell(PAGE, PATH, TITLE, f, snap, options(snap, f), body(view, f, policy, snap), note)


def warm(data: DashboardData, snap: Snapshot) -> None:
    if not snap.empty:
        queues_view(snap, Filters(), data.settings.scheduling.policy())


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · Queues", order=9, layout=layout
)
