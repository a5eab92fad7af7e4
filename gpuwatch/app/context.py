"""What every page layout starts from: the data source, its snapshot and the URL's filters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.server import DataSource, data_source


@dataclass(frozen=True)
class PageContext:
    source: DataSource
    snap: Snapshot
    filters: Filters


def page_context(query: Mapping[str, object]) -> PageContext:
    source = data_source()
    return PageContext(source, source.data.current(), Filters.from_query(query))


def query_value(query: Mapping[str, object], name: str) -> str | None:
    """One query parameter as text (the first if repeated), ``None`` if absent or empty."""
    value = query.get(name)
    if isinstance(value, list | tuple):
        value = value[0] if value else None
    if value is None:
        return None
    text = str(value).strip()
    return text or None
