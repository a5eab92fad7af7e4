"""Recommendations as JSON records, a text table or CSV (``gpuwatch recommend --format``)."""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.totals import monthly_basis, potential_savings_usd

_TABLE_COLUMNS = (
    ("namespace", "NAMESPACE"),
    ("workload", "WORKLOAD"),
    ("gpu_model", "GPU MODEL"),
    ("kind", "KIND"),
    ("current", "CURRENT"),
    ("suggested", "SUGGESTED"),
    ("confidence", "CONFIDENCE"),
    ("est_monthly_savings_usd", "SAVINGS $/MONTH"),
)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _plain(value: Any) -> Any:
    """A JSON-safe value: NaN and <NA> become None, numpy scalars Python ones."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def to_json_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """One dict per recommendation, keys in contract order, savings rounded to cents."""
    records = []
    for row in frame[list(c.RECOMMENDATION_COLUMNS)].itertuples(index=False):
        record = {
            name: _plain(value) for name, value in zip(c.RECOMMENDATION_COLUMNS, row, strict=True)
        }
        record["est_monthly_savings_usd"] = round(float(record["est_monthly_savings_usd"]), 2)
        records.append(record)
    return records


def render_json(frame: pd.DataFrame) -> str:
    """The JSON array of ``gpuwatch recommend --format json``."""
    return json.dumps(to_json_records(frame), indent=2, ensure_ascii=False) + "\n"


def _instant(ts: int) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def table_footer(frame: pd.DataFrame, span: tuple[int, int] | None = None) -> list[str]:
    """The table's totals: recommendations and workloads, and the potential savings (the
    largest per workload), with the span of data they are extrapolated from."""
    workloads = len(frame[list(c.WORKLOAD_KEYS)].drop_duplicates())
    lines = [f"{len(frame)} recommendations for {workloads} workloads"]
    saving = f"potential savings ${potential_savings_usd(frame):,.2f} per month"
    if span is None:
        return [*lines, f"{saving} (the largest recommendation per workload)"]
    basis = monthly_basis((span[1] - span[0]) / 3600.0)
    return [
        *lines,
        f"{saving} (the largest recommendation per workload, {basis}: "
        f"{_instant(span[0])} to {_instant(span[1])})",
    ]


def render_table(frame: pd.DataFrame, span: tuple[int, int] | None = None) -> str:
    """A plain-text table for a terminal, largest saving first; ``span``: the data's
    ``[first, end)`` the savings are extrapolated from, stated in the footer."""
    if frame.empty:
        return "No recommendations for this window.\n"
    header = [title for _, title in _TABLE_COLUMNS]
    body = [
        [
            f"{float(record[name]):,.2f}"
            if name == "est_monthly_savings_usd"
            else str(record[name])
            for name, _ in _TABLE_COLUMNS
        ]
        for record in to_json_records(frame)
    ]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *body]
    ]
    lines.extend(["", *table_footer(frame, span)])
    return "\n".join(lines) + "\n"


def neutralise(text: str) -> str:
    """A text cell made safe for spreadsheets: a leading ``=+-@``, tab or CR gets a ``'``."""
    return "'" + text if text.startswith(_FORMULA_START) else text


def render_csv(frame: pd.DataFrame) -> str:
    """CSV with the contract's keys as header; ``evidence`` as a JSON object in one cell."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(c.RECOMMENDATION_COLUMNS)
    for record in to_json_records(frame):
        cells = []
        for name in c.RECOMMENDATION_COLUMNS:
            value = record[name]
            if name == "evidence":
                cells.append(json.dumps(value, sort_keys=True))
            elif name == "est_monthly_savings_usd":
                cells.append(f"{float(value):.2f}")
            else:
                cells.append(neutralise("" if value is None else str(value)))
        writer.writerow(cells)
    return buffer.getvalue()
