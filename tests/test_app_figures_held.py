"""Who held a GPU when (GPU page) and allocated-idle versus unallocated (heatmap): pure figure
functions with exact expected data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from plotly.io.json import to_json_plotly

from gpuwatch.app.data import Filters
from gpuwatch.app.figures import UNALLOCATED_COLOR, gpu_history_figure
from gpuwatch.app.figures_heatmap import NO_DATA_COLOR, gpu_id_of, heatmap_figure, node_of
from gpuwatch.app.figures_held import HOLDER_COLORS, OTHER, held_segments, holder_colors
from gpuwatch.app.server import data_source
from gpuwatch.app.views_gpu import gpu_table
from gpuwatch.app.views_heatmap import Heatmap, heatmap
from tests.support.dash_app import demo_app


def _history(pods: list[str | None], ts: list[int], span_s: int = 60) -> pd.DataFrame:
    n = len(ts)
    return pd.DataFrame(
        {
            "ts": ts,
            "span_s": span_s,
            "step_s": span_s,
            "allocated": [p is not None for p in pods],
            "namespace": ["ml" if p else None for p in pods],
            "pod": pods,
            "util_ratio": [0.5] * n,
            "fb_used_mib": [100.0] * n,
            "fb_total_mib": [1000.0] * n,
            "temp_c": [40.0] * n,
            "power_w": [100.0] * n,
        }
    )


def test_segments_break_at_a_new_holder_a_gap_and_an_unheld_sample() -> None:
    history = _history(["a", "a", "b", None, "b", "b"], [0, 60, 120, 180, 240, 600])
    assert held_segments(history).to_dict("records") == [
        {"holder": "ml/a", "start_ts": 0, "end_ts": 120},
        {"holder": "ml/b", "start_ts": 120, "end_ts": 180},
        {"holder": "ml/b", "start_ts": 240, "end_ts": 300},
        {"holder": "ml/b", "start_ts": 600, "end_ts": 660},
    ]


def test_hourly_rows_make_hour_long_segments() -> None:
    history = _history(["a", "a"], [0, 3600], span_s=3600)
    assert held_segments(history).to_dict("records") == [
        {"holder": "ml/a", "start_ts": 0, "end_ts": 7200}
    ]


def test_nobody_held_it() -> None:
    assert held_segments(_history([None, None], [0, 60])).empty


def test_the_longest_holders_get_their_own_colours() -> None:
    rows = [(f"ml/p{i}", 0, 100 - i) for i in range(8)]
    segments = pd.DataFrame(rows, columns=["holder", "start_ts", "end_ts"])
    colors = holder_colors(segments)
    assert [colors[f"ml/p{i}"] for i in range(6)] == list(HOLDER_COLORS)
    assert colors["ml/p6"] == colors["ml/p7"] == OTHER


def test_the_gpu_chart_shades_each_holding_and_names_the_pod() -> None:
    history = _history(["a", "a", "b", None], [0, 60, 120, 180])
    figure = gpu_history_figure(history, 5.0)
    rects = [s for s in figure["layout"]["shapes"] if s["type"] == "rect"]
    assert [(r["x0"], r["x1"], r["fillcolor"]) for r in rects] == [
        ("1970-01-01T00:00:00", "1970-01-01T00:02:00", HOLDER_COLORS[0]),
        ("1970-01-01T00:02:00", "1970-01-01T00:03:00", HOLDER_COLORS[1]),
    ]
    named = [t["name"] for t in figure["data"] if t.get("showlegend")]
    assert named == ["held by ml/a", "held by ml/b"]
    assert figure["layout"]["showlegend"] is True


def test_an_unheld_gpu_chart_has_no_shading_and_no_legend() -> None:
    figure = gpu_history_figure(_history([None, None], [0, 60]), 5.0)
    assert [s["type"] for s in figure["layout"]["shapes"]] == ["line"]  # the idle threshold
    assert figure["layout"]["showlegend"] is False


def _heatmap(rows: int, z: list[list[float]], held: list[list[float]]) -> Heatmap:
    units = pd.DataFrame(
        {
            "gpu_id": range(rows),
            "node": ["n1"] * 2 + ["n2"] * (rows - 2),
            "unit": [f"GPU-{i}" for i in range(rows)],
        }
    )
    return Heatmap(np.array(z), np.array([0, 3600, 7200]), units, 3600, np.array(held))


def _sent(value: Any) -> Any:
    """A figure's value as the browser receives it: the JSON the dashboard sends (blank cells
    as ``null``)."""
    return json.loads(to_json_plotly(value))


def test_the_heatmap_tells_unallocated_from_allocated_idle() -> None:
    nan = float("nan")
    # GPU-0: held and idle, held and busy, no data. GPU-1: unallocated, held 40%, held 60%.
    hm = _heatmap(2, [[0.0, 80.0, nan], [3.0, 10.0, 20.0]], [[1.0, 1.0, nan], [0.0, 0.4, 0.6]])
    figure = heatmap_figure(hm)
    held, free = figure["data"][:2]
    assert _sent(held["z"]) == [[0.0, 80.0, None], [None, None, 20.0]]
    assert _sent(free["z"]) == [[None, None, None], [1.0, 1.0, None]]
    assert _sent(free["customdata"]) == [[None, None, None], [3.0, 10.0, None]]
    assert free["colorscale"] == [[0, UNALLOCATED_COLOR], [1, UNALLOCATED_COLOR]]
    legend = [(t["name"], t["marker"]["color"]) for t in figure["data"][2:]]
    assert legend == [
        ("unallocated (no pod held it)", UNALLOCATED_COLOR),
        ("no data", NO_DATA_COLOR),
    ]
    assert figure["layout"]["plot_bgcolor"] == NO_DATA_COLOR


def _ticks(figure: dict[str, Any]) -> list[str]:
    ticks: list[str] = figure["layout"]["yaxis"]["ticktext"]
    return ticks


def test_every_heatmap_row_is_labelled_on_a_small_fleet() -> None:
    hm = _heatmap(3, [[1.0] * 3] * 3, [[1.0] * 3] * 3)
    assert _ticks(heatmap_figure(hm)) == ["n1 · GPU-0", "GPU-1", "n2 · GPU-2"]


def test_a_big_fleet_labels_each_node_once() -> None:
    hm = _heatmap(81, [[1.0] * 3] * 81, [[1.0] * 3] * 81)
    assert _ticks(heatmap_figure(hm)) == ["n1", "n2"]


def _node_heatmap(nodes: int) -> Heatmap:
    units = pd.DataFrame(
        {
            "cluster": ["prod"] * nodes,
            "node": [f"n{i}" for i in range(nodes)],
            "gpu_id": -1,
            "gpu_units": [8] * nodes,
        }
    )
    z = np.full((nodes, 3), 50.0)
    return Heatmap(z, np.array([0, 3600, 7200]), units, 3600, np.ones((nodes, 3)), by_node=True)


def test_node_rows_are_labelled_with_what_a_click_opens() -> None:
    figure = heatmap_figure(_node_heatmap(2))
    labels = figure["data"][0]["y"]
    assert labels == ["n0 · 8 GPU units @prod", "n1 · 8 GPU units @prod"]
    assert [node_of(label) for label in labels] == [("prod", "n0"), ("prod", "n1")]
    assert [gpu_id_of(label) for label in labels] == [None, None]
    assert node_of("n0 · GPU-abc #42") is None and gpu_id_of("n0 · GPU-abc #42") == 42
    assert _ticks(figure) == ["n0", "n1"]
    assert figure["layout"]["title"]["text"].startswith("Utilization per node while held")
    assert "16 GPU units" in figure["layout"]["yaxis"]["title"]["text"]
    assert "click: the node's GPUs" in figure["data"][0]["hovertemplate"]


def test_many_node_rows_label_every_few_rows() -> None:
    ticks = _ticks(heatmap_figure(_node_heatmap(170)))  # 170 rows, at most 80 labels
    assert ticks == [f"n{i}" for i in range(0, 170, 3)]


def test_held_ratio_of_the_store_fleet(tmp_path: Path) -> None:
    with demo_app(tmp_path, seed=11):
        snap = data_source().data.current()
        f = Filters(window="24h")
        hm = heatmap(snap, f)
        table = gpu_table(snap, f, 85.0).set_index("gpu_id")
        never = table.index[table["held_gpu_hours"].eq(0) & table["data_hours"].gt(0)]
        full = table["data_hours"] * table["gpu_share"]
        always = table.index[table["held_gpu_hours"].ge(full - 1e-9) & full.gt(0)]
        row = {int(g): i for i, g in enumerate(hm.units["gpu_id"])}
        assert len(never) and len(always)
        for gpu in never:
            assert np.nanmax(hm.held_ratio[row[int(gpu)]]) == 0
        for gpu in always:
            assert np.nanmin(hm.held_ratio[row[int(gpu)]]) == 1
