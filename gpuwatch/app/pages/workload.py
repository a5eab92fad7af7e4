"""One workload: its GPUs over time, its pods, its cost and its recommendations with evidence.

``/workload?cluster=..&namespace=..&kind=..&name=..``; a GPU row opens that GPU's history.
"""

from __future__ import annotations

from typing import Any

import dash
import pandas as pd
from dash import dcc, html

from gpuwatch.analytics.totals import monthly_basis, potential_savings_usd
from gpuwatch.app import format as fmt
from gpuwatch.app.components import card, empty_state, html_table, section, shell
from gpuwatch.app.context import page_context, query_value
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.figures import per_gpu_figure
from gpuwatch.app.views import data_hours
from gpuwatch.app.views_gpu import (
    WorkloadKey,
    workload_gpus,
    workload_pods,
    workload_recommendations,
    workload_rows,
    workload_series,
)

PAGE, PATH, TITLE = "workload", "/workload", "Workload"


def key_from(query: dict[str, Any]) -> WorkloadKey | None:
    values = [query_value(query, name) for name in ("cluster", "namespace", "kind", "name")]
    if any(v is None for v in values):
        return None
    return WorkloadKey(*(str(v) for v in values))


def cards(snap: Snapshot, f: Filters, key: WorkloadKey) -> html.Div:
    rows = workload_rows(snap, f, key)
    alloc = float(rows["allocated_gpu_hours"].sum())
    used = float(rows["used_gpu_hours"].sum())
    recs = workload_recommendations(snap, f, key)
    saving = potential_savings_usd(recs)
    return html.Div(
        [
            card("GPU units held", fmt.number(rows["gpu_id"].nunique()), "in the window", "units"),
            card("Allocated", fmt.gpu_hours(alloc), "GPU-hours held by its pods", "allocated"),
            card(
                "Utilization",
                fmt.pct(100 * used / alloc if alloc else None),
                "used ÷ allocated",
                "efficiency",
            ),
            card("Cost", fmt.usd(rows["allocated_cost_usd"].sum()), "of the GPUs it held", "cost"),
            card(
                "Idle cost",
                fmt.usd(rows["idle_cost_usd"].sum()),
                "held below the idle threshold",
                "idle-cost",
            ),
            card(
                "Potential savings / month",
                fmt.usd(saving),
                f"largest of {len(recs)} recommendations, "
                f"{monthly_basis(data_hours(snap, f.window))}",
                "savings",
            ),
        ],
        className="gw-cards",
        id="workload-cards",
    )


def gpus_table(snap: Snapshot, f: Filters, key: WorkloadKey) -> Any:
    frame = workload_gpus(snap, f, key)
    columns = [
        (
            "GPU",
            lambda r: dcc.Link(
                fmt.text(r["unit"]), href=f.href("/gpu", id=int(r["gpu_id"])), className="gw-link"
            ),
        ),
        ("Node", lambda r: fmt.text(r["node"])),
        ("GPU model", lambda r: fmt.text(r["gpu_model"])),
        ("Held", lambda r: fmt.gpu_hours(r["allocated_gpu_hours"])),
        ("Utilization", lambda r: fmt.pct(r["util_pct"])),
        ("Peak memory", lambda r: fmt.with_unit(r["fb_used_mib_max"], "MiB")),
        ("Cost", lambda r: fmt.usd(r["allocated_cost_usd"])),
        ("Last held", lambda r: fmt.when(r["last_bucket_ts"])),
    ]
    return html_table("workload-gpus", columns, frame.to_dict("records"))


def pods_table(snap: Snapshot, key: WorkloadKey) -> Any:
    frame = workload_pods(snap, key).head(200)
    columns = [
        ("Pod", lambda r: fmt.text(r["pod"])),
        ("Node", lambda r: fmt.text(r["node"])),
        ("Phase", lambda r: fmt.text(r["phase"])),
        ("GPUs", lambda r: f"{fmt.number(r['gpu_count'])} × {fmt.text(r['gpu_resource'])}"),
        ("Team", lambda r: fmt.text(r["team"])),
        ("Created", lambda r: fmt.when(r["created_ts"])),
        ("Started", lambda r: fmt.when(r["started_ts"])),
        ("Finished", lambda r: fmt.when(r["finished_ts"])),
    ]
    return html_table("workload-pods", columns, frame.astype(object).to_dict("records"))


def recommendations_table(recs: pd.DataFrame) -> Any:
    if recs.empty:
        return html.P("No recommendation for this workload in this window.", className="gw-note")
    columns = [
        ("Recommendation", lambda r: fmt.text(r["kind"])),
        ("GPU model", lambda r: fmt.text(r["gpu_model"])),
        ("Current", lambda r: fmt.text(r["current"])),
        ("Suggested", lambda r: fmt.text(r["suggested"])),
        ("Confidence", lambda r: fmt.text(r["confidence"])),
        ("Savings", lambda r: fmt.usd_month(r["est_monthly_savings_usd"])),
        ("Evidence", lambda r: html.Span(fmt.evidence(r["evidence"]), className="gw-evidence")),
    ]
    return html_table("workload-recommendations", columns, recs.to_dict("records"))


def body(snap: Snapshot, f: Filters, key: WorkloadKey) -> list[Any]:
    series = workload_series(snap, f, key)
    util = per_gpu_figure(series, "util_pct", "Utilization per GPU (hourly mean)", "%")
    memory = per_gpu_figure(series, "fb_used_mib_max", "Memory used per GPU (hourly peak)", "MiB")
    return [
        cards(snap, f, key),
        html.Div(
            [
                dcc.Graph(id="workload-util", figure=util),
                dcc.Graph(id="workload-memory", figure=memory),
            ],
            className="gw-grid-2",
        ),
        section(
            "Recommendations",
            recommendations_table(workload_recommendations(snap, f, key)),
            note="From the hourly roll-ups: utilization percentiles are of hourly means, "
            "memory percentiles of hourly peaks. Savings are alternatives, "
            f"{monthly_basis(data_hours(snap, f.window))} in this window.",
        ),
        section("GPUs held", gpus_table(snap, f, key), note="Open a GPU for its full history."),
        section("Pods", pods_table(snap, key), note="As last seen in the Kubernetes API."),
    ]


def layout(**query: Any) -> html.Div:
    ctx = page_context(query)
    snap, f = ctx.snap, ctx.filters
    key = key_from(query)
    if key is None:
        content: Any = empty_state(
            PAGE,
            "No workload chosen",
            "Pick one on the Workloads page.",
            (f.href("/workloads"), "Workloads"),
        )
        return shell(PAGE, PATH, TITLE, f, snap, None, content)
    title = f"{key.kind} {key.name}"
    note = f"Namespace {key.namespace} · cluster {key.cluster}"
    if snap.empty or (workload_rows(snap, f, key).empty and workload_pods(snap, key).empty):
        content = empty_state(
            PAGE,
            "No data for this workload",
            "It held no GPU in this window: try a longer window.",
            (f.href("/workloads"), "All workloads"),
        )
    else:
        content = body(snap, f, key)
    return shell(PAGE, PATH, title, f, snap, None, content, note=note)


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · Workload", order=20, layout=layout
)
