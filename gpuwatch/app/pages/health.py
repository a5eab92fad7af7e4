"""Data health: is the data behind every other page complete? Per cluster the last collection,
per node coverage, the utilization signal, GPUs never attributed to a pod and exporter gaps."""

from __future__ import annotations

from typing import Any

import dash
import pandas as pd
from dash import html

from gpuwatch.app import format as fmt
from gpuwatch.app import grid
from gpuwatch.app.components import html_table, no_data, records_of, section, shell
from gpuwatch.app.context import page_context
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.app.pages.gpus import node_href
from gpuwatch.app.views import options
from gpuwatch.app.views_gpu import claim_problems, health_by_node

PAGE, PATH, TITLE = "health", "/health", "Data health"
grid.register_tables("health-collection", "health-claims")


LABELS_NOTE = (
    "Label variants (exported_pod or pod, UUID or uuid, Hostname or hostname) are resolved "
    "at collection and only the normalised labels are stored, so this page cannot say which "
    "variant each exporter sent."
)


def skipped_text(detail: object) -> str:
    """The series the last collection skipped or changed, by reason (``none``: it kept all)."""
    counts = detail.get("series_skipped") if isinstance(detail, dict) else None
    if not isinstance(counts, dict):
        return fmt.DASH
    if not counts:
        return "none"
    return "; ".join(f"{int(n):,} {fmt.text(reason)}" for reason, n in counts.items())


def partial_text(detail: object) -> str:
    """The last answer that stayed partial: when, the page it left unwritten, and the server's
    warnings (a dash: none recorded)."""
    partial = detail.get("partial") if isinstance(detail, dict) else None
    if not isinstance(partial, dict):
        return fmt.DASH
    warnings = partial.get("warnings")
    said = "; ".join(str(w) for w in warnings) if isinstance(warnings, list) else ""
    return (
        f"{fmt.when(partial.get('seen_ts'))}: the page from "
        f"{fmt.when(partial.get('page_start_ts'))} was not written ({fmt.text(said)})"
    )


def collection_rows(snap: Snapshot) -> list[dict[str, Any]]:
    rows = []
    for row in snap.collection.to_dict("records"):
        detail = row.get("detail") or {}
        step = detail.get("step_s") if isinstance(detail, dict) else None
        rows.append(
            {
                "cluster": fmt.text(row["cluster"]),
                "source": fmt.text(row["source"]),
                "watermark": fmt.when(row["watermark_ts"]),
                "updated": fmt.when(row["updated_ts"]),
                "step": fmt.duration(step) if step else fmt.DASH,
                "skipped": skipped_text(detail),
                "dra": fmt.text(detail.get("dra")) if isinstance(detail, dict) else fmt.DASH,
                "partial": partial_text(detail),
            }
        )
    return rows


def collection_table(snap: Snapshot) -> Any:
    rows = collection_rows(snap)
    if not rows:
        return html.P("No collection recorded yet: run `gpuwatch collect`.", className="gw-note")
    columns = [
        ("Cluster", lambda r: r["cluster"]),
        ("Source", lambda r: r["source"]),
        ("Collected up to", lambda r: r["watermark"]),
        ("Last collection", lambda r: r["updated"]),
        ("Step", lambda r: r["step"]),
        ("Series skipped or changed", lambda r: r["skipped"]),
        ("GPUs held through ResourceClaims", lambda r: r["dra"] or fmt.DASH),
        ("Last partial answer", lambda r: r["partial"]),
    ]
    return html_table("health-collection", columns, rows)


def _gap_text(row: dict[str, Any]) -> str:
    count = int(row["gaps"] or 0)
    if count == 0:
        return "none"
    total, longest = fmt.duration(row["gap_s"]), fmt.duration(row["longest_gap_s"])
    return f"{count} ({total} in all, longest {longest})"


NODE_COLUMNS = [
    grid.text_column("node", link=grid.HREF, pinned=True),
    grid.text_column("cluster"),
    grid.number_column("gpu_units", "GPU units", 0, total=True),
    grid.number_column("coverage_pct", "Coverage (%)"),
    grid.text_column("util_signal", "Utilization signal"),
    grid.number_column("unattributed", "GPUs without pod attribution", 0, total=True),
    grid.text_column("gaps_text", "Exporter gaps"),
    grid.time_column("last_ts", "Last sample"),
]
grid.register("health-nodes")


def nodes_table(snap: Snapshot, f: Filters) -> Any:
    frame = health_by_node(snap, f)
    records = records_of(frame.astype(object))
    for record in records:
        record["coverage_pct"] = (
            None if pd.isna(record["coverage_ratio"]) else (100.0 * float(record["coverage_ratio"]))
        )
        record["gaps_text"] = _gap_text(record)
    rows = grid.rows_for(records, NODE_COLUMNS)
    for row in rows:
        row["node"] = row["node"] or "(unknown node)"
        row[grid.HREF] = node_href(f, row["cluster"], row["node"])
    export = grid.page_export("health-nodes", "Data health per node", snap, f)
    return grid.grid("health-nodes", NODE_COLUMNS, rows, export)


def claims_section(snap: Snapshot, f: Filters) -> Any:
    """Claimed DRA devices whose GPU time is not attributed to the claim, and why."""
    frame = claim_problems(snap, f)
    if frame.empty:
        text = (
            "Every device a ResourceClaim holds is attributed to its pods."
            if len(snap.dra)
            else "No ResourceClaim holds a GPU (or DRA attribution is off: see Collection)."
        )
        return html.P(text, className="gw-note", id="health-claims-none")
    columns = [
        ("Cluster", lambda r: fmt.text(r["cluster"])),
        ("Claim", lambda r: fmt.text(r["claim"])),
        ("Device", lambda r: fmt.text(r["device"])),
        ("GPU", lambda r: fmt.text(r["gpu_uuid"]) or fmt.DASH),
        ("Pods", lambda r: fmt.text(r["pods"]) or fmt.DASH),
        ("Problem", lambda r: fmt.text(r["problem"])),
    ]
    return html_table("health-claims", columns, frame.astype(object).to_dict("records"))


def rollup_note(snap: Snapshot, idle_util_pct: float) -> list[Any]:
    """A warning when the roll-ups count idle time at another threshold than the settings."""
    built_at = snap.rollup_idle_util_pct
    if built_at is None or abs(built_at - idle_util_pct) < 1e-9:
        return []
    text = (
        f"The hourly roll-ups count idle time below {built_at:g}% utilization; the settings "
        f"say {idle_util_pct:g}%. Idle hours and idle cost on every page follow the roll-ups "
        "until `gpuwatch db rollup` rebuilds them at the new threshold."
    )
    return [section("Roll-ups", html.P(text, className="gw-note", id="health-rollup-threshold"))]


def body(snap: Snapshot, f: Filters, idle_util_pct: float) -> list[Any]:
    frame = health_by_node(snap, f)
    weak = frame[frame["coverage_ratio"].lt(0.95).fillna(False).astype(bool)]
    summary = (
        f"{len(frame)} nodes; {len(weak)} below 95% coverage; "
        f"{int(pd.to_numeric(frame['gaps']).fillna(0).sum())} exporter gaps in the window."
    )
    return [
        section(
            "Collection",
            grid.exportable(
                collection_table(snap), grid.page_export("collection", "Collection", snap, f)
            ),
            note="Per cluster and source: the point up to which collection is complete. Series "
            "skipped or changed: what the last collection did not store as Prometheus sent it, "
            "by reason (no GPU UUID, a label longer than the store keeps, malformed values). "
            "Last partial answer: when a query layer last answered part of the data only "
            "(warnings, isPartial), the page it left unwritten for the next collection to "
            "retry, and its warnings.",
        ),
        section(
            "Nodes",
            html.P(summary, className="gw-note", id="health-summary"),
            nodes_table(snap, f),
            note="Coverage: hours with a sample ÷ hours the GPUs existed (missing samples "
            "are no data, never idle). A GPU without pod attribution was never held by a "
            "pod in the window: unallocated capacity, or DCGM without pod labels there. Exporter "
            "gaps are counted per hour from the hourly roll-ups: an hour in which a GPU has "
            "fewer samples than its step implies (or none, between its first and last "
            "sample) is missing data, and consecutive such hours make one gap; its length is "
            "the missing samples × the step.",
        ),
        section(
            "ResourceClaims (DRA)",
            grid.exportable(
                claims_section(snap, f), grid.page_export("claims", "Resource claims", snap, f)
            ),
            note="Devices allocated to ResourceClaims at the last collection, joined to DCGM "
            "series by GPU UUID. Listed here: a device whose ResourceSlice gives no UUID, a GPU "
            "with no DCGM series, or series of a claimed GPU that no pod held in the window (an "
            "exporter without DRA pod mapping on a shared claim, for one).",
        ),
        *rollup_note(snap, idle_util_pct),
        section("Labels", html.P(LABELS_NOTE, className="gw-note")),
    ]


def layout(**query: Any) -> html.Div:
    ctx = page_context(query)
    snap, f = ctx.snap, ctx.filters
    if snap.empty:
        return no_data(PAGE, PATH, TITLE, f, snap)
    idle_pct = ctx.source.settings.thresholds.idle_util_pct
    return shell(PAGE, PATH, TITLE, f, snap, options(snap, f), body(snap, f, idle_pct))


def warm(data: DashboardData, snap: Snapshot) -> None:
    if not snap.empty:
        body(snap, Filters(), data.settings.thresholds.idle_util_pct)


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · Data health", order=7, layout=layout
)
