"""Figures of GPU health and efficiency as plain dicts (pure: frames in, dicts out).

:func:`health_timeline_figure` draws the state of each GPU hour by hour (one row per GPU,
grouped by node, a colour per state), :func:`efficiency_figure` a workload's engine, SM,
tensor and DRAM activity per hour.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from gpuwatch.app import format as fmt
from gpuwatch.app.figures import (
    _AXIS,
    COLORS,
    Figure,
    _layout,
    _line,
    empty_figure,
    times,
    with_gaps,
)
from gpuwatch.app.health_text import STATE_WORDS, reasons_text
from gpuwatch.app.views_health import MAX_TIMELINE_GPUS
from gpuwatch.domain.durations import HOUR_S
from gpuwatch.domain.health import STATES

#: A colour per state, worst first.
STATE_COLORS: dict[str, str] = {
    "failing": "#dc2626",
    "app_error": "#7c3aed",
    "degraded": "#f59e0b",
    "healthy": "#16a34a",
}
RUN_COLUMNS = ("cluster", "node", "gpu_uuid", "state", "reasons", "start_ts", "end_ts")
#: The efficiency lines: column, name, colour.
ACTIVITY_LINES: tuple[tuple[str, str, str], ...] = (
    ("engine_active_pct", "engine active", COLORS["allocated"]),
    ("sm_active_pct", "SM active", COLORS["used"]),
    ("tensor_active_pct", "tensor active", COLORS["memory"]),
    ("dram_active_pct", "DRAM active", COLORS["temp"]),
)


def state_runs(timeline: pd.DataFrame) -> pd.DataFrame:
    """Consecutive hours of one GPU in the same state for the same reasons, as one run
    ``[start_ts, end_ts)``; a missing hour ends a run. Sorted by GPU, then time."""
    if timeline.empty:
        return pd.DataFrame({name: pd.Series(dtype=object) for name in RUN_COLUMNS})
    keys = ["cluster", "node", "gpu_uuid"]
    rows = timeline.astype({k: str for k in (*keys, "state", "reasons")})
    rows = rows.sort_values([*keys, "ts"], ignore_index=True)
    ts = rows["ts"].to_numpy(dtype="int64")
    same = np.ones(len(rows), dtype=bool)
    for name in (*keys, "state", "reasons"):
        values = rows[name].to_numpy()
        same[1:] &= values[1:] == values[:-1]
    same[1:] &= ts[1:] == ts[:-1] + HOUR_S
    same[0] = False
    run = np.cumsum(~same)
    grouped = rows.groupby(run, sort=True)
    out = grouped[[*keys, "state", "reasons"]].first()
    out["start_ts"] = grouped["ts"].min().to_numpy()
    out["end_ts"] = grouped["ts"].max().to_numpy() + HOUR_S
    return out.reset_index(drop=True)[list(RUN_COLUMNS)]


def _shown(runs: pd.DataFrame, gpus: int | None) -> tuple[pd.DataFrame, str]:
    """The runs of the GPUs the figure shows, and the title's note on what it leaves out
    (``gpus``: the GPUs in scope, when the runs hold only some of them)."""
    if gpus is None:
        gpus = len(runs[["cluster", "gpu_uuid"]].drop_duplicates())
    if gpus <= MAX_TIMELINE_GPUS:
        return runs, ""
    sick = runs.loc[runs["state"].ne("healthy"), ["cluster", "gpu_uuid"]].drop_duplicates()
    keep = runs.set_index(["cluster", "gpu_uuid"]).index.isin(sick.set_index(list(sick)).index)
    left_out = gpus - len(sick)
    return runs[keep], f"; {left_out:,} GPUs healthy throughout not shown"


def _bar(runs: pd.DataFrame, state: str, labels: list[str]) -> dict[str, Any]:
    reasons = [reasons_text(r) or "no reason" for r in runs["reasons"]]
    if state == "healthy":
        reasons = ["" for _ in reasons]
    starts, ends = runs["start_ts"].to_numpy(), runs["end_ts"].to_numpy()
    custom = [
        [fmt.when(s), fmt.when(e), reason]
        for s, e, reason in zip(starts, ends, reasons, strict=True)
    ]
    return {
        "type": "bar",
        "orientation": "h",
        "name": STATE_WORDS[state],
        "base": times(starts),
        "x": ((ends - starts) * 1000).astype("int64").tolist(),
        "y": labels,
        "marker": {"color": STATE_COLORS[state]},
        "customdata": custom,
        "hovertemplate": f"%{{y}}<br>{STATE_WORDS[state]} from %{{customdata[0]}} to "
        "%{customdata[1]}<br>%{customdata[2]}<extra></extra>",
    }


def health_timeline_figure(
    timeline: pd.DataFrame, labels: Mapping[tuple[str, str], str], gpus: int | None = None
) -> Figure:
    """Each GPU's state per hour (:func:`gpuwatch.analytics.health.health_timeline`): a row
    per GPU (``labels``: by (cluster, gpu_uuid), else node and UUID), grouped by node, a bar
    per run of hours in one state, coloured by state; the reasons on hover. Above
    :data:`MAX_TIMELINE_GPUS` GPUs in scope (``gpus``, else those of the timeline), only the
    GPUs that were not always healthy."""
    runs = state_runs(timeline)
    if runs.empty and not gpus:
        return empty_figure("No health readings in this window")
    runs, note = _shown(runs, gpus)
    names = [
        labels.get((c, u), f"{n} · {u}")
        for c, n, u in runs[["cluster", "node", "gpu_uuid"]].itertuples(index=False)
    ]
    runs = runs.assign(label=names)
    order = list(dict.fromkeys(runs["label"]))
    data = [
        _bar(runs[runs["state"].eq(state)], state, list(runs.loc[runs["state"].eq(state), "label"]))
        for state in STATES
        if bool(runs["state"].eq(state).any())
    ]
    height = int(min(max(300, 22 * len(order) + 140), 2400))
    title = f"State per GPU, hour by hour (grey: no reading){note}"
    layout = _layout(title, "", height=height, hovermode="closest", plot_bgcolor="#e2e8f0")
    layout["barmode"] = "overlay"
    layout["yaxis"] = {
        **_AXIS,
        "type": "category",
        "categoryorder": "array",
        "categoryarray": order,
        "title": {"text": "GPUs, grouped by node"},
        "autorange": "reversed",
        "showgrid": False,
    }
    return {"data": data, "layout": layout}


def efficiency_figure(timeline: pd.DataFrame, unavailable: str | None = None) -> Figure:
    """A workload's engine, SM, tensor and DRAM activity per hour, percent
    (:func:`gpuwatch.analytics.efficiency.efficiency_timeline`); a line only where its
    reading exists (gaps are no data)."""
    data = []
    for column, name, color in ACTIVITY_LINES:
        values = timeline[column].to_numpy(dtype="float64", na_value=np.nan)
        if not np.isfinite(values).any():
            continue
        x, y = with_gaps(timeline["ts"], values, HOUR_S)
        data.append(_line(x, y, name, color, "%"))
    if not data:
        return empty_figure(unavailable or "No activity readings for this workload in this window")
    layout = _layout("Engine vs SM vs tensor vs DRAM activity (hourly mean)", "active (%)")
    layout["yaxis"]["range"] = [0, 100]
    return {"data": data, "layout": layout}
