"""The widths of a table's columns, estimated on the server from the text its cells show.

AG Grid can size each column to its content in the browser (``columnSize="autoSize"``): it
draws every rendered cell again off screen and measures it, one forced layout after another.
That took 0.46 s of the browser's main thread on the GPUs & nodes page at 2,000 GPUs, for two
tables (docs/performance.md). The server knows every cell's text already: it rounds the numbers
and formats the instants (:func:`gpuwatch.app.grid.rows_for`). So each column gets the width
of its widest text, the heading's or a cell's, the totals row's included, from a table of
character widths a little wider than the page's fonts draw. A column is never narrower than
its text, and the browser measures nothing.

Pure: columns and rows in, pixels out.
"""

from __future__ import annotations

import math
import string
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gpuwatch.app import format as fmt

if TYPE_CHECKING:  # grid.py imports this module
    from gpuwatch.app.grid import Column

#: Advance widths (px) of the tables' 13-14 px sans-serif text, by character, erring wide:
#: narrow letters and punctuation, wide letters, capitals and digits; anything else is
#: :data:`OTHER_PX`.
NARROW_PX = 4.0
WIDE_PX = 11.5
CAPITAL_PX = 9.0
OTHER_PX = 7.2
NARROW = frozenset("ijlI.,:;'|!()[]{} ·")
WIDE = frozenset("mwMW@%—−…")
#: What AG Grid adds around a cell's text (its padding both sides and room to spare), and
#: around a heading's (the sort arrow besides).
CELL_PADDING_PX = 58
HEADING_PADDING_PX = 62
#: Headings are bold: their letters are this much wider.
HEADING_SCALE = 1.1
#: No column is narrower (AG Grid's ``minWidth`` of every column) or wider than these.
MIN_WIDTH_PX = 90
MAX_WIDTH_PX = 1200


def char_px(char: str) -> float:
    """The width one character is given."""
    if char in NARROW:
        return NARROW_PX
    if char in WIDE:
        return WIDE_PX
    if char.isupper() or char.isdigit() or char in "$#&_":
        return CAPITAL_PX
    return OTHER_PX


#: ASCII characters by the class :func:`char_px` gives them, as markers no ASCII text holds.
_NARROW_MARK, _WIDE_MARK, _CAPITAL_MARK = "\x01", "\x02", "\x03"
_MARKS = {
    **{ord(ch): _CAPITAL_MARK for ch in string.ascii_uppercase + string.digits + "$#&_"},
    **{ord(ch): _WIDE_MARK for ch in WIDE if ch.isascii()},
    **{ord(ch): _NARROW_MARK for ch in NARROW if ch.isascii()},
}


def text_px(text: str) -> float:
    """The width ``text`` is given: the sum of its characters' (:func:`char_px`)."""
    if not (text.isascii() and text.isprintable()):  # no marker in it: counting is exact
        return sum(char_px(char) for char in text)
    marked = text.translate(_MARKS)  # counted in C: a table has thousands of cells
    narrow, wide = marked.count(_NARROW_MARK), marked.count(_WIDE_MARK)
    capital = marked.count(_CAPITAL_MARK)
    other = len(text) - narrow - wide - capital
    return narrow * NARROW_PX + wide * WIDE_PX + capital * CAPITAL_PX + other * OTHER_PX


def shown(column: Column, value: Any) -> str:
    """The text the grid shows for a cell of ``rows_for``: numbers grouped with their column's
    digits (money with ``$``, as the cell formatter of :func:`gpuwatch.app.grid.number_format`
    writes them), anything else as it is."""
    if value is None or value == "":
        return ""
    if column.kind in ("money", "number") and isinstance(value, int | float):
        text = fmt.number(abs(value), column.digits)
        sign = "−" if value < 0 else ""
        return f"{sign}${text}" if column.kind == "money" else f"{sign}{text}"
    return str(value)


def _numbers(column: Column, rows: Sequence[Mapping[str, Any]]) -> list[float]:
    """The finite numbers of ``column`` in ``rows`` (blank cells left out)."""
    values = (row.get(column.key) for row in rows)
    return [float(v) for v in values if isinstance(v, int | float) and math.isfinite(v)]


def _candidates(column: Column, rows: Sequence[Mapping[str, Any]]) -> set[str]:
    """The texts of ``column`` that may be its widest: every distinct one, but of a number
    column only the largest and the smallest number's (the shown width of a number grows with
    its digits, and a minus sign adds to it), and its total over every row when the totals row
    sums it (the widest total: no filter)."""
    if column.kind not in ("money", "number"):
        return {shown(column, row.get(column.key)) for row in rows}
    numbers = _numbers(column, rows)
    total = [sum(numbers)] if column.total else []  # 0 over no numbers, as the row shows it
    picked = [min(numbers), max(numbers), *total] if numbers else total
    return {shown(column, v) for v in picked}


def column_width(column: Column, rows: Sequence[Mapping[str, Any]]) -> int:
    """Pixels for ``column`` to show its heading and each of its cells of ``rows`` whole."""
    widest = max((text_px(text) for text in _candidates(column, rows)), default=0.0)
    heading = text_px(column.title) * HEADING_SCALE + HEADING_PADDING_PX
    width = max(heading, widest + CELL_PADDING_PX, MIN_WIDTH_PX)
    return int(min(math.ceil(width), MAX_WIDTH_PX))


def widths(columns: Sequence[Column], rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Each column's width by key; wrapped columns (free text) have none: they share the rest of
    the table's width (``flex``)."""
    return {column.key: column_width(column, rows) for column in columns if not column.wrap}
