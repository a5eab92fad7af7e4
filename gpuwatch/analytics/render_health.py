"""``gpuwatch health`` entries as JSON records, a text table or CSV (contract section 7)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pandas as pd

from gpuwatch.analytics.health import HEALTH_ENTRY_KEYS
from gpuwatch.analytics.render import neutralise
from gpuwatch.domain.durations import from_epoch_s, rfc3339
from gpuwatch.domain.health import STATES

#: The table's columns: key, title, widest cell (longer cells are cut with "…"); with two
#: spaces between columns the table is at most 120 characters wide.
_TABLE: tuple[tuple[str, str, int], ...] = (
    ("node", "NODE", 14),
    ("gpu_uuid", "GPU", 12),
    ("gpu_model", "MODEL", 14),
    ("state", "STATE", 9),
    ("reasons", "REASONS", 18),
    ("first_seen", "SINCE (UTC)", 11),
    ("state_hours", "HOURS", 6),
    ("allocated_cost_while_failing_usd", "FAILING $", 9),
    ("pods", "PODS", 11),
)
_NUMBERS = frozenset({"state_hours", "allocated_cost_while_failing_usd"})
TABLE_WIDTH = sum(w for _, _, w in _TABLE) + 2 * (len(_TABLE) - 1)
#: How a list reads in a CSV cell.
LIST_SEPARATOR = ";"


def _text(value: Any) -> str:
    return "" if value is None or value is pd.NA else str(value)


def to_json_records(entries: pd.DataFrame) -> list[dict[str, Any]]:
    """One dict per GPU, keys in contract order: instants in RFC 3339, hours and dollars to
    2 decimals, ``reasons`` and ``pods`` as lists."""
    records = []
    for row in entries[list(HEALTH_ENTRY_KEYS)].to_dict("records"):
        record: dict[str, Any] = {key: _text(row[key]) for key in HEALTH_ENTRY_KEYS[:5]}
        record["reasons"] = [str(r) for r in row["reasons"]]
        record["first_seen"] = rfc3339(int(row["first_seen"]))
        record["last_seen"] = rfc3339(int(row["last_seen"]))
        record["state_hours"] = round(float(row["state_hours"]), 2)
        cost = float(row["allocated_cost_while_failing_usd"])
        record["allocated_cost_while_failing_usd"] = round(cost, 2)
        record["pods"] = [str(p) for p in row["pods"]]
        records.append(record)
    return records


def render_json(entries: pd.DataFrame) -> str:
    """The JSON array of ``gpuwatch health --format json``."""
    return json.dumps(to_json_records(entries), indent=2, ensure_ascii=False) + "\n"


def render_csv(entries: pd.DataFrame) -> str:
    """CSV with the contract's keys as header; lists joined by ``;``; text cells neutralised
    against spreadsheet formula injection."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(HEALTH_ENTRY_KEYS)
    for record in to_json_records(entries):
        cells = []
        for key in HEALTH_ENTRY_KEYS:
            value = record[key]
            if isinstance(value, list):
                cells.append(neutralise(LIST_SEPARATOR.join(value)))
            elif isinstance(value, float):
                cells.append(f"{value:.2f}")
            else:
                cells.append(neutralise(str(value)))
        writer.writerow(cells)
    return buffer.getvalue()


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _table_cell(key: str, value: Any) -> str:
    if key in ("reasons", "pods"):
        return ",".join(str(v) for v in value)
    if key == "first_seen":
        return from_epoch_s(int(value)).strftime("%m-%d %H:%M")
    if key == "gpu_model":
        return _text(value).removeprefix("NVIDIA ")
    if key in ("state_hours", "allocated_cost_while_failing_usd"):
        return f"{float(value):,.2f}"
    return _text(value)


def _footer(entries: pd.DataFrame, span: tuple[int, int]) -> list[str]:
    counts = entries["state"].value_counts()
    states = ", ".join(f"{int(counts[s])} {s}" for s in STATES if s in counts.index)
    cost = float(entries["allocated_cost_while_failing_usd"].sum())
    window = f"{rfc3339(span[0])} to {rfc3339(span[1])}"
    return [
        f"{len(entries)} GPUs not healthy ({states}), {window}",
        f"${cost:,.2f} paid for allocated GPU-hours on failing GPUs",
    ]


def render_table(entries: pd.DataFrame, span: tuple[int, int]) -> str:
    """A plain-text table for a terminal (at most :data:`TABLE_WIDTH` characters wide), worst
    state first; ``span`` is the window, stated in the footer."""
    if entries.empty:
        return f"No GPU was unhealthy from {rfc3339(span[0])} to {rfc3339(span[1])}.\n"
    rows = [[title for _, title, _ in _TABLE]]
    rows += [[_table_cell(k, r[k]) for k, _, _ in _TABLE] for r in entries.to_dict("records")]
    lines = []
    for cells in rows:
        fitted = [
            _cut(cell, w).rjust(w) if k in _NUMBERS else _cut(cell, w).ljust(w)
            for cell, (k, _, w) in zip(cells, _TABLE, strict=True)
        ]
        lines.append("  ".join(fitted).rstrip())
    lines.extend(["", *_footer(entries, span)])
    return "\n".join(lines) + "\n"
