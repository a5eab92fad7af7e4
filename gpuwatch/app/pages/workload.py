"""One workload: its GPUs over time, its pods, its cost and its recommendations with evidence.

``/workload?cluster=..&namespace=..&kind=..&name=..``; a GPU row opens that GPU's history.
"""

from __future__ import annotations

from typing import Any

import dash
import numpy as np
import pandas as pd
from dash import dcc, html

from gpuwatch.analytics.explain import (
    HELD_KINDS,
    MIB_PER_GIB,
    NO_SAMPLES,
    EvidenceKeys,
    WorkloadDistributions,
    autoscale_band,
    projected_held,
    projected_state,
)
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.analytics.recommend import quantile_key
from gpuwatch.analytics.totals import monthly_basis, potential_savings_usd
from gpuwatch.app import format as fmt
from gpuwatch.app import grid
from gpuwatch.app.components import (
    breadcrumbs,
    card,
    empty_state,
    html_table,
    records_of,
    section,
    shell,
)
from gpuwatch.app.context import page_context, query_value
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.efficiency_panel import efficiency_section
from gpuwatch.app.evidence import column_heading, column_value, evidence_columns, rest_text
from gpuwatch.app.figures import COLORS, Figure, per_gpu_figure
from gpuwatch.app.figures_explain import (
    Mark,
    Projection,
    bar_width,
    distribution_figure,
    held_busy_figure,
)
from gpuwatch.app.links import gpu_href
from gpuwatch.app.views import data_hours
from gpuwatch.app.views_gpu import (
    WorkloadKey,
    workload_distributions,
    workload_gpu_memory_mib,
    workload_gpus,
    workload_hourly,
    workload_pods,
    workload_recommendations,
    workload_rows,
    workload_series,
)
from gpuwatch.app.views_health import efficiency_view
from gpuwatch.app.views_pod import pod_href

PAGE, PATH, TITLE = "workload", "/workload", "Workload"
grid.register_tables("workload-recommendations", "workload-efficiency-table")

QUANTILE_COLOR = "#1e293b"
WIDE_CELL = {"display": "inline-block", "minWidth": "18em"}
#: Dashed line of each suggestion that changes the GPUs held.
PROJECTION_COLORS = {"reduce_replicas": COLORS["memory"], "reduce_gpu_count": COLORS["pending"]}


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


GPU_COLUMNS = [
    grid.text_column("unit", "GPU", link=grid.HREF, pinned=True),
    grid.text_column("node"),
    grid.text_column("gpu_model"),
    grid.number_column("allocated_gpu_hours", "Held (GPU·h)", total=True),
    grid.number_column("util_pct", "Utilization (%)"),
    grid.number_column("fb_used_mib_max", "Peak memory (MiB)", 0),
    grid.money_column("allocated_cost_usd", "Cost ($)"),
    grid.time_column("last_bucket_ts", "Last held"),
]
POD_COLUMNS = [
    grid.text_column("pod", "Pod", link=grid.HREF, pinned=True),
    grid.text_column("node"),
    grid.text_column("phase", "Phase"),
    grid.number_column("gpu_count", "GPUs", 0),
    grid.text_column("gpu_resource", "GPU resource"),
    grid.text_column("team"),
    grid.time_column("created_ts", "Created"),
    grid.time_column("started_ts", "Started"),
    grid.time_column("finished_ts", "Finished"),
]
grid.register("workload-gpus", "workload-pods")


def _subject(key: WorkloadKey) -> dict[str, str]:
    return {"kind": key.kind, "workload": key.name}


def gpus_table(snap: Snapshot, f: Filters, key: WorkloadKey) -> Any:
    frame = workload_gpus(snap, f, key)
    rows = grid.rows_for(records_of(frame), GPU_COLUMNS)
    for row, gpu_id in zip(rows, frame["gpu_id"], strict=True):
        row[grid.HREF] = gpu_href(f, snap, int(gpu_id))
    title = f"GPUs held by {key.kind} {key.name}"
    export = grid.page_export("workload-gpus", title, snap, f, _subject(key))
    return grid.grid("workload-gpus", GPU_COLUMNS, rows, export)


def pods_table(snap: Snapshot, f: Filters, key: WorkloadKey) -> Any:
    frame = workload_pods(snap, key).head(200)
    rows = grid.rows_for(records_of(frame), POD_COLUMNS)
    for row in rows:
        row[grid.HREF] = pod_href(f, key.cluster, key.namespace, row["pod"])
    title = f"Pods of {key.kind} {key.name}"
    export = grid.page_export("workload-pods", title, snap, f, _subject(key))
    return grid.grid("workload-pods", POD_COLUMNS, rows, export)


def more_evidence(evidence: object, shown: tuple[str, ...]) -> html.Details:
    """The evidence without a column of its own, folded away."""
    text = html.Span(rest_text(evidence, shown), className="gw-evidence", style=WIDE_CELL)
    return html.Details([html.Summary("show"), text])


def recommendations_table(recs: pd.DataFrame, keys: EvidenceKeys) -> Any:
    if recs.empty:
        return html.P("No recommendation for this workload in this window.", className="gw-note")
    shown = evidence_columns(keys)

    def evidence_cell(name: str) -> tuple[str, Any]:
        return column_heading(name), lambda r: column_value(name, r["evidence"])

    columns = [
        ("Recommendation", lambda r: fmt.text(r["kind"])),
        ("GPU model", lambda r: fmt.text(r["gpu_model"])),
        ("Current", lambda r: fmt.text(r["current"])),
        ("Suggested", lambda r: fmt.text(r["suggested"])),
        (
            "Projected after the change",
            lambda r: html.Span(projected_state(r, keys), style=WIDE_CELL),
        ),
        ("Confidence", lambda r: fmt.text(r["confidence"])),
        ("Savings", lambda r: fmt.usd_month(r["est_monthly_savings_usd"])),
        *(evidence_cell(name) for name in shown),
        ("More evidence", lambda r: more_evidence(r["evidence"], shown)),
    ]
    return html_table("workload-recommendations", columns, recs.to_dict("records"))


def util_distribution(dist: WorkloadDistributions, policy: AnalyticsPolicy) -> Figure:
    """Utilization of the workload's samples, its p95 and the idle threshold marked."""
    at, name = dist.util_quantile_pct, quantile_key(policy.util_quantile)
    idle = policy.idle_util_pct
    marks = [
        Mark(at, f"{name} {at:.1f} %", QUANTILE_COLOR),
        Mark(idle, f"idle below {idle:g} %", COLORS["idle"], "dot"),
    ]
    title, axis = "Utilization of its samples", "utilization (%)"
    return distribution_figure(dist.util_pct, dist.util_samples, 1.0, marks, title, axis, "%")


def memory_distribution(
    dist: WorkloadDistributions, policy: AnalyticsPolicy, gpu_mib: float
) -> Figure:
    """Memory used by the workload's samples (GiB), its p99 and the GPU memory marked."""
    used = dist.memory_mib / MIB_PER_GIB
    at, name = dist.memory_quantile_mib / MIB_PER_GIB, quantile_key(policy.memory_quantile)
    gpu = gpu_mib / MIB_PER_GIB
    marks = [
        Mark(at, f"{name} {at:,.1f} GiB", QUANTILE_COLOR),
        Mark(gpu, f"GPU memory {gpu:,.1f} GiB", COLORS["capacity"], "solid"),
    ]
    width = bar_width(max(float(used.max(initial=0.0)), float(np.nan_to_num(gpu))))
    title, axis = "Memory used by its samples", "memory used (GiB)"
    return distribution_figure(used, dist.memory_samples, width, marks, title, axis, "GiB")


def distribution_figures(snap: Snapshot, f: Filters, key: WorkloadKey) -> tuple[Figure, Figure]:
    """Utilization and memory of every sample of the workload's pods in the window (empty
    figures without stored detail)."""
    dist = workload_distributions(snap, f, key) or NO_SAMPLES
    gpu_mib = workload_gpu_memory_mib(snap, f, key)
    return util_distribution(dist, snap.policy), memory_distribution(dist, snap.policy, gpu_mib)


def held_busy(snap: Snapshot, f: Filters, key: WorkloadKey, recs: pd.DataFrame) -> Figure:
    """GPUs held and busy per hour; dashed, the GPUs held after each suggestion that changes
    them (other GPU models' GPUs unchanged), and the autoscaling range when there is one."""
    hourly = workload_hourly(snap, f, key)
    totals = hourly.groupby("bucket_ts")[["held_gpus", "busy_gpus"]].sum().reset_index()
    keys = EvidenceKeys.of(snap.policy)
    projections, band = [], None
    for rec in recs[recs["kind"].isin(HELD_KINDS)].to_dict("records"):
        model = hourly[hourly["gpu_model"].eq(rec["gpu_model"])]
        by_hour = model.groupby("bucket_ts")["held_gpus"].sum().reindex(totals["bucket_ts"])
        held = by_hour.fillna(0.0).to_numpy(dtype="float64")
        after = projected_held(rec["kind"], rec["evidence"], held, keys)
        projections.append(
            Projection(
                f"after {rec['kind']}: {rec['suggested']}",
                totals["held_gpus"].to_numpy() - held + after,
                PROJECTION_COLORS[rec["kind"]],
            )
        )
        ends = autoscale_band(rec["evidence"])
        one_model = hourly["gpu_model"].nunique(dropna=False) == 1
        if ends is not None and ends[1] > ends[0] and one_model:
            band = (*ends, f"autoscaling range ({ends[0]:g}–{ends[1]:g} GPUs)")
    return held_busy_figure(totals, projections, band)


def body(snap: Snapshot, f: Filters, key: WorkloadKey) -> list[Any]:
    series = workload_series(snap, f, key)
    util = per_gpu_figure(series, "util_pct", "Utilization per GPU (hourly mean)", "%")
    memory = per_gpu_figure(series, "fb_used_mib_max", "Memory used per GPU (hourly peak)", "MiB")
    recs = workload_recommendations(snap, f, key)
    util_dist, memory_dist = distribution_figures(snap, f, key)
    keys = EvidenceKeys.of(snap.policy)
    return [
        cards(snap, f, key),
        section(
            "Recommendations",
            grid.exportable(
                recommendations_table(recs, keys),
                grid.page_export("recommendations", "Recommendations", snap, f, _subject(key)),
            ),
            note="Each suggestion with what the workload would look like after it, and the "
            "numbers behind it: percentiles pool every sample of the window, as "
            "gpuwatch recommend reads them. Suggestions of one workload are alternatives, "
            f"savings {monthly_basis(data_hours(snap, f.window))}.",
        ),
        section(
            "How it uses its GPUs",
            html.Div(
                [
                    dcc.Graph(id="workload-util-distribution", figure=util_dist),
                    dcc.Graph(id="workload-memory-distribution", figure=memory_dist),
                ],
                className="gw-grid-2",
            ),
            dcc.Graph(id="workload-held-busy", figure=held_busy(snap, f, key, recs)),
            note="Distributions: every sample of its pods in the window (all its GPU models). "
            "Held vs busy: per hour, GPUs held (allocated GPU-hours) and kept busy (used "
            "GPU-hours); dashed, what a suggestion would leave held.",
            key="workload-explain",
        ),
        efficiency_section(
            efficiency_view(snap, f.window, key),
            grid.page_export("efficiency", "Real efficiency", snap, f, _subject(key)),
        ),
        html.Div(
            [
                dcc.Graph(id="workload-util", figure=util),
                dcc.Graph(id="workload-memory", figure=memory),
            ],
            className="gw-grid-2",
        ),
        section("GPUs held", gpus_table(snap, f, key), note="Open a GPU for its full history."),
        section("Pods", pods_table(snap, f, key), note="As last seen in the Kubernetes API."),
    ]


def workload_team(snap: Snapshot, key: WorkloadKey) -> str | None:
    """The team of the workload's newest pod, None when no pod of it is known."""
    pods = workload_pods(snap, key) if not snap.empty else None
    if pods is None or pods.empty or pd.isna(pods["team"].iloc[0]):
        return None
    return str(pods["team"].iloc[0])


def workload_trail(f: Filters, key: WorkloadKey, team: str | None) -> list[tuple[str, str]]:
    """Workloads, its team's, its namespace's: each the Workloads page narrowed to it (the
    window and model filters kept; the page's own cluster and namespace are the workload's)."""
    base = f.with_(cluster=None, team=None, namespace=None)
    trail = [("Workloads", base.href("/workloads"))]
    if team is not None:
        trail.append((f"team {team}", base.with_(team=team).href("/workloads")))
    narrowed = base.with_(cluster=key.cluster, namespace=key.namespace)
    trail.append((f"namespace {key.namespace}", narrowed.href("/workloads")))
    return trail


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
    crumbs = breadcrumbs(PAGE, workload_trail(f, key, workload_team(snap, key)), title)
    return shell(PAGE, PATH, title, f, snap, None, content, note=note, crumbs=crumbs)


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · Workload", order=20, layout=layout
)
