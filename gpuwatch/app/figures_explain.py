"""Figures that explain a workload's suggestions (the Workload page), as plain dicts.

Pure: arrays in, dicts out, like :mod:`gpuwatch.app.figures` (whose layout and line helpers
they share). Marked values (p95, p99, thresholds, GPU memory) are vertical lines at exactly
the value passed, labelled with it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gpuwatch.app.figures import _AXIS, COLORS, Figure, _layout, _line, empty_figure, times
from gpuwatch.app.figures import with_gaps as _with_gaps

#: Bar widths the memory distribution picks from, GiB.
MEMORY_WIDTHS_GIB = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
#: At most about this many bars in a distribution.
MAX_BARS = 100
HOUR_S = 3600


@dataclass(frozen=True)
class Mark:
    """A vertical line at ``x`` with a label (``dash``: plotly's line dash)."""

    x: float
    label: str
    color: str
    dash: str = "dash"


def bar_width(top: float, widths: Sequence[float] = MEMORY_WIDTHS_GIB) -> float:
    """The narrowest of ``widths`` that draws ``[0, top]`` in at most :data:`MAX_BARS` bars."""
    for width in widths:
        if top / width <= MAX_BARS:
            return float(width)
    return float(widths[-1])


def _bars(values: np.ndarray, counts: np.ndarray, width: float) -> tuple[np.ndarray, np.ndarray]:
    """Counts summed into bars ``[i·width, (i+1)·width)``: the bars' left edges and counts."""
    index = np.floor(np.asarray(values, dtype=np.float64) / width + 1e-9).astype(np.int64)
    edges, position = np.unique(index, return_inverse=True)
    summed = np.bincount(position, np.asarray(counts, dtype=np.float64), len(edges))
    return edges * width, summed


def _marks(
    marks: Sequence[Mark], right: float
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Shapes (vertical lines at ``x``) and their labels, staggered down from the top; a label
    in the right quarter of ``[0, right]`` sits left of its line."""
    shapes, notes = [], []
    for i, mark in enumerate(m for m in marks if not math.isnan(m.x)):
        leftward = mark.x > 0.75 * right
        line = {"color": mark.color, "dash": mark.dash, "width": 2}
        shapes.append(
            {"type": "line", "xref": "x", "yref": "paper", "x0": mark.x, "x1": mark.x,
             "y0": 0, "y1": 1, "line": line}
        )  # fmt: skip
        notes.append(
            {"x": mark.x, "xref": "x", "y": 1.0 - 0.09 * i, "yref": "paper", "text": mark.label,
             "showarrow": False, "xanchor": "right" if leftward else "left",
             "xshift": -4 if leftward else 4, "font": {"color": mark.color},
             "bgcolor": "rgba(255,255,255,0.8)"}
        )  # fmt: skip
    return shapes, notes


def distribution_figure(
    values: np.ndarray,
    counts: np.ndarray,
    width: float,
    marks: Sequence[Mark],
    title: str,
    axis: str,
    unit: str,
) -> Figure:
    """Share of samples per bar of ``width`` (in ``unit``; ``axis``: the x axis title), with
    ``marks`` as labelled vertical lines."""
    total = float(np.sum(counts))
    if total <= 0:
        return empty_figure(f"{title}: no stored samples in this window")
    left, summed = _bars(values, counts, width)
    bar = {
        "type": "bar",
        "x": (left + width / 2).tolist(),
        "y": (100.0 * summed / total).tolist(),
        "width": width,
        "customdata": [f"{a:,.4g}–{a + width:,.4g} {unit}" for a in left.tolist()],
        "marker": {"color": COLORS["allocated"]},
        "name": "samples",
        "hovertemplate": "%{customdata}: %{y:.1f} % of samples<extra></extra>",
    }
    layout = _layout(title, "samples (%)", hovermode="closest", showlegend=False)
    top = max([float(left.max()) + width, *(m.x for m in marks if not math.isnan(m.x))])
    layout["xaxis"] = {**_AXIS, "title": {"text": axis}, "range": [0, top * 1.04]}
    layout["shapes"], layout["annotations"] = _marks(marks, top * 1.04)
    layout["bargap"] = 0.05
    return {"data": [bar], "layout": layout}


@dataclass(frozen=True)
class Projection:
    """GPUs held per hour after a suggestion (NaN where it does not apply)."""

    label: str
    held_gpus: np.ndarray
    color: str


def held_busy_figure(
    hourly: pd.DataFrame,
    projections: Sequence[Projection] = (),
    band: tuple[float, float, str] | None = None,
) -> Figure:
    """GPUs held and busy per hour (``bucket_ts``, ``held_gpus``, ``busy_gpus``), the GPUs a
    suggestion would leave held (dashed) and an autoscaling range (``low, high, label``)."""
    if hourly.empty:
        return empty_figure("No GPU held by this workload in this window")
    ts = hourly["bucket_ts"].to_numpy(dtype="int64")
    data: list[dict[str, Any]] = []
    if band is not None:
        x = times([int(ts.min()), int(ts.max()) + HOUR_S])
        fill = "rgba(37,99,235,0.10)"
        data.append(_line(x, [band[0]] * 2, "", fill, "GPUs", showlegend=False, hoverinfo="skip"))
        data.append(_line(x, [band[1]] * 2, band[2], fill, "GPUs", fill="tonexty", fillcolor=fill))
    held_x, held_y = _with_gaps(ts, hourly["held_gpus"], HOUR_S)
    busy_x, busy_y = _with_gaps(ts, hourly["busy_gpus"], HOUR_S)
    data.append(
        _line(held_x, held_y, "held (allocated GPU-hours per hour)", COLORS["allocated"], "GPUs")
    )
    data.append(_line(busy_x, busy_y, "busy (used GPU-hours per hour)", COLORS["used"], "GPUs"))
    for p in projections:
        x, y = _with_gaps(ts, p.held_gpus, HOUR_S)
        data.append(_line(x, y, p.label, p.color, "GPUs", line={"color": p.color, "dash": "dash"}))
    return {"data": data, "layout": _layout("GPUs held vs busy (hourly)", "GPUs")}
