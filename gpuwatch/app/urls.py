"""The page URL's query string: the filters' parameters and a page's own."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import parse_qsl, urlencode

from gpuwatch.app.data import DEFAULT_WINDOW, FILTER_NAMES

#: The id of the page's location (its ``search`` is the query string).
URL_ID = "gw-url"
#: The id of a second location inside each page (:func:`gpuwatch.app.components.shell`), which the
#: page's own controls (filter bar, switches, chart clicks) write to. Dash calls a callback whose
#: inputs were just inserted (a page drawn again) even with ``prevent_initial_call``, unless its
#: output was inserted with them: writing to :data:`URL_ID`, outside the page, every page drawn
#: would ask the server three more times for nothing.
PAGE_URL_ID = "gw-page-url"


def search_with(search: str | None, changes: Mapping[str, str | None]) -> str:
    """``search`` with the filter parameters replaced by ``changes`` (defaults dropped)."""
    params = [(k, v) for k, v in parse_qsl((search or "").lstrip("?")) if k not in changes]
    for name in FILTER_NAMES:
        value = changes.get(name)
        if value and not (name == "window" and value == DEFAULT_WINDOW):
            params.append((name, str(value)))
    return f"?{urlencode(params)}" if params else ""


def with_param(search: str | None, name: str, value: str | None) -> str:
    """``search`` with the page parameter ``name`` set to ``value`` (dropped for ``None``),
    the other parameters kept in their order."""
    params = [(k, v) for k, v in parse_qsl((search or "").lstrip("?")) if k != name]
    if value is not None:
        params.append((name, value))
    return f"?{urlencode(params)}" if params else ""
