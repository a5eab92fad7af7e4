"""Figures of scheduling waste as plain dicts (pure: frames in, dicts out).

:func:`queue_figure` draws one queue's quota, allocated, busy and pending GPUs hour by hour
(:func:`gpuwatch.analytics.queues.queue_timeline`), :func:`lending_figure` the GPU-hours each
queue borrowed and lent (:func:`gpuwatch.analytics.queues.queue_report`), and
:func:`stranded_figure` the free and stranded GPUs per GPU model with the largest request that
fit nowhere (:func:`gpuwatch.analytics.capacity.capacity_timeline`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from gpuwatch.app.figures import _AXIS, COLORS, Figure, _layout, _line, _values, empty_figure, times
from gpuwatch.domain.durations import HOUR_S

#: The lines of a queue's figure: column of the timeline, name, colour, dash.
QUEUE_LINES: tuple[tuple[str, str, str, str], ...] = (
    ("quota_gpus", "quota (nominal)", COLORS["capacity"], "dash"),
    ("allocated_gpus", "allocated (held by its pods)", COLORS["allocated"], "solid"),
    ("busy_gpus", "busy (utilization-weighted)", COLORS["used"], "solid"),
    ("pending_gpus", "pending (GPUs its waiting work asks for)", COLORS["pending"], "dot"),
)
#: A colour per (cluster, GPU model) series of the stranded-capacity figure, in turn.
SERIES_COLORS = ("#2563eb", "#7c3aed", "#0891b2", "#ea580c", "#16a34a", "#db2777")


def hourly(ts: pd.Series, values: pd.Series) -> tuple[list[str], list[Any]]:
    """Hourly values on a continuous hour axis: hours without a row break the line."""
    stamps = np.asarray(ts, dtype="int64")
    if len(stamps) == 0:
        return [], []
    hours = np.arange(int(stamps.min()), int(stamps.max()) + HOUR_S, HOUR_S, dtype="int64")
    series = pd.Series(np.asarray(values, dtype="float64"), index=stamps)
    series = series.groupby(level=0).sum()
    return times(hours), _values(series.reindex(hours))


def queue_title(cluster: str, queue: str, flavor: str) -> str:
    """A queue as the page names it: ``queue · flavor (cluster)``."""
    name = f"{queue} · {flavor}" if flavor else queue
    return f"{name} ({cluster})"


def queue_figure(timeline: pd.DataFrame, title: str) -> Figure:
    """One queue's quota vs allocated vs busy GPUs per hour, with the GPUs its pending work
    asks for; allocated above the quota is borrowed, quota above allocated is unused."""
    if timeline.empty:
        return empty_figure(f"{title}: no hours in this window")
    rows = timeline.sort_values("ts")
    data = []
    for column, name, color, dash in QUEUE_LINES:
        x, y = hourly(rows["ts"], rows[column])
        data.append(
            _line(x, y, name, color, "GPUs", line={"color": color, "width": 2, "dash": dash})
        )
    layout = _layout(f"{title}: quota vs allocated vs busy (hourly mean)", "GPUs", height=320)
    return {"data": data, "layout": layout}


def lending_figure(report: pd.DataFrame) -> Figure:
    """GPU-hours each queue borrowed from its cohort and lent to it, side by side."""
    if report.empty or not bool(
        (report["borrowed_gpu_hours"].gt(0) | report["lent_gpu_hours"].gt(0)).any()
    ):
        return empty_figure("No queue borrowed or lent quota in this window", height=240)
    labels = [
        queue_title(str(c), str(q), "" if pd.isna(f) else str(f))
        for c, q, f in report[["cluster", "queue", "flavor"]].itertuples(index=False)
    ]
    bars = [
        _bar(labels, report["borrowed_gpu_hours"], "borrowed", COLORS["pending"]),
        _bar(labels, report["lent_gpu_hours"], "lent", COLORS["allocated"]),
    ]
    layout = _layout(
        "Quota borrowed and lent per queue", "", height=max(260, 100 + 36 * len(labels))
    )
    layout |= {"barmode": "group", "hovermode": "closest"}
    layout["xaxis"] = {**_AXIS, "title": {"text": "GPU-hours"}, "rangemode": "tozero"}
    layout["yaxis"] = {**_AXIS, "title": {"text": ""}, "type": "category", "autorange": "reversed"}
    return {"data": bars, "layout": layout}


def _bar(labels: list[str], values: pd.Series, name: str, color: str) -> dict[str, Any]:
    return {
        "type": "bar",
        "orientation": "h",
        "name": name,
        "x": _values(values),
        "y": labels,
        "marker": {"color": color},
        "hovertemplate": f"%{{y}}: %{{x:,.1f}} GPU·h {name}<extra></extra>",
    }


def stranded_figure(timeline: pd.DataFrame) -> Figure:
    """Per GPU model and hour: free GPUs (dotted), stranded GPUs (free while a pending pod fit
    the free total but no single node; solid) and the largest such request (markers)."""
    if timeline.empty:
        return empty_figure("No free GPUs in this window", height=240)
    data: list[dict[str, Any]] = []
    groups = timeline.sort_values("ts").groupby(["cluster", "gpu_model"], sort=True)
    for i, ((cluster, model), rows) in enumerate(groups):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        name = f"{model} ({cluster})"
        x, free = hourly(rows["ts"], rows["free_gpus"])
        _, stranded = hourly(rows["ts"], rows["stranded_gpus"])
        dotted = {"color": color, "width": 1.5, "dash": "dot"}
        data.append(_line(x, free, f"free · {name}", color, "GPUs", line=dotted))
        data.append(_line(x, stranded, f"stranded · {name}", color, "GPUs"))
        asked = rows[rows["largest_unplaceable_request"].fillna(0).gt(0)]
        if len(asked):
            data.append(_request_markers(asked, name, color))
    title = "Free vs stranded GPUs, with the largest request that fit no node (hourly)"
    return {"data": data, "layout": _layout(title, "GPUs")}


def _request_markers(rows: pd.DataFrame, name: str, color: str) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "markers",
        "x": times(rows["ts"]),
        "y": _values(rows["largest_unplaceable_request"]),
        "name": f"largest unplaceable request · {name}",
        "marker": {"color": color, "symbol": "x", "size": 9},
        "hovertemplate": "a pending pod asked for %{y:.0f} GPUs",
    }
