"""Rolling up a page appended to hours that already hold samples (docs/storage.md#roll-ups).

An hour's roll-up rows are sums, extremes and histograms of its samples, so the rows of two
disjoint sets of samples merge into the rows of their union: sums add, extremes take the
extreme (NULL only where both are NULL), histograms add bin by bin. Where no sample of the
page's cluster lies at or after the page's first instant in an hour (:func:`appended_hours`),
the page's samples of that hour are disjoint from the stored ones, and merging the page's rows
into the stored rows gives what rolling up the whole hour from the table gives, reading only the
page: a steady one-minute collection reads one minute, not the hour so far.

Where merging could differ from rolling up the hour again, the caller rolls up from the table
instead: the health rows of a GPU unit one of whose (unit, pod) stored samples of the hour have
no health reading gains one (:func:`gained_health`: its health row would count only the page),
and the whole hour where a pod's GPU count was raised by the page (its stored detail used the
old count).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
from sqlalchemy import Connection, text

from gpuwatch.domain.durations import HOUR_S

#: How a column of two rows of the same key combines: ``sum`` (NULL as 0), ``sum_or_null``
#: (NULL where both are), ``capped`` (``sum_or_null``, at most :data:`INT32_MAX`), ``max``,
#: ``min`` (both ignore NULL).
RULES = ("sum", "sum_or_null", "capped", "max", "min")
INT32_MAX = 2**31 - 1
#: The key of the hourly and health roll-up rows.
KEYS = ("hour_ts", "gpu_id", "pod_id")

_PROBE_SQL = (
    "SELECT 1 FROM gpu_samples s JOIN gpus g ON g.id = s.gpu_id "
    "WHERE s.ts >= :lo AND s.ts < :hi AND g.cluster_id = :cluster LIMIT 1"
)


def appended_hours(
    conn: Connection, cluster_id: int, first_ts: int, last_ts: int, fresh: Iterable[int]
) -> set[int]:
    """The hours from ``first_ts``'s to ``last_ts``'s, other than ``fresh``, in which the
    cluster has no stored sample at or after ``first_ts`` (one indexed probe per hour): a page
    starting at ``first_ts`` only appends to them. Call before writing the page."""
    skip = set(fresh)
    out = set()
    for hour in range(first_ts - first_ts % HOUR_S, int(last_ts) + 1, HOUR_S):
        if hour in skip:
            continue
        params = {"lo": max(hour, int(first_ts)), "hi": hour + HOUR_S, "cluster": cluster_id}
        if conn.execute(text(_PROBE_SQL), params).first() is None:
            out.add(hour)
    return out


def group_starts(*keys: np.ndarray) -> np.ndarray:
    """The first position of each run of equal keys in rows sorted by ``keys``."""
    changed = np.zeros(len(keys[0]), dtype=bool)
    if len(changed):
        changed[0] = True
    for key in keys:
        changed[1:] |= key[1:] != key[:-1]
    return np.flatnonzero(changed)


def _combine(rule: str, values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    if rule == "max":
        return np.fmax.reduceat(values, starts)
    if rule == "min":
        return np.fmin.reduceat(values, starts)
    total = np.add.reduceat(np.nan_to_num(values), starts)
    if rule == "sum":
        return total
    read = np.add.reduceat((~np.isnan(values)).astype(np.int64), starts)
    out = np.where(read > 0, total, np.nan)
    return np.minimum(out, INT32_MAX) if rule == "capped" else out


def merge_columns(
    old: Mapping[str, np.ndarray],
    new: Mapping[str, np.ndarray],
    keys: tuple[str, ...],
    rules: Mapping[str, str],
) -> dict[str, np.ndarray]:
    """Rows of ``old`` and ``new`` (column by column, each key at most once per side) merged
    per key by ``rules``; float64 columns (NaN for NULL), sorted by ``keys`` (pure)."""
    columns = {
        name: np.concatenate(
            [np.asarray(old[name], dtype=np.float64), np.asarray(new[name], dtype=np.float64)]
        )
        for name in (*keys, *rules)
    }
    if not len(columns[keys[0]]):
        return columns
    order = np.lexsort(tuple(columns[k] for k in reversed(keys)))
    ordered = {name: column[order] for name, column in columns.items()}
    starts = group_starts(*(ordered[k] for k in keys))
    out = {k: ordered[k][starts] for k in keys}
    for name, rule in rules.items():
        out[name] = _combine(rule, ordered[name], starts)
    return out


def read_columns(
    conn: Connection, table: str, names: tuple[str, ...], hours: Iterable[int]
) -> dict[str, np.ndarray]:
    """Every stored row of ``table`` in ``hours`` (all GPU units), column by column, as float64
    (NULL as NaN)."""
    listed = ", ".join(str(int(h)) for h in sorted(set(hours)))
    sql = f"SELECT {', '.join(names)} FROM {table} WHERE hour_ts IN ({listed})"  # noqa: S608
    rows = conn.exec_driver_sql(sql).fetchall()
    matrix = np.array(rows, dtype=np.float64).reshape(-1, len(names))
    return {name: matrix[:, i] for i, name in enumerate(names)}


def rows_where(columns: Mapping[str, np.ndarray], keep: np.ndarray) -> dict[str, np.ndarray]:
    return {name: column[keep] for name, column in columns.items()}


def gained_health(
    hourly: Mapping[str, np.ndarray],
    health: Mapping[str, np.ndarray],
    new_health: Mapping[str, np.ndarray],
) -> np.ndarray:
    """The GPU units with a (hour, unit, pod) of the page's health rows that has stored hourly
    rows but no stored health row: its stored samples had no health reading, and a health row
    of the whole hour counts them too, so merging would miss them. Their health rows are
    rolled up from the table instead."""

    def key_set(columns: Mapping[str, np.ndarray]) -> set[tuple[int, ...]]:
        stacked = np.column_stack([np.asarray(columns[k], np.float64) for k in KEYS])
        return set(map(tuple, stacked.astype(np.int64).tolist()))

    gained = (key_set(new_health) - key_set(health)) & key_set(hourly)
    return np.array(sorted({gpu for _, gpu, _ in gained}), dtype=np.int64)
