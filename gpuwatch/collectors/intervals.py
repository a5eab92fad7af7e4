"""Error counts and link bandwidth, read once per coarse interval instead of every step (pure).

Reading them every step cost Prometheus more than every other field together (a counter's
increase with reset handling is several vector operations per instant), for numbers that are 0
nearly always or change slowly. They are read on a coarse grid instead: ``C`` =
:meth:`~gpuwatch.collectors.promql.Catalogue.capacity_step_s` (900 s at a 60 s step).

The coarse grid's instants are the *block ends* ``T = k·C - step``: the last step instant of
each block of ``C / step`` instants starting at a multiple of ``C``. A row at instant ``t``
covers ``(t - step, t]``, so the interval ``(T - C, T]`` covers exactly the rows of its block;
where ``C`` divides an hour (it does at the default step), an interval never straddles two
hours, and an hour's sum of counts is the same as if every step had been read.

- **Counts** (``coarse="count"``): a page ``[S, E)`` reads the increase over each interval of
  the partition of its time ``(S - step, E - step]`` cut at block ends: whole blocks, and at
  most one shorter interval at each end of the page where it does not start or end on a block
  boundary. Pages partition the collected time, so an event is counted once, by the page whose
  time holds it, and a re-collection of the same window reads the same intervals.
- **Rates** (``coarse="mean"``): the average over a whole block, read by the page holding its
  block end ``T``; a page's time that ends inside a block reads it with the next page.

Each reading is stored on one row of its GPU unit (:func:`place`): the unit's latest row in the
interval (the row at ``T`` when the unit has one). A count whose interval holds no row of its
unit (its other series were missing meanwhile) goes on the unit's first row within the
following ``C`` in the page; a rate is then not stored.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gpuwatch.collectors.bounds import bounded
from gpuwatch.collectors.promjson import Matrix

Points = tuple[np.ndarray, np.ndarray, np.ndarray]

#: ``FieldQuery.coarse`` values.
COUNT = "count"
MEAN = "mean"


def block_end(ts: int, step_s: int, coarse_s: int) -> int:
    """The first block end at or after ``ts`` (``k·C - step``).

    >>> [block_end(t, 60, 900) for t in (0, 840, 841, 900)]
    [840, 840, 1740, 1740]
    """
    return -(-(ts + step_s) // coarse_s) * coarse_s - step_s


def count_plan(
    first_ts: int, last_ts: int, step_s: int, coarse_s: int
) -> tuple[tuple[int, int] | None, list[tuple[int, int]]]:
    """The intervals of a page whose instants are ``first_ts..last_ts``: the first and last
    whole-block end (None: no whole block), and the shorter intervals as (end, length in s).

    >>> count_plan(0, 1740, 60, 900)  # from a block boundary to a block end
    ((840, 1740), [])
    >>> count_plan(300, 1980, 60, 900)  # (240, 840], (840, 1740], (1740, 1980]
    ((1740, 1740), [(840, 600), (1980, 240)])
    >>> count_plan(300, 600, 60, 900)  # no block end inside: one interval, (240, 600]
    (None, [(600, 360)])
    """
    begin = first_ts - step_s
    first = block_end(first_ts, step_s, coarse_s)
    if first > last_ts:
        return None, [(last_ts, last_ts - begin)]
    last = block_end(last_ts + 1, step_s, coarse_s) - coarse_s
    partial = []
    if first - begin < coarse_s:
        partial.append((first, first - begin))
        first += coarse_s
    if last < last_ts:
        partial.append((last_ts, last_ts - last))
    return ((first, last) if first <= last else None), partial


def mean_plan(first_ts: int, last_ts: int, step_s: int, coarse_s: int) -> tuple[int, int] | None:
    """The first and last block end among the page's instants (None: none).

    >>> mean_plan(300, 1980, 60, 900), mean_plan(300, 600, 60, 900)
    ((840, 1740), None)
    """
    first = block_end(first_ts, step_s, coarse_s)
    last = block_end(last_ts + 1, step_s, coarse_s) - coarse_s
    return (first, last) if first <= last else None


def place(
    rows: tuple[np.ndarray, np.ndarray],
    readings: tuple[np.ndarray, np.ndarray, np.ndarray],
    step_s: int,
    coarse_s: int,
    carry: bool,
) -> np.ndarray:
    """Per row (``rows``: unit and instant, sorted by unit then instant), the readings
    (``readings``: unit, interval end, value) placed on it, added together (NaN: none).

    A reading goes on its unit's latest row in its interval (``(previous block end, end]``;
    the page holds no row before its own time), else with ``carry`` on the unit's first row in
    ``(end, end + C]``, else nowhere.
    """
    unit, ts = rows
    r_unit, r_end, values = readings
    out = np.full(len(ts), np.nan)
    if not len(ts) or not len(values):
        return out
    keys = unit.astype(np.int64) * (1 << 33) + ts.astype(np.int64)
    wanted = r_unit.astype(np.int64) * (1 << 33) + r_end.astype(np.int64)
    start = -(-(r_end + step_s) // coarse_s) * coarse_s - coarse_s - step_s
    at = np.searchsorted(keys, wanted, side="right") - 1
    found = at >= 0
    found[found] = (unit[at[found]] == r_unit[found]) & (ts[at[found]] > start[found])
    if carry:
        after = np.searchsorted(keys, wanted, side="right")
        ok = ~found & (after < len(ts))
        ok[ok] = (unit[after[ok]] == r_unit[ok]) & (ts[after[ok]] <= r_end[ok] + coarse_s)
        at = np.where(found, at, after)
        found |= ok
    total = np.zeros(len(ts))
    np.add.at(total, at[found], values[found])
    placed = np.zeros(len(ts), dtype=bool)
    placed[at[found]] = True
    out[placed] = total[placed]
    return out


def readings(
    unit: np.ndarray, ts: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A field's points as (unit, interval end, value), one per unit and end: the largest of
    the unit's series (points of no unit, ``unit < 0``, and NaN values left out)."""
    keep = (unit >= 0) & ~np.isnan(values)
    keys = unit[keep].astype(np.int64) * (1 << 33) + np.rint(ts[keep]).astype(np.int64)
    order = np.lexsort((values[keep], keys))  # by key, the largest value last
    keys, best = keys[order], values[keep][order]
    last = np.ones(len(keys), dtype=bool)
    last[:-1] = keys[1:] != keys[:-1]
    return keys[last] >> 33, keys[last] & ((1 << 33) - 1), best[last]


def field_readings(
    results: Mapping[str, Matrix], offsets: Mapping[str, int], unit_of_series: np.ndarray
) -> dict[str, Points]:
    """Per coarse-interval field, its :func:`readings` (``offsets``: each field's first series
    in ``unit_of_series``, the GPU unit of every series of the page, -1 where not read)."""
    out = {}
    for name, matrix in results.items():
        unit = unit_of_series[offsets[name] : offsets[name] + len(matrix.labels)]
        values = bounded(name, matrix.values)
        out[name] = readings(unit[matrix.series_of_points], matrix.ts, values)
    return out
