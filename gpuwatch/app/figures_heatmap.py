"""The utilization heatmap's figure (GPUs and node pages): pure, from
:class:`~gpuwatch.app.views_heatmap.Heatmap`; row labels carry what a click opens."""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuwatch.app.figures import _AXIS, UNALLOCATED_COLOR, Figure, _layout, empty_figure, times
from gpuwatch.app.figures_held import legend_square
from gpuwatch.app.views_heatmap import MAX_UNIT_ROWS, Heatmap
from gpuwatch.domain.durations import HOUR_S


def heatmap_row_label(node: str, unit: str, gpu_id: int) -> str:
    """A heatmap row: node, unit and the unit's id after ``#`` (read back on a click)."""
    return f"{node} · {unit} #{gpu_id}"


def gpu_id_of(label: object) -> int | None:
    """The unit id at the end of a heatmap row label, ``None`` if there is none."""
    _, _, tail = str(label).rpartition("#")
    return int(tail) if tail.isdigit() else None


NO_DATA_COLOR = "#cbd5e1"
#: A heatmap cell no pod held for at least half its data hours: unallocated.
UNALLOCATED_BELOW_RATIO = 0.5


def node_row_label(cluster: str, node: str, gpu_units: int) -> str:
    """A heatmap row of a node: its name, units and cluster after `` @`` (read back on a
    click)."""
    return f"{node} · {gpu_units} GPU units @{cluster}"


def node_of(label: object) -> tuple[str, str] | None:
    """The (cluster, node) of a node row label, ``None`` for any other label."""
    head, sep, cluster = str(label).rpartition(" @")
    node, dot, units = head.partition(" · ")
    return (cluster, node) if sep and dot and units.endswith(" GPU units") else None


#: Up to this many rows, every row of the heatmap is labelled; above, each node's first.
LABEL_EVERY_ROW = 80


def _row_ticks(nodes: np.ndarray, units: list[str], labels: list[str]) -> dict[str, Any]:
    """Y ticks: every row (``node · unit`` on a node's first row, ``unit`` after) up to
    :data:`LABEL_EVERY_ROW` rows, else each node's name on its first row."""
    first = np.r_[True, nodes[1:] != nodes[:-1]] if len(nodes) else np.array([], dtype=bool)
    if len(labels) <= LABEL_EVERY_ROW:
        text = [f"{n} · {u}" if f else u for n, u, f in zip(nodes, units, first, strict=True)]
        return {"tickvals": labels, "ticktext": text}
    rows = np.flatnonzero(first)
    return {"tickvals": [labels[i] for i in rows], "ticktext": [str(nodes[i]) for i in rows]}


def _cells(values: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Rounded cell values where ``keep``, NaN elsewhere: sent as ``null``, which plotly leaves
    blank. A float array, not lists: the figure's JSON encoder passes arrays whole to orjson,
    where it would visit every cell of a list (0.7 s for a 326 × 97 heatmap's three grids)."""
    out: np.ndarray = np.where(keep, np.round(values, 1), np.nan)
    return out


def _labels(hm: Heatmap) -> tuple[list[str], dict[str, Any]]:
    """Each row's label (read back on a click) and the y axis' ticks."""
    units = hm.units
    nodes = units["node"].astype(str).to_numpy()
    if hm.by_node:
        clusters, counts = units["cluster"].astype(str), units["gpu_units"].astype(int)
        labels = [node_row_label(*row) for row in zip(clusters, nodes, counts, strict=True)]
        every = max(1, -(-len(labels) // LABEL_EVERY_ROW))
        shown = list(range(0, len(labels), every))
        return labels, {"tickvals": [labels[i] for i in shown], "ticktext": list(nodes[shown])}
    ids = units["gpu_id"].astype(int).tolist()
    names = [str(u) for u in units["unit"]]
    labels = [heatmap_row_label(n, u, i) for n, u, i in zip(nodes, names, ids, strict=True)]
    return labels, _row_ticks(nodes, names, labels)


def heatmap_figure(hm: Heatmap) -> Figure:
    """Utilization % per GPU unit (rows grouped by node), or per node, over time; cells no pod
    held for most of their time in :data:`UNALLOCATED_COLOR`, cells without data grey; a click
    opens the unit, or the node."""
    if hm.units.empty or hm.z.size == 0:
        return empty_figure("No GPUs in scope")
    labels, ticks = _labels(hm)
    has_data = ~np.isnan(hm.z)
    free = has_data & (np.nan_to_num(hm.held_ratio, nan=1.0) < UNALLOCATED_BELOW_RATIO)
    x = times(hm.x_ts)
    when = "%{y}<br>%{x|%Y-%m-%d %H:%M} UTC<br>"
    click = "click: the node's GPUs" if hm.by_node else "click: GPU history"
    held = {
        "type": "heatmap",
        "z": _cells(hm.z, has_data & ~free),
        "x": x,
        "y": labels,
        "colorscale": "Viridis",
        "zmin": 0,
        "zmax": 100,
        "colorbar": {"title": {"text": "util %"}, "ticksuffix": "%"},
        "hovertemplate": when + f"utilization %{{z:.0f}}%<extra>{click}</extra>",
    }
    unallocated = {
        "type": "heatmap",
        "z": _cells(np.ones_like(hm.z), free),
        "customdata": _cells(hm.z, free),
        "x": x,
        "y": labels,
        "colorscale": [[0, UNALLOCATED_COLOR], [1, UNALLOCATED_COLOR]],
        "showscale": False,
        "hovertemplate": when + "unallocated: no pod held it; utilization "
        f"%{{customdata:.0f}}%<extra>{click}</extra>",
    }
    legend = [
        legend_square("unallocated (no pod held it)", UNALLOCATED_COLOR),
        legend_square("no data", NO_DATA_COLOR),
    ]
    return {"data": [held, unallocated, *legend], "layout": _heatmap_layout(hm, labels, ticks)}


def _heatmap_layout(hm: Heatmap, labels: list[str], ticks: dict[str, Any]) -> dict[str, Any]:
    hours = hm.column_s // HOUR_S
    height = int(min(max(320, 12 * len(labels) + 140), 2400))
    if hm.by_node:
        units = int(hm.units["gpu_units"].sum())
        title = f"Utilization per node while held ({hours} h per column)"
        axis = f"Nodes ({units:,} GPU units: a row per node above {MAX_UNIT_ROWS})"
    else:
        title = f"Utilization per GPU unit while held ({hours} h per column)"
        axis = "GPU units, grouped by node"
    layout = _layout(title, "", height=height, hovermode="closest", plot_bgcolor=NO_DATA_COLOR)
    layout["legend"] = {"orientation": "h", "x": 1, "xanchor": "right", "y": 1, "yanchor": "bottom"}
    layout["yaxis"] = {
        **_AXIS,
        "type": "category",
        "title": {"text": axis},
        **ticks,
        "autorange": "reversed",
        "showgrid": False,
        "tickfont": {"size": 10},
    }
    layout["xaxis"]["showgrid"] = False
    return layout
