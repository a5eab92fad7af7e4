"""Pod: one pod's GPUs over time, its phases, its owner and what it cost in the window.

``/pod?cluster=..&namespace=..&name=..``. A pod recreated under the same name (a StatefulSet's
replica, a Job's retried pod of a fixed name) is one page: each incarnation is a row of the
phase timeline.
"""

from __future__ import annotations

from typing import Any

import dash
from dash import dcc, html

from gpuwatch.app import format as fmt
from gpuwatch.app import grid
from gpuwatch.app.components import breadcrumbs, card, empty_state, records_of, section, shell
from gpuwatch.app.context import page_context, query_value
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.figures import per_gpu_figure
from gpuwatch.app.figures_pod import phase_figure
from gpuwatch.app.links import gpu_href, workload_href
from gpuwatch.app.pages.workload import GPU_COLUMNS, workload_trail
from gpuwatch.app.views_gpu import WorkloadKey, workload_gpus, workload_series
from gpuwatch.app.views_pod import PodKey, pod_cost, pod_records

PAGE, PATH, TITLE = "pod", "/pod", "Pod"
grid.register("pod-gpus")


def key_from(query: dict[str, Any]) -> PodKey | None:
    values = [query_value(query, name) for name in ("cluster", "namespace", "name")]
    if any(v is None for v in values):
        return None
    return PodKey(*(str(v) for v in values))


def owner(records: Any) -> dict[str, str]:
    """The newest record's top owner and team, as the row of a link to its workload."""
    newest = records.iloc[0]
    return {
        "cluster": str(newest["cluster"]),
        "namespace": str(newest["namespace"]),
        "workload_kind": str(newest["workload_kind"]),
        "workload": str(newest["workload"]),
        "team": fmt.text(newest["team"]),
        "phase": fmt.text(newest["phase"]),
    }


def cards(snap: Snapshot, f: Filters, key: PodKey, top: dict[str, str]) -> html.Div:
    cost = pod_cost(snap, f, key)
    return html.Div(
        [
            card("Phase", top["phase"] or fmt.DASH, "as last seen in the API", "phase", text=True),
            card(
                "Allocated cost",
                fmt.usd(cost.allocated_cost_usd),
                "its GPUs in the window",
                "allocated-cost",
            ),
            card(
                "Idle cost",
                fmt.usd(cost.idle_cost_usd),
                "held below the idle threshold",
                "idle-cost",
            ),
            card(
                "GPU-hours held",
                fmt.gpu_hours(cost.allocated_gpu_hours),
                f"efficiency {fmt.pct(cost.efficiency_pct)}",
                "gpu-hours",
            ),
        ],
        className="gw-cards",
        id="pod-cards",
    )


def owner_section(f: Filters, top: dict[str, str], name: str) -> Any:
    link = dcc.Link(
        f"{top['workload_kind']} {top['workload']}",
        href=workload_href(f, top),
        className="gw-link",
        id="pod-owner",
    )
    chain = html.P(["Pod ", html.Strong(name), " ← ", link, f" · team {top['team'] or fmt.DASH}"])
    note = (
        "Its top owner, as the collector resolves it (a Deployment's ReplicaSet and a "
        "CronJob's Job are skipped): the workload it is costed and advised under."
    )
    return section("Owner", chain, note=note)


def gpus_table(snap: Snapshot, f: Filters, key: PodKey) -> Any:
    frame = workload_gpus(snap, f, key)
    if frame.empty:
        return html.P("This pod held no GPU in this window.", className="gw-note")
    rows = grid.rows_for(records_of(frame), GPU_COLUMNS)
    for row, gpu_id in zip(rows, frame["gpu_id"], strict=True):
        row[grid.HREF] = gpu_href(f, snap, int(gpu_id))
    subject = {"pod": key.name}
    export = grid.page_export("pod-gpus", f"GPUs held by pod {key.name}", snap, f, subject)
    return grid.grid("pod-gpus", GPU_COLUMNS, rows, export)


def body(snap: Snapshot, f: Filters, key: PodKey, records: Any) -> list[Any]:
    top = owner(records)
    series = workload_series(snap, f, key)
    util = per_gpu_figure(series, "util_pct", "Utilization per GPU (hourly mean)", "%")
    return [
        cards(snap, f, key, top),
        owner_section(f, top, key.name),
        section(
            "Phases",
            dcc.Graph(id="pod-phases", figure=phase_figure(records, snap.end_ts)),
            note="Pending from creation to start, Running from start to finish, per "
            "incarnation of the name (numbered oldest first, with its node).",
        ),
        section("GPUs over time", dcc.Graph(id="pod-util", figure=util)),
        section("GPUs held", gpus_table(snap, f, key), note="Open a GPU for its full history."),
    ]


def layout(**query: Any) -> html.Div:
    ctx = page_context(query)
    snap, f = ctx.snap, ctx.filters
    key = key_from(query)
    if key is None:
        hint = "Open one from a workload, node or GPU page."
        content: Any = empty_state(PAGE, "No pod chosen", hint, (f.href("/workloads"), "Workloads"))
        return shell(PAGE, PATH, TITLE, f, snap, None, content)
    records = pod_records(snap, key) if not snap.empty else None
    if records is None or records.empty:
        content = empty_state(
            PAGE,
            "Unknown pod",
            f"This store knows no pod {key.name} in {key.namespace} on {key.cluster}.",
            (f.href("/workloads"), "All workloads"),
        )
        return shell(PAGE, PATH, f"Pod {key.name}", f, snap, None, content)
    top = owner(records)
    workload = WorkloadKey(key.cluster, key.namespace, top["workload_kind"], top["workload"])
    trail = [
        *workload_trail(f, workload, top["team"] or None),
        (f"{workload.kind} {workload.name}", workload_href(f, top)),
    ]
    note = f"Namespace {key.namespace} · cluster {key.cluster}"
    crumbs = breadcrumbs(PAGE, trail, f"pod {key.name}")
    content = body(snap, f, key, records)
    return shell(PAGE, PATH, f"Pod {key.name}", f, snap, None, content, note=note, crumbs=crumbs)


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · Pod", order=23, layout=layout
)
