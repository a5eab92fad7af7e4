"""The filter bar's range form: any hour-aligned UTC window, from and to, into the URL.

The form writes ``window=FROM..TO`` (:mod:`gpuwatch.app.windows`) into the query string,
keeping the other filters; text that is no window is refused with the reason, and the URL
stays as it was.
"""

from __future__ import annotations

import re
from typing import Any

import dash
from dash import Input, Output, State, dcc, html

from gpuwatch.app.data import Filters
from gpuwatch.app.urls import PAGE_URL_ID, URL_ID, search_with
from gpuwatch.app.windows import PRESETS, WindowError, range_bounds

FROM_ID, TO_ID, APPLY_ID, ERROR_ID = (
    "gw-range-from",
    "gw-range-to",
    "gw-range-apply",
    "gw-range-error",
)
HINT = "YYYY-MM-DD [HH:00]"
_HOUR = re.compile(r"(\d{4}-\d{2}-\d{2})[T ](\d{2})(?::(\d{2}))?")


def point(text: str | None, name: str) -> str:
    """One end of the range as typed (``2026-11-02``, ``2026-11-02 06:00``, ``2026-11-02T06``)
    as the URL writes it; :class:`WindowError` naming the field if it is none."""
    value = (text or "").strip()
    if not value:
        raise WindowError(f"{name}: enter a date ({HINT}, UTC)")
    found = _HOUR.fullmatch(value)
    if found is None:
        return value
    if found[3] not in (None, "00"):
        raise WindowError(f"{name}: windows are whole hours (write {found[2]}:00)")
    return f"{found[1]}T{found[2]}"


def range_window(start: str | None, end: str | None) -> str:
    """The window ``FROM..TO`` of the form's two fields; :class:`WindowError` says why not."""
    text = f"{point(start, 'From')}..{point(end, 'To')}"
    range_bounds(text)
    return text


def range_search(
    _clicks: int | None, _submits_from: int | None, _submits_to: int | None,
    start: str | None, end: str | None, search: str | None,
) -> tuple[Any, Any]:  # fmt: skip
    """The form's callback: the URL's new query string and no message, or no change and why
    (nothing while neither Apply nor Enter was pressed: a page drawing the form anew)."""
    if not (_clicks or _submits_from or _submits_to):
        return dash.no_update, dash.no_update
    try:
        window = range_window(start, end)
    except WindowError as error:
        return dash.no_update, str(error)
    new = search_with(search, {"window": window})
    return (dash.no_update if new == (search or "") else new), ""


def _field(label: str, field_id: str, value: str | None) -> html.Label:
    box = dcc.Input(
        id=field_id, type="text", value=value, placeholder=HINT, debounce=False,
        className="gw-range-input",
    )  # fmt: skip
    return html.Label([label, box], className="gw-range-field")


def range_form(f: Filters) -> html.Fieldset:
    """From and To (filled in when the window is a range) with Apply; Enter applies too."""
    start = end = None
    if f.window not in PRESETS and ".." in f.window:
        start, end = f.window.split("..", 1)
    return html.Fieldset(
        [
            html.Legend("Or any range (UTC)"),
            _field("From", FROM_ID, start),
            _field("To", TO_ID, end),
            html.Button("Apply", id=APPLY_ID, n_clicks=0, className="gw-button gw-range-apply"),
            html.P(id=ERROR_ID, className="gw-range-error", role="alert"),
        ],
        className="gw-filter gw-filter-range",
    )


dash.callback(
    Output(PAGE_URL_ID, "search", allow_duplicate=True),
    Output(ERROR_ID, "children"),
    Input(APPLY_ID, "n_clicks"),
    Input(FROM_ID, "n_submit"),
    Input(TO_ID, "n_submit"),
    State(FROM_ID, "value"),
    State(TO_ID, "value"),
    State(URL_ID, "search"),
    prevent_initial_call=True,
)(range_search)
