"""One GPU unit's history at full sample resolution: utilization, memory, temperature, power,
and the pods that held it. ``/gpu?uuid=GPU-…[&gi=…][&slot=…]`` (:mod:`gpuwatch.app.links`)."""

from __future__ import annotations

from typing import Any

import dash
import numpy as np
import pandas as pd
from dash import dcc, html

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.summary import sample_measures
from gpuwatch.app import format as fmt
from gpuwatch.app import grid
from gpuwatch.app.components import breadcrumbs, card, empty_state, records_of, section, shell
from gpuwatch.app.context import page_context, query_value
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.figures import gpu_history_figure
from gpuwatch.app.links import find_unit, workload_href
from gpuwatch.app.pages.gpus import node_href
from gpuwatch.app.pages.node import node_trail
from gpuwatch.app.views_gpu import unit_label
from gpuwatch.app.views_pod import pod_href
from gpuwatch.app.views_store import gpu_history
from gpuwatch.domain.durations import HOUR_S

PAGE, PATH, TITLE = "gpu", "/gpu", "GPU"


def history_note(history: pd.DataFrame, snap: Snapshot) -> str:
    """How many samples the history shows, and where it falls back to hourly roll-ups."""
    hourly = history["span_s"].eq(HOUR_S) & history["ts"].lt(snap.raw_from_ts)
    n_hourly = int(hourly.sum())
    text = f"Every stored sample ({len(history) - n_hourly:,} in the window)"
    if n_hourly:
        text += (
            f"; before {fmt.when(snap.raw_from_ts)} raw samples are no longer kept, so "
            f"{n_hourly:,} hourly roll-ups stand in: hourly mean utilization and power, "
            "hourly peak memory and temperature"
        )
    return text + "; gaps are missing samples (no data), never idle."


def holders(history: pd.DataFrame) -> pd.DataFrame:
    """The pods that held the unit in the window: first and last sample, hours, utilization."""
    held = history[history[c.ALLOCATED].astype(bool)]
    if held.empty:
        return pd.DataFrame()
    keys = ["cluster", "namespace", "workload_kind", "workload", "pod"]
    frame = held.assign(used=held[c.UTIL] * held[c.GPU_HOURS]).astype({k: object for k in keys})
    g = frame.groupby(keys, sort=False)
    out = g.agg(
        first_ts=("ts", "min"),
        last_ts=("ts", "max"),
        hours=(c.GPU_HOURS, "sum"),
        used=("used", "sum"),
    ).reset_index()
    out["util_pct"] = (100.0 * out["used"] / out["hours"]).where(out["hours"] > 0)
    return out.sort_values("last_ts", ascending=False).reset_index(drop=True)


def unit_price_text(unit: pd.Series) -> str:
    """The unit's own price per hour and, for a part of a GPU, the GPU's."""
    share = float(unit["gpu_share"])
    text = f"{fmt.usd(unit['usd_per_hour'] * share)} per hour"
    if share < 1:
        text += f" ({share:.3g} of a {fmt.usd(unit['usd_per_hour'])}/h GPU)"
    return text


def cards(unit: pd.Series, history: pd.DataFrame, idle_ratio: float, f: Filters) -> html.Div:
    m = sample_measures(history, idle_ratio) if len(history) else {}
    hours = float(history[c.GPU_HOURS].sum()) if len(history) else 0.0
    used = float(np.sum(history[c.UTIL] * history[c.GPU_HOURS])) if len(history) else 0.0
    held = float(np.sum(m.get(c.ALLOCATED_GPU_HOURS, 0.0)))
    node_link = dcc.Link(
        fmt.text(unit["node"]),
        className="gw-link",
        href=f.with_(cluster=str(unit["cluster"])).href("/node", name=unit["node"]),
    )
    xid = history["xid"].fillna(0).ne(0) if len(history) else pd.Series(dtype=bool)
    return html.Div(
        [
            card("Node", node_link, f"cluster {unit['cluster']}", "node", text=True),
            card(
                "GPU model",
                fmt.text(unit["gpu_model"]),
                unit_price_text(unit),
                "model",
                text=True,
            ),
            card(
                "Utilization",
                fmt.pct(100 * used / hours if hours else None),
                "mean over samples with data",
                "util",
            ),
            card(
                "Held by pods",
                fmt.pct(100 * held / hours if hours else None),
                fmt.gpu_hours(held),
                "held",
            ),
            card(
                "Idle cost",
                fmt.usd(float(np.sum(m.get(c.IDLE_COST_USD, 0.0)))),
                "held below the idle threshold",
                "idle-cost",
            ),
            card(
                "Peak temperature",
                fmt.with_unit(history["temp_c"].max() if len(history) else None, "°C"),
                "in the window",
                "temp",
            ),
            card(
                "XID errors",
                fmt.number(int(xid.sum())),
                "samples (hours, where only roll-ups are kept) with a non-zero XID code",
                "xid",
            ),
        ],
        className="gw-cards",
        id="gpu-cards",
    )


HOLDER_COLUMNS = [
    grid.text_column("pod", "Pod", link=grid.HREF, pinned=True),
    grid.text_column("workload", link="workload_href"),
    grid.text_column("namespace"),
    grid.time_column("first_ts", "From"),
    grid.time_column("last_ts", "To (last sample)"),
    grid.number_column("hours", "Held (GPU·h)", total=True),
    grid.number_column("util_pct", "Utilization (%)"),
]
grid.register("gpu-holders")


def holders_table(history: pd.DataFrame, f: Filters, snap: Snapshot, uuid: str) -> Any:
    frame = holders(history)
    if frame.empty:
        return html.P("No pod held this GPU in this window.", className="gw-note")
    rows = grid.rows_for(records_of(frame), HOLDER_COLUMNS)
    for row in rows:
        row[grid.HREF] = pod_href(f, row["cluster"], row["namespace"], row["pod"])
        row["workload_href"] = workload_href(f, row)
    export = grid.page_export("gpu-holders", f"Pods that held {uuid}", snap, f, {"gpu": uuid})
    return grid.grid("gpu-holders", HOLDER_COLUMNS, rows, export)


def unknown_text(query: dict[str, Any]) -> str:
    """Why the page shows no GPU: what the link asked for, and what may have happened."""
    uuid = query_value(query, "uuid")
    if uuid is None:
        return "No GPU unit with this id in the store (ids change when a store is rebuilt)."
    parts = [
        f"MIG instance {query_value(query, 'gi')}" if query_value(query, "gi") else "",
        f"slot {query_value(query, 'slot')}" if query_value(query, "slot") else "",
    ]
    which = ", ".join(p for p in parts if p)
    return (
        f"No GPU {uuid}{f' ({which})' if which else ''} in this store: the link may come from "
        "another store, or the GPU left the fleet before the roll-ups kept."
    )


def layout(**query: Any) -> html.Div:
    ctx = page_context(query)
    snap, f = ctx.snap, ctx.filters
    unit = None if snap.empty else find_unit(snap, query)
    if unit is None:
        content: Any = empty_state(
            PAGE,
            "Unknown GPU",
            unknown_text(query),
            (f.href("/gpus"), "All GPUs & nodes"),
        )
        return shell(PAGE, PATH, TITLE, f, snap, None, content)
    history = gpu_history(ctx.source.data, snap, int(unit["gpu_id"]), f)
    idle_pct = ctx.source.settings.thresholds.idle_util_pct
    label = unit_label(
        unit["gpu_uuid"], unit["mig_profile"], unit["slot"], unit["timeslice_replicas"]
    )
    content = [
        cards(unit, history, idle_pct / 100.0, f),
        section(
            "History",
            dcc.Graph(id="gpu-history", figure=gpu_history_figure(history, idle_pct)),
            note=history_note(history, snap),
        ),
        section(
            "Pods that held it",
            holders_table(history, f, snap, str(unit["gpu_uuid"])),
            note="From and to are the hour where only roll-ups are kept.",
        ),
    ]
    note = f"UUID {fmt.text(unit['gpu_uuid'])}"
    cluster, node = str(unit["cluster"]), str(unit["node"])
    trail = [*node_trail(f, cluster), (f"node {node}", node_href(f, cluster, node))]
    crumbs = breadcrumbs(PAGE, trail, f"GPU {label}")
    return shell(PAGE, PATH, f"GPU {label}", f, snap, None, content, note=note, crumbs=crumbs)


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · GPU", order=22, layout=layout
)
