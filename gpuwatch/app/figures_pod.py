"""The Pod page's phase timeline: pure, the pod's records in, a Plotly figure out."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pandas as pd

from gpuwatch.app import format as fmt
from gpuwatch.app.figures import COLORS, Figure, _layout, empty_figure

#: Each phase drawn: its name, colour, and the record's columns where it starts and ends.
PHASES = (
    ("Pending", COLORS["pending"], "created_ts", "started_ts"),
    ("Running", COLORS["allocated"], "started_ts", "finished_ts"),
)


def _iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _instant(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def phase_segments(records: pd.DataFrame, end_ts: int) -> list[tuple[str, str, int, int]]:
    """(incarnation label, phase, start, end) per phase each record went through; a phase
    still going ends at ``end_ts`` (the end of the data). Oldest incarnation first."""
    out: list[tuple[str, str, int, int]] = []
    ordered = records.sort_values("created_ts", kind="stable", na_position="first")
    for number, row in enumerate(ordered.to_dict("records"), start=1):
        label = f"#{number} {fmt.text(row.get('node')) or 'unscheduled'}"
        for phase, _, start_col, end_col in PHASES:
            start = _instant(row.get(start_col))
            if start is None or start >= end_ts:
                continue
            end = _instant(row.get(end_col))
            if phase == "Pending" and end is None:
                end = _instant(row.get("finished_ts"))  # never started: Pending until it went
            stop = end_ts if end is None else min(end, end_ts)
            if stop > start:
                out.append((label, phase, start, stop))
    return out


def phase_figure(records: pd.DataFrame, end_ts: int) -> Figure:
    """A bar per phase of each incarnation of the pod: Pending, then Running, over time."""
    segments = phase_segments(records, end_ts)
    if not segments:
        return empty_figure("No phase of this pod before the end of the data")
    data = []
    for phase, color, _, _ in PHASES:
        mine = [s for s in segments if s[1] == phase]
        if not mine:
            continue
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": phase,
                "y": [s[0] for s in mine],
                "base": [_iso(s[2]) for s in mine],
                "x": [1000 * (s[3] - s[2]) for s in mine],
                "marker": {"color": color},
                "customdata": [
                    f"{phase} {fmt.when(s[2])} to {fmt.when(s[3])} ({fmt.duration(s[3] - s[2])})"
                    for s in mine
                ],
                "hovertemplate": "%{customdata}<extra></extra>",
            }
        )
    rows = len({s[0] for s in segments})
    layout = _layout("Phases", "", height=140 + 36 * rows, barmode="overlay")
    layout["xaxis"] = {"type": "date", "title": {"text": "UTC"}}
    return {"data": data, "layout": layout}
