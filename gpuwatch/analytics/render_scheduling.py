"""``gpuwatch queues`` and ``gpuwatch capacity`` entries as JSON records, CSV or a text table
(contract section 7)."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

import pandas as pd

from gpuwatch.analytics.render import neutralise

#: Keys that are whole numbers; every other number is rounded to 2 decimals.
_INTEGERS = frozenset({"largest_unplaceable_request"})


def _value(key: str, value: Any) -> Any:
    if value is None or value is pd.NA:
        return None
    if isinstance(value, str):
        return value
    number = float(value)
    if math.isnan(number):
        return None
    return int(number) if key in _INTEGERS else round(number, 2) + 0.0


def to_records(frame: pd.DataFrame, keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """One dict per row, keys in the given order, numbers rounded, missing text as null."""
    return [{k: _value(k, row[k]) for k in keys} for row in frame[list(keys)].to_dict("records")]


def render_json(frame: pd.DataFrame, keys: tuple[str, ...]) -> str:
    return json.dumps(to_records(frame, keys), indent=2, ensure_ascii=False) + "\n"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.2f}"
    return neutralise(str(value)) if isinstance(value, str) else str(value)


def render_csv(frame: pd.DataFrame, keys: tuple[str, ...]) -> str:
    """CSV with the keys as header; text cells neutralised against formula injection."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(keys)
    for record in to_records(frame, keys):
        writer.writerow([_cell(record[k]) for k in keys])
    return buffer.getvalue()


def render_table(frame: pd.DataFrame, columns: tuple[tuple[str, str], ...], empty: str) -> str:
    """A plain text table of (key, title) columns, or the one line ``empty`` without rows."""
    if frame.empty:
        return empty + "\n"
    keys = tuple(k for k, _ in columns)
    rows = [[_cell(r[k]) for k in keys] for r in to_records(frame, keys)]
    titles = [t for _, t in columns]
    widths = [max(len(t), *(len(r[i]) for r in rows)) for i, t in enumerate(titles)]
    lines = ["  ".join(t.ljust(w) for t, w in zip(titles, widths, strict=True)).rstrip()]
    for row in rows:
        cells = [
            cell.rjust(w) if keys[i] not in _TEXT_KEYS else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


_TEXT_KEYS = frozenset({"cluster", "cohort", "queue", "flavor", "gpu_model"})
