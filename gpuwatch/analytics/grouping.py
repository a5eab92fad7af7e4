"""A fast group-by-sum for millions of sample rows.

Keys are turned into integer codes once (categorical codes are free), combined into one int64
group id, and every value column is summed with ``numpy.bincount``. Missing key values form
their own group, like ``groupby(dropna=False)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from gpuwatch.domain.allocation import joined


def _codes(column: pd.Series) -> tuple[np.ndarray, int]:
    """Codes 0..n-1 of a column's values (missing included as its own code), and n."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        raw = column.cat.codes.to_numpy().astype("int64")
        size = len(column.cat.categories)
    else:
        raw, uniques = pd.factorize(column, use_na_sentinel=True)
        raw = raw.astype("int64")
        size = len(uniques)
    return np.where(raw < 0, size, raw), size + 1


def group_ids(keys: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Group id of every row (0..G-1) and the first row of each group."""
    combined = np.zeros(len(keys), "int64")
    span = 1
    for name in keys.columns:
        codes, size = _codes(keys[name])
        if span * size >= 2**62:
            combined, uniques = pd.factorize(combined)
            span = len(uniques)
        combined = combined * size + codes
        span *= size
    ids, _ = pd.factorize(combined)
    # factorize numbers groups in order of first appearance: the running max steps there.
    first = np.flatnonzero(np.diff(np.maximum.accumulate(ids), prepend=-1) > 0)
    return ids.astype("int64"), first


def group_sum(
    keys: pd.DataFrame, values: Mapping[str, np.ndarray], sort: bool = True
) -> pd.DataFrame:
    """One row per distinct key combination: the keys, then each value column summed."""
    names: Sequence[str] = list(keys.columns)
    if len(keys) == 0:
        empty = keys.iloc[:0].reset_index(drop=True)
        for name in values:
            empty[name] = pd.Series(dtype="float64")
        return empty
    ids, first = group_ids(keys)
    out = keys.iloc[first].reset_index(drop=True)
    count = len(first)
    for name, column in values.items():
        out[name] = np.bincount(ids, weights=np.asarray(column, "float64"), minlength=count)
    if sort and names:
        out = out.sort_values(list(names), na_position="last", kind="stable")
    return out.reset_index(drop=True)


def pair_ids(a: np.ndarray, b: np.ndarray, b_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Group ids of the pairs ``(a[i], b[i])`` of two code arrays (``0 ≤ b < b_size``), and each
    group's first row."""
    ids, _ = pd.factorize(a.astype("int64") * b_size + b)
    first = np.flatnonzero(np.diff(np.maximum.accumulate(ids), prepend=-1) > 0)
    return ids.astype("int64"), first


def _labelled_codes(column: pd.Series) -> tuple[np.ndarray, list[Any]]:
    """Codes (−1 for missing) into sorted labels."""
    if (
        isinstance(column.dtype, pd.CategoricalDtype)
        and column.cat.categories.is_monotonic_increasing
    ):
        return column.cat.codes.to_numpy().astype("int64"), list(column.cat.categories)
    codes, labels = pd.factorize(column.astype(object), sort=True, use_na_sentinel=True)
    return codes.astype("int64"), list(labels)


def top_label(
    groups: np.ndarray, n_groups: int, column: pd.Series, weights: np.ndarray
) -> list[Any]:
    """Per group, the value of ``column`` with the largest total weight (ties: smallest value).

    Missing values never win; a group with none but missing values gets ``None``.
    """
    codes, labels = _labelled_codes(column)
    size = len(labels)
    result: list[Any] = [None] * n_groups
    if size == 0:
        return result
    present = codes >= 0
    key = groups[present] * size + codes[present]
    totals = np.bincount(key, weights[present], n_groups * size).reshape(n_groups, size)
    seen = np.bincount(key, minlength=n_groups * size).reshape(n_groups, size) > 0
    best = np.argmax(np.where(seen, totals, -np.inf), axis=1)
    for group in np.flatnonzero(seen.any(axis=1)):
        result[group] = labels[best[group]]
    return result


def joined_per_group(groups: np.ndarray, column: pd.Series, n_groups: int) -> list[str]:
    """Per group ``0..n_groups-1``: the distinct present values of ``column`` as text, sorted
    and ``+``-joined (:func:`~gpuwatch.domain.allocation.joined`; empty where it has none).
    Each distinct (group, value) pair is visited once, not each group's rows."""
    pairs = pd.DataFrame({"group": groups, "value": column.astype(object).to_numpy()})
    found: dict[int, set[str]] = {}
    for group, value in pairs.dropna().drop_duplicates().itertuples(index=False):
        found.setdefault(int(group), set()).add(str(value))
    return [joined(found.get(i, ())) for i in range(n_groups)]
