"""Recommendations as JSON records, a text table or CSV (``gpuwatch recommend --format``)."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import textwrap
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.totals import monthly_basis, potential_savings_usd
from gpuwatch.domain.words import counted

#: The text table fits a terminal this wide: one line per recommendation, then its GPU model
#: and change (wrapped), indented under the kind.
TABLE_WIDTH = 120
_TABLE_HEADER = ("SAVINGS $/MONTH", "KIND", "CONFIDENCE", "CLUSTER", "TEAM", "NAMESPACE/WORKLOAD")
#: Widest cluster and team cells; longer names end in an ellipsis. The workload takes the
#: rest of the line, at least :data:`_MIN_WORKLOAD` characters.
_CAPS = (None, None, None, 16, 16, None)
_MIN_WORKLOAD = 20
_GAP = "  "
_INSTANT = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC")
#: What a text cell may not start with in a CSV a spreadsheet opens (formula injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


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


def instant_text(ts: int) -> str:
    """An instant as every summary line states it: ``2026-11-16 00:00 UTC``."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _context(window: tuple[int, int] | None, scope: str) -> list[str]:
    """The window asked for and the scope shown, as the first footer line (none without)."""
    parts = []
    if window is not None:
        parts.append(f"window {instant_text(window[0])} to {instant_text(window[1])}")
    if scope:
        parts.append(f"showing {scope}")
    return ["; ".join(parts)] if parts else []


def table_footer(
    frame: pd.DataFrame,
    span: tuple[int, int] | None = None,
    window: tuple[int, int] | None = None,
    scope: str = "",
) -> list[str]:
    """The table's totals: the window asked for and the scope shown, recommendations and
    workloads, and the potential savings (the largest per workload), with the span of data
    they are extrapolated from. ``gpuwatch recommend`` echoes them with every format."""
    workloads = len(frame[list(c.WORKLOAD_KEYS)].drop_duplicates())
    lines = [
        *_context(window, scope),
        f"{counted(len(frame), 'recommendation')} for {counted(workloads, 'workload')}",
    ]
    saving = f"potential savings ${potential_savings_usd(frame):,.2f} per month"
    if span is None:
        return [*lines, f"{saving} (the largest recommendation per workload)"]
    basis = monthly_basis((span[1] - span[0]) / 3600.0)
    return [
        *lines,
        f"{saving} (the largest recommendation per workload, {basis}: "
        f"{instant_text(span[0])} to {instant_text(span[1])})",
    ]


def _table_cells(record: dict[str, Any]) -> list[str]:
    text = {k: "" if v is None else str(v) for k, v in record.items()}
    return [
        f"{float(record['est_monthly_savings_usd']):,.2f}",
        text["kind"],
        text["confidence"],
        text["cluster"],
        text["team"],
        f"{text['namespace']}/{text['workload']}",
    ]


def _fit(cell: str, width: int) -> str:
    return cell if len(cell) <= width else cell[: width - 1] + "…"


def _table_widths(rows: list[list[str]]) -> list[int]:
    natural = [max(len(row[i]) for row in rows) for i in range(len(_TABLE_HEADER))]
    widths = [w if cap is None else min(w, cap) for w, cap in zip(natural, _CAPS, strict=True)]
    others = sum(widths[:-1]) + len(_GAP) * (len(widths) - 1)
    widths[-1] = min(natural[-1], max(_MIN_WORKLOAD, TABLE_WIDTH - others))
    return widths


def _table_line(cells: list[str], widths: list[int]) -> str:
    shown = [_fit(cell, w) for cell, w in zip(cells, widths, strict=True)]
    first = shown[0].rjust(widths[0])
    rest = [cell.ljust(w) for cell, w in zip(shown[1:], widths[1:], strict=True)]
    return _GAP.join([first, *rest]).rstrip()


def _change(record: dict[str, Any], indent: int) -> list[str]:
    """The recommendation's GPU model and change, wrapped under the kind column."""
    text = f"{record['gpu_model'] or '?'}: {record['current']} → {record['suggested']}"
    return textwrap.wrap(
        text,
        TABLE_WIDTH,
        initial_indent=" " * indent,
        subsequent_indent=" " * (indent + 2),
        break_on_hyphens=False,
    )


def render_table(
    frame: pd.DataFrame,
    span: tuple[int, int] | None = None,
    window: tuple[int, int] | None = None,
    scope: str = "",
) -> str:
    """A plain-text table for a terminal (at most :data:`TABLE_WIDTH` wide), largest saving
    first; ``span``: the data's ``[first, end)`` the savings are extrapolated from, and
    ``window`` the one asked for, both stated in the footer with the ``scope`` shown."""
    if frame.empty:
        return "\n".join(["No recommendations for this window.", *_context(window, scope)]) + "\n"
    records = to_json_records(frame)
    rows = [list(_TABLE_HEADER), *(_table_cells(r) for r in records)]
    widths = _table_widths(rows)
    indent = widths[0] + len(_GAP)
    lines = [_table_line(rows[0], widths)]
    for record, cells in zip(records, rows[1:], strict=True):
        lines.append(_table_line(cells, widths))
        lines.extend(_change(record, indent))
    lines.extend(["", *(_wrapped(line) for line in table_footer(frame, span, window, scope))])
    return "\n".join(lines) + "\n"


def _wrapped(line: str) -> str:
    """A footer line wrapped to :data:`TABLE_WIDTH`, never inside an instant."""
    glued = _INSTANT.sub(lambda m: m.group(0).replace(" ", "\0"), line)
    return textwrap.fill(glued, TABLE_WIDTH, subsequent_indent="  ").replace("\0", " ")


def neutralise(text: str) -> str:
    """A text cell made safe for spreadsheets: a leading ``=+-@``, tab or CR gets a ``'``."""
    return "'" + text if text.startswith(FORMULA_START) else text


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
