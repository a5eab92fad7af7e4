"""Plotly figures as plain dicts, built from the views' frames (pure: frames in, dicts out).

Dicts instead of ``plotly.graph_objects`` keep a filter change fast (no validation of every
property on the server); the browser's plotly.js draws them the same. Every axis names its
unit; times are UTC; hover texts carry units too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.app.figures_held import held_overlay, held_segments
from gpuwatch.domain.durations import HOUR_S

Figure = dict[str, Any]
COLORS = {
    "capacity": "#94a3b8",
    "allocated": "#2563eb",
    "used": "#16a34a",
    "pending": "#f59e0b",
    "idle": "#dc2626",
    "memory": "#7c3aed",
    "temp": "#ea580c",
    "power": "#0891b2",
}
_FONT = {
    "family": "Inter, system-ui, -apple-system, Segoe UI, sans-serif",
    "size": 12,
    "color": "#1e293b",
}
_AXIS = {
    "gridcolor": "#e2e8f0",
    "zerolinecolor": "#cbd5e1",
    "linecolor": "#cbd5e1",
    "automargin": True,
}


def times(ts: Any) -> list[str]:
    """Epoch seconds as ISO instants in UTC (what plotly.js reads as dates)."""
    stamps = np.asarray(ts, dtype="int64").astype("datetime64[s]")
    text: list[str] = np.datetime_as_string(stamps, unit="s").tolist()
    return text


def _numbers(series: Any) -> np.ndarray:
    """A column as an object array of floats, ``None`` where missing."""
    array = np.asarray(pd.Series(series).astype("float64"), dtype="float64")
    out = array.astype(object)
    out[np.isnan(array)] = None
    return out


def _values(series: Any) -> list[Any]:
    """A column as JSON-ready numbers (``None`` for missing)."""
    values: list[Any] = _numbers(series).tolist()
    return values


def _layout(title: str, y_title: str, height: int = 360, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 15}},
        "font": _FONT,
        "height": height,
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "margin": {"l": 64, "r": 24, "t": 56, "b": 48},
        "legend": {"orientation": "h", "y": -0.22, "x": 0},
        "hovermode": "x unified",
        "xaxis": {**_AXIS, "title": {"text": "time (UTC)"}, "type": "date"},
        "yaxis": {**_AXIS, "title": {"text": y_title}, "rangemode": "tozero"},
    } | extra


def empty_figure(message: str, height: int = 260) -> Figure:
    """A blank figure that says why it is blank."""
    return {
        "data": [],
        "layout": {
            "height": height,
            "font": _FONT,
            "paper_bgcolor": "#ffffff",
            "plot_bgcolor": "#ffffff",
            "xaxis": {"visible": False},
            "yaxis": {"visible": False},
            "annotations": [
                {"text": message, "showarrow": False, "font": {"size": 14, "color": "#64748b"}}
            ],
        },
    }


def _line(x: list[str], y: Any, name: str, color: str, unit: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "lines",
        "x": x,
        "y": _values(y),
        "name": name,
        "line": {"color": color, "width": 2},
        "hovertemplate": f"%{{y:,.1f}} {unit}",
    } | extra


def capacity_figure(series: pd.DataFrame) -> Figure:
    """GPUs with data, held by pods, busy (util-weighted), and GPUs requested by waiting pods."""
    if series.empty:
        return empty_figure("No samples in this window")
    x = times(series[c.BUCKET_TS])
    data = [
        _line(x, series[c.CAPACITY_GPUS], "capacity (GPUs reporting)", COLORS["capacity"], "GPUs"),
        _line(x, series[c.ALLOCATED_GPUS], "allocated (held by pods)", COLORS["allocated"], "GPUs"),
        _line(
            x,
            series[c.USED_GPUS],
            "used (utilization-weighted)",
            COLORS["used"],
            "GPUs",
            fill="tozeroy",
            fillcolor="rgba(22,163,74,0.12)",
        ),
        _line(
            x,
            series[c.PENDING_GPUS],
            "pending demand (GPUs requested by waiting pods)",
            COLORS["pending"],
            "GPUs",
            line={"color": COLORS["pending"], "width": 2, "dash": "dot"},
        ),
    ]
    title = "Capacity vs allocated vs used, with pending demand (hourly mean)"
    return {"data": data, "layout": _layout(title, "GPUs")}


def bar_figure(
    frame: pd.DataFrame,
    label: str,
    value: str,
    title: str,
    axis: str,
    keys: tuple[str, ...] = (),
) -> Figure:
    """Horizontal bars of dollar values, largest on top (ten at most); each bar carries its
    ``keys`` columns as ``customdata`` (what a click on it opens)."""
    if frame.empty or float(frame[value].sum()) <= 0:
        return empty_figure(f"{title}: nothing in this window", height=300)
    top = frame.nlargest(10, value).iloc[::-1]
    bar: dict[str, Any] = {
        "type": "bar",
        "orientation": "h",
        "x": _values(top[value]),
        "y": [str(v) for v in top[label]],
        "marker": {"color": COLORS["idle"]},
        "texttemplate": "$%{x:,.0f}",
        "textposition": "auto",
        "hovertemplate": "%{y}: $%{x:,.0f}<extra></extra>",
    }
    if keys:
        bar["customdata"] = [[str(v) for v in row] for row in top[list(keys)].to_numpy()]
    layout = _layout(title, "", height=max(280, 80 + 30 * len(top)), hovermode="closest")
    layout["xaxis"] = {
        **_AXIS,
        "title": {"text": axis},
        "tickprefix": "$",
        "separatethousands": True,
        "rangemode": "tozero",
    }
    layout["yaxis"] = {**_AXIS, "title": {"text": ""}, "type": "category"}
    layout["margin"] = {"l": 24, "r": 24, "t": 56, "b": 48}
    return {"data": [bar], "layout": layout}


#: A heatmap cell or cost bar of GPUs no pod held: this colour.
UNALLOCATED_COLOR = "#fb7185"


def with_gaps(ts: Any, values: Any, step_s: Any) -> tuple[list[str], list[Any]]:
    """Points with a ``None`` inserted where the next instant is more than a step after one
    (``step_s``: one number, or one per point: the time each point stands for), so lines
    break where there is no data instead of bridging it."""
    ts = np.asarray(ts, dtype="int64")
    vals = _numbers(values)
    if len(ts) == 0:
        return [], []
    spans = np.broadcast_to(np.asarray(step_s, dtype="int64"), ts.shape)
    breaks = np.flatnonzero(np.diff(ts) > spans[:-1])
    xs = np.insert(ts, breaks + 1, ts[breaks] + spans[breaks])
    ys: list[Any] = np.insert(vals, breaks + 1, np.array([None] * len(breaks))).tolist()
    return times(xs), ys


def per_gpu_figure(series: pd.DataFrame, column: str, title: str, unit: str) -> Figure:
    """One line per GPU unit (the workload page: utilization or memory per GPU)."""
    if series.empty:
        return empty_figure("No samples held by this workload in this window")
    data = []
    for name, rows in series.groupby("unit", sort=True):
        x, y = with_gaps(rows["bucket_ts"], rows[column], HOUR_S)
        data.append(_line(x, y, str(name), "", unit) | {"line": {"width": 1.5}})
    layout = _layout(title, unit, showlegend=len(data) <= 8)
    return {"data": data, "layout": layout}


_PANELS = (
    ("util_pct", "Utilization (%)", "%"),
    ("fb_used_mib", "Memory used (MiB)", "MiB"),
    ("temp_c", "Temperature (°C)", "°C"),
    ("power_w", "Power (W)", "W"),
)


def gpu_history_figure(history: pd.DataFrame, idle_pct: float) -> Figure:
    """One GPU unit's history: utilization, memory, temperature and power per sample (per
    hour where only roll-ups are kept: ``span_s`` is the time each row stands for), shaded
    where a pod held it, in that pod's colour (:mod:`gpuwatch.app.figures_held`)."""
    if history.empty:
        return empty_figure("No samples for this GPU in this window")
    frame = history.assign(util_pct=100.0 * history["util_ratio"].astype("float64"))
    step = frame["span_s"].to_numpy() if "span_s" in frame else int(frame["step_s"].max())
    colors = (COLORS["used"], COLORS["memory"], COLORS["temp"], COLORS["power"])
    data: list[dict[str, Any]] = []
    layout = _layout("", "", height=860, showlegend=False)
    gap, size = 0.06, (1.0 - 0.06 * 3) / 4
    for i, (column, title, unit) in enumerate(_PANELS):
        axis = "" if i == 0 else str(i + 1)
        top = 1.0 - i * (size + gap)
        x, y = with_gaps(frame["ts"], frame[column], step)
        data.append(
            _line(x, y, title.split(" (")[0].lower(), colors[i], unit)
            | {"xaxis": f"x{axis}", "yaxis": f"y{axis}"}
        )
        layout[f"yaxis{axis}"] = {
            **_AXIS,
            "title": {"text": title},
            "domain": [top - size, top],
            "rangemode": "tozero",
        }
        layout[f"xaxis{axis}"] = {
            **_AXIS,
            "type": "date",
            "anchor": f"y{axis}",
            "matches": "x",
            "showticklabels": i == 3,
            "title": {"text": "time (UTC)" if i == 3 else ""},
        }
    x, y = with_gaps(frame["ts"], frame["fb_total_mib"], step)
    data.append(
        _line(x, y, "memory total", COLORS["capacity"], "MiB")
        | {"xaxis": "x2", "yaxis": "y2", "line": {"color": COLORS["capacity"], "dash": "dot"}}
    )
    layout["yaxis"]["range"] = [0, 105]
    layout["shapes"] = [
        {
            "type": "line",
            "xref": "paper",
            "x0": 0,
            "x1": 1,
            "yref": "y",
            "y0": idle_pct,
            "y1": idle_pct,
            "line": {"color": COLORS["idle"], "dash": "dot", "width": 1},
        }
    ]
    overlay = held_overlay(held_segments(history), times)
    layout["shapes"] += overlay.shapes
    layout["margin"] = {"l": 72, "r": 24, "t": 24, "b": 48}
    if overlay.legend:
        layout["showlegend"] = True
        layout["legend"] = {"orientation": "h", "x": 0, "y": -0.06, "yanchor": "top"}
        layout["margin"]["b"] = 120
        data = [trace | {"showlegend": False} for trace in data] + overlay.legend
    return {"data": data, "layout": layout}
