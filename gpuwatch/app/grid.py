"""The dashboard's data tables: AG Grid (``dash-ag-grid``), the same way on every page.

Every table sorts and filters by column (the row of inputs under the headings), keeps its name
column pinned on the left while the rest scrolls inside the card, shows a totals row over the
rows that pass its filters (hours and dollars summed; ratios left blank, a sum of percentages
means nothing), and exports what it shows as CSV: the rows that pass its filters, in its sort
order, with a first line naming the page, the window and the filters. The file name carries
the window and filters too.

Numbers follow one format (:mod:`gpuwatch.app.format` for cards): dollars with two decimals in
tables and their CSV, other figures with the digits their column states, never scientific
notation. Values are rounded here, on the server, so the grid, its totals and the CSV hold
the same figures. Links are real links (``dcc.Link``), drawn by the ``GwLink`` cell renderer
of ``assets/gpuwatch-grid.js``; totals and the export button are client-side callbacks in the
same file, so filtering a large table never sends its rows back to the server.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import dash
from dash import ClientsideFunction, Input, Output, State, dcc, html
from dash_ag_grid import AgGrid

from gpuwatch.analytics.render import FORMULA_START, instant_text
from gpuwatch.app import format as fmt
from gpuwatch.app import grid_widths
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.views import window_bounds

Kind = Literal["text", "money", "number", "time"]
#: Rows per page of a table.
PAGE_SIZE = 25
#: The CSV export button of grid ``grid_id`` has the id ``f"{grid_id}{EXPORT_SUFFIX}"``.
EXPORT_SUFFIX = "-export"
#: The id suffix of a plain table's filter box.
FILTER_SUFFIX = "-filter"
#: Row field holding the link of a row's name cell (see :func:`text_column`).
HREF = "href"
_FILE_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Column:
    """One column: its row key, heading, kind, digits, and whether the totals row sums it."""

    key: str
    title: str
    kind: Kind = "text"
    digits: int = 2
    total: bool = False
    #: Row field holding this cell's link (the cell is then a ``dcc.Link``).
    link: str | None = None
    pinned: bool = False
    #: Free text that wraps (evidence), rather than one line cut with an ellipsis.
    wrap: bool = False

    def definition(self) -> dict[str, Any]:
        """The AG Grid column definition."""
        spec: dict[str, Any] = {"field": self.key, "headerName": self.title}
        if self.kind in ("text", "time"):
            spec |= {"filter": "agTextColumnFilter"}
        else:
            spec |= {
                "filter": "agNumberColumnFilter",
                "type": "rightAligned",
                "valueFormatter": {"function": number_format(self.kind, self.digits)},
                "useValueFormatterForExport": False,
                "context": {"total": self.total},
            }
        if self.link:
            spec |= {"cellRenderer": "GwLink", "cellRendererParams": {"hrefField": self.link}}
        if self.pinned:
            spec |= {"pinned": "left", "lockPinned": True}
        if self.wrap:
            spec |= {"wrapText": True, "autoHeight": True, "minWidth": 360, "flex": 2}
        return spec


def number_format(kind: Kind, digits: int) -> str:
    """The cell formatter (a dash-ag-grid function string): grouped, fixed point, blank for none."""
    spec = f"$,.{digits}f" if kind == "money" else f",.{digits}f"
    return f"params.value == null ? '' : d3.format('{spec}')(params.value)"


def text_column(
    key: str, title: str | None = None, *, link: str | None = None, pinned: bool = False
) -> Column:
    return Column(key, title or fmt.HEADINGS.get(key, key), link=link, pinned=pinned)


def time_column(key: str, title: str | None = None) -> Column:
    """An instant (epoch seconds), shown and exported as ``2026-11-16 10:00 UTC``: sorts in time."""
    return Column(key, title or fmt.HEADINGS.get(key, key), "time")


def wrapped_column(key: str, title: str | None = None) -> Column:
    return Column(key, title or fmt.HEADINGS.get(key, key), wrap=True)


def money_column(key: str, title: str | None = None, *, total: bool = True) -> Column:
    return Column(key, title or fmt.HEADINGS.get(key, key), "money", 2, total)


def number_column(
    key: str, title: str | None = None, digits: int = 1, *, total: bool = False
) -> Column:
    return Column(key, title or fmt.HEADINGS.get(key, key), "number", digits, total)


def cell_number(value: Any, digits: int) -> float | None:
    """A table number: rounded to its column's digits; ``None`` for missing or not finite."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number):
        return None
    return round(number, digits) + 0.0  # + 0.0: no "-0.00"


def rows_for(
    records: Iterable[Mapping[str, Any]], columns: Sequence[Column]
) -> list[dict[str, Any]]:
    """Grid rows: numbers rounded to their column's digits, text as text, other keys kept."""
    out: list[dict[str, Any]] = []
    for record in records:
        row = dict(record)
        for column in columns:
            value = record.get(column.key)
            if column.kind == "text":
                row[column.key] = "" if value is None or _missing(value) else str(value)
            elif column.kind == "time":
                row[column.key] = "" if cell_number(value, 0) is None else fmt.when(value)
            else:
                row[column.key] = cell_number(value, column.digits)
        out.append(row)
    return out


def _missing(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def export_file_name(table: str, window: str, filters: Mapping[str, str]) -> str:
    """``gpuwatch-<table>-<window>[-<name>-<value>…].csv``, safe on every file system."""
    parts = ["gpuwatch", table, window]
    for name, value in filters.items():
        parts += [name, value]
    stem = "-".join(_FILE_UNSAFE.sub("_", part).strip("_") or "_" for part in parts)
    return f"{stem}.csv"


def export_comment(title: str, window_text: str, filters: Mapping[str, str]) -> str:
    """The CSV's first line: what the table is, over which window, narrowed by what."""
    narrowed = "; ".join(f"{name}={value}" for name, value in filters.items()) or "none"
    line = f"# gpuwatch {title}; window {window_text}; filters: {narrowed}"
    return line.replace("\r", " ").replace("\n", " ")


#: The export's cell hook (a dash-ag-grid function string; ``gwNeutralise`` is in
#: ``assets/gpuwatch-grid.js``): a text cell starting like a formula gets a ``'``, as
#: :func:`gpuwatch.analytics.render.neutralise` does for the command line's CSVs.
NEUTRALISE = f"gwNeutralise(params.value, {json.dumps(list(FORMULA_START))})"


@dataclass(frozen=True)
class Export:
    """What a table's CSV says about itself: name, title, window and filters."""

    table: str
    title: str
    window: str
    window_text: str
    filters: Mapping[str, str]

    def params(self) -> dict[str, Any]:
        """AG Grid's ``csvExportParams``: the file name and the comment line; no totals row."""
        return {
            "fileName": export_file_name(self.table, self.window, self.filters),
            "prependContent": export_comment(self.title, self.window_text, self.filters),
            "skipPinnedBottom": True,
            "processCellCallback": {"function": NEUTRALISE},
        }


def page_export(
    table: str, title: str, snap: Snapshot, f: Filters, subject: Mapping[str, str] | None = None
) -> Export:
    """The export facts of a table on a page under the filters ``f``; ``subject`` names what a
    detail page is about (a workload's kind and name, a node, a GPU)."""
    start_ts, end_ts = window_bounds(snap, f)
    span = f"{f.window} ({instant_text(start_ts)} to {instant_text(end_ts)})"
    narrowed = {k: v for k, v in f.query().items() if k != "window"} | dict(subject or {})
    return Export(table, title, f.window, span, narrowed)


def grid(
    grid_id: str,
    columns: Sequence[Column],
    rows: list[dict[str, Any]],
    export: Export,
    *,
    cell_classes: Mapping[str, Mapping[str, str]] | None = None,
    page_size: int = PAGE_SIZE,
) -> html.Div:
    """A table with its export button. ``cell_classes``: column → {class: condition}.

    Each column is as wide as its widest text (:mod:`gpuwatch.app.grid_widths`, estimated
    here: the browser measures nothing)."""
    definitions = [column.definition() for column in columns]
    sized = grid_widths.widths(columns, rows)
    for spec in definitions:
        if spec["field"] in sized:
            spec["width"] = sized[spec["field"]]
        rules = (cell_classes or {}).get(spec["field"])
        if rules:
            spec["cellClassRules"] = {name: {"function": rule} for name, rule in rules.items()}
    table = AgGrid(
        id=grid_id,
        columnDefs=definitions,
        rowData=rows,
        defaultColDef={
            "sortable": True,
            "resizable": True,
            "floatingFilter": True,
            "minWidth": 90,
            "suppressHeaderMenuButton": True,
        },
        dashGridOptions={
            "domLayout": "autoHeight",
            "pagination": len(rows) > page_size,
            "paginationPageSize": page_size,
            "paginationPageSizeSelector": False,
            "enableCellTextSelection": True,
            "ensureDomOrder": True,
            "suppressColumnVirtualisation": True,
            "tooltipShowDelay": 300,
        },
        csvExportParams=export.params(),
        className="gw-datagrid",
        style={"width": "100%"},
    )
    return _with_export(grid_id, table, "The rows that pass the table's filters, in its order")


def _with_export(table_id: str, table: Any, what: str, *tools: Any, **data: Any) -> html.Div:
    """``table`` under its **Export CSV** button (id ``<table_id>-export``; ``what``: what the
    file holds; ``tools``: more controls beside it; ``data``: ``data-*`` attributes the
    browser side reads)."""
    button = html.Button(
        "Export CSV",
        id=f"{table_id}{EXPORT_SUFFIX}",
        className="gw-button gw-button-secondary",
        title=f"{what}, as CSV",
        **data,
    )
    return html.Div(
        [html.Div([*tools, button], className="gw-grid-actions"), table],
        className="gw-table-box",
    )


def register(*grid_ids: str) -> None:
    """The client-side callbacks of each grid: the totals row and the export button."""
    for grid_id in grid_ids:
        dash.clientside_callback(
            ClientsideFunction("gpuwatch", "totals"),
            Output(grid_id, "dashGridOptions"),
            Input(grid_id, "virtualRowData"),
            State(grid_id, "columnDefs"),
            State(grid_id, "dashGridOptions"),
            prevent_initial_call=True,
        )
        dash.clientside_callback(
            ClientsideFunction("gpuwatch", "exportCsv"),
            Output(grid_id, "exportDataAsCsv"),
            Input(f"{grid_id}{EXPORT_SUFFIX}", "n_clicks"),
            prevent_initial_call=True,
        )


def exportable(table: Any, export: Export) -> Any:
    """A plain table (:func:`gpuwatch.app.components.html_table`: cells with several links or
    folded text) with a filter box (rows showing the typed text, any case) and the same
    **Export CSV** button as the grids: the rows shown, in their order, with the headings,
    under the same comment line and file name (:func:`register_tables`). Anything else (the
    note shown instead of an empty table) is returned as it is."""
    if not isinstance(table, html.Table):
        return table
    table_id = str(getattr(table, "id", ""))
    data: dict[str, Any] = {
        "data-table": table_id,
        "data-file": export_file_name(export.table, export.window, export.filters),
        "data-comment": export_comment(export.title, export.window_text, export.filters),
        "data-starts": json.dumps(list(FORMULA_START)),
    }
    search = html.Label(
        [
            "Filter",
            dcc.Input(
                id=f"{table_id}{FILTER_SUFFIX}",
                type="text",
                className="gw-table-filter",
                placeholder="rows showing…",
                debounce=False,
            ),
        ],
        className="gw-table-filter-label",
    )
    return _with_export(table_id, table, "The rows shown, in their order", search, **data)


def register_tables(*table_ids: str) -> None:
    """The export button of each plain table (``exportTable`` in ``assets/gpuwatch-grid.js``
    writes the file in the browser; the callback changes nothing on the page)."""
    for table_id in table_ids:
        button = f"{table_id}{EXPORT_SUFFIX}"
        dash.clientside_callback(
            ClientsideFunction("gpuwatch", "exportTable"),
            Output(button, "title"),
            Input(button, "n_clicks"),
            State(button, "id"),
            prevent_initial_call=True,
        )
