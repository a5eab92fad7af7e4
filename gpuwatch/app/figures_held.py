"""Who held a GPU unit when: shaded spans and their legend on the GPU page's charts (pure).

:func:`held_segments` turns a unit's history (one row per sample, or per hour where only
roll-ups are kept) into runs of one holder; :func:`held_overlay` draws them as shaded spans,
one colour per pod (the pods that held it longest first), named in the legend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c

#: Colours of the pods that held the unit longest, in order; the rest share :data:`OTHER`.
HOLDER_COLORS = ("#60a5fa", "#f472b6", "#34d399", "#fbbf24", "#a78bfa", "#fb923c")
OTHER = "#94a3b8"
#: Opacity of a shaded span: the lines stay readable over it.
SHADE_OPACITY = 0.16


def held_segments(history: pd.DataFrame) -> pd.DataFrame:
    """Runs of consecutive samples held by one pod: ``holder`` (``namespace/pod``),
    ``start_ts`` and ``end_ts`` (the end of the run's last sample, ``ts + span_s``).

    A run ends where the holder changes or the samples stop (a gap: no data, so nobody is
    shown holding it).

    >>> h = pd.DataFrame({"ts": [0, 60, 120, 300], "span_s": 60, "allocated": True,
    ...                   "namespace": "ml", "pod": ["a", "a", "b", "b"]})
    >>> held_segments(h).to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
    [{'holder': 'ml/a', 'start_ts': 0, 'end_ts': 120},
     {'holder': 'ml/b', 'start_ts': 120, 'end_ts': 180},
     {'holder': 'ml/b', 'start_ts': 300, 'end_ts': 360}]
    """
    held = history[history[c.ALLOCATED].astype(bool)] if len(history) else history
    if held.empty:
        return pd.DataFrame({"holder": [], "start_ts": [], "end_ts": []}).astype(
            {"holder": object, "start_ts": "int64", "end_ts": "int64"}
        )
    holder = held["namespace"].astype(str) + "/" + held["pod"].astype(str)
    frame = pd.DataFrame(
        {
            "holder": holder.to_numpy(dtype=object),
            "ts": held["ts"].to_numpy(dtype="int64"),
            "end": (held["ts"] + held["span_s"]).to_numpy(dtype="int64"),
        }
    ).sort_values(["ts", "holder"], kind="stable")
    names = frame["holder"].to_numpy()
    ts, end = frame["ts"].to_numpy(), frame["end"].to_numpy()
    new = np.r_[True, (names[1:] != names[:-1]) | (ts[1:] > np.maximum.accumulate(end)[:-1])]
    run = np.cumsum(new) - 1
    ends = pd.Series(end).groupby(run).max().to_numpy()
    return pd.DataFrame(
        {"holder": names[new], "start_ts": ts[new].astype("int64"), "end_ts": ends}
    ).astype({"holder": object, "end_ts": "int64"})


def legend_square(name: str, color: str, opacity: float = 1.0) -> dict[str, Any]:
    """A legend entry for a colour the figure draws without a trace of its own (a shaded span,
    a heatmap's cells): a square marker at no point."""
    return {
        "type": "scatter",
        "mode": "markers",
        "x": [None],
        "y": [None],
        "name": name,
        "marker": {"symbol": "square", "size": 12, "color": color, "opacity": opacity},
        "hoverinfo": "skip",
        "showlegend": True,
    }


@dataclass(frozen=True)
class Overlay:
    """Shaded spans (layout shapes) and the legend entries that name their pods."""

    shapes: list[dict[str, Any]]
    legend: list[dict[str, Any]]


def holder_colors(segments: pd.DataFrame) -> dict[str, str]:
    """A colour per holder: the longest held get :data:`HOLDER_COLORS`, the rest :data:`OTHER`."""
    seconds = (segments["end_ts"] - segments["start_ts"]).groupby(segments["holder"]).sum()
    ranked = sorted(seconds.items(), key=lambda item: (-item[1], item[0]))
    return {
        str(name): HOLDER_COLORS[i] if i < len(HOLDER_COLORS) else OTHER
        for i, (name, _) in enumerate(ranked)
    }


def held_overlay(segments: pd.DataFrame, times: Any) -> Overlay:
    """Each segment as a span shaded in its pod's colour across every panel, and one legend
    entry per colour (``times``: epoch seconds → plotly's UTC instants)."""
    colors = holder_colors(segments)
    shapes = [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": x0,
            "x1": x1,
            "y0": 0,
            "y1": 1,
            "fillcolor": colors[str(name)],
            "opacity": SHADE_OPACITY,
            "line": {"width": 0},
            "layer": "below",
        }
        for name, x0, x1 in zip(
            segments["holder"], times(segments["start_ts"]), times(segments["end_ts"]), strict=True
        )
    ]
    named = [(name, color) for name, color in colors.items() if color != OTHER]
    if len(named) < len(colors):
        named.append((f"{len(colors) - len(named)} other pods", OTHER))
    legend = [legend_square(f"held by {name}", color, opacity=0.5) for name, color in named]
    return Overlay(shapes, legend)
