"""Mergeable histograms of utilization and memory, and quantiles read from them.

Every quantile a recommendation uses is a *nearest-rank* quantile (the smallest value with at
least ``q`` of the values at or below it; numpy's ``method="inverted_cdf"``) of values first put
into bins by a monotone function. Because binning is monotone, the quantile of the binned values
is the bin of the exact quantile: the answer is the same whether it is read from raw samples or
from hourly histograms merged in any order, and it is within half a bin of the exact value
(docs/recommendations.md#quantiles):

- utilization ratio 0-1: bins of 0.5 percentage point (``util_bin``), so within 0.25 point;
- framebuffer MiB: whole MiB (``fb_bin``), exact for DCGM's whole-MiB readings;
- counts (GPUs held or busy at one sample time): the integer itself.

A histogram travels as three parallel arrays ``(row, bin, count)``: ``row`` names what the
histogram belongs to (a pod-hour, a workload), so that many histograms are merged and queried
with array operations. Stored, one histogram is a blob of little-endian ``uint32`` pairs
(:func:`encode`, :func:`decode_many`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import cast

import numpy as np

#: Utilization bins per unit ratio: 200 bins of 0.5 percentage point.
UTIL_BINS_PER_RATIO = 200
_PAIR = np.dtype("<u4")


def util_bin(util_ratio: np.ndarray) -> np.ndarray:
    """Bin of each utilization ratio (clipped to 0–1): ``round(ratio × 200)``, 0–200."""
    clipped = np.clip(np.asarray(util_ratio, dtype="float64"), 0.0, 1.0)
    bins: np.ndarray = np.rint(clipped * UTIL_BINS_PER_RATIO).astype(np.int64)
    return bins


def util_value(bins: np.ndarray) -> np.ndarray:
    """Utilization ratio a bin stands for."""
    return np.asarray(bins, dtype="float64") / UTIL_BINS_PER_RATIO


def fb_bin(fb_mib: np.ndarray) -> np.ndarray:
    """Bin of each framebuffer reading: whole MiB (DCGM reports whole MiB, so exact)."""
    bins: np.ndarray = np.rint(np.clip(np.asarray(fb_mib, dtype="float64"), 0.0, None))
    return bins.astype(np.int64)


def fb_value(bins: np.ndarray) -> np.ndarray:
    """MiB a framebuffer bin stands for."""
    return np.asarray(bins, dtype="float64")


def histogram(
    rows: np.ndarray, bins: np.ndarray, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge ``(row, bin)`` observations (each weighing 1, or ``weights``) into
    ``(row, bin, count)`` with one entry per distinct pair, sorted by row then bin."""
    rows = np.asarray(rows, dtype=np.int64)
    bins = np.asarray(bins, dtype=np.int64)
    if not len(rows):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    order = _row_bin_order(rows, bins)
    r, b = rows[order], bins[order]
    w = np.ones(len(r), np.int64) if weights is None else np.asarray(weights, np.int64)[order]
    start = np.ones(len(r), dtype=bool)
    start[1:] = (r[1:] != r[:-1]) | (b[1:] != b[:-1])
    first = np.flatnonzero(start)
    return r[first], b[first], np.add.reduceat(w, first)


def _row_bin_order(rows: np.ndarray, bins: np.ndarray) -> np.ndarray:
    """The order of the entries by row, then bin: one stable sort of one integer key (runs
    already in order, as merged histograms bring them, sort in linear time), or a two-key
    sort where that key would not fit 63 bits."""
    low_row, low_bin = int(rows.min()), int(bins.min())
    width = int(bins.max()) - low_bin + 1
    if (int(rows.max()) - low_row + 1) * width >= 1 << 62:
        return np.lexsort((bins, rows))
    return np.argsort((rows - low_row) * width + (bins - low_bin), kind="stable")


#: Cells of the group × coarse-bin count table of :func:`grouped_quantile` (32 MiB of float64).
_COARSE_CELLS = 1 << 22
#: Coarse bins per group at most (bins are grouped by powers of two into this many or fewer).
_COARSE_BINS = 1 << 12


def _ranked(
    groups: np.ndarray, bins: np.ndarray, counts: np.ndarray, before: np.ndarray, rank: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Groups and the bin where their count, from ``before`` on, first reaches ``rank``."""
    g, b, n = histogram(groups, bins, counts)
    keep = n > 0
    g, b, n = g[keep], b[keep], n[keep]
    if not len(g):
        return g, b
    totals = np.bincount(g, n, len(rank))
    start = np.concatenate([[0.0], np.cumsum(totals)[:-1]])
    within = np.cumsum(n) - start[g] + before[g]
    reached = np.flatnonzero(within >= rank[g])
    first = reached[np.concatenate([[True], g[reached][1:] != g[reached][:-1]])]
    return g[first], b[first]


def grouped_quantile(
    groups: np.ndarray, bins: np.ndarray, counts: np.ndarray, n_groups: int, q: float
) -> np.ndarray:
    """Per group ``0..n_groups-1``, the nearest-rank ``q`` quantile of its binned values.

    ``(groups, bins, counts)`` may repeat pairs (hours merged); counts are not negative. NaN for
    a group with no count.
    Two passes, no sort of every entry: counts per group and coarse bin (bins grouped by a
    power of two) find the coarse bin holding each group's rank; only the entries in it are
    sorted. The answer is the same as from sorting everything.
    """
    out = np.full(n_groups, np.nan)
    groups, bins, counts = (np.asarray(a, dtype=np.int64) for a in (groups, bins, counts))
    if not len(groups):
        return out
    low, high = int(bins.min()), int(bins.max())
    width = max(1, min(_COARSE_BINS, _COARSE_CELLS // max(n_groups, 1)))
    shift = max(0, (high - low).bit_length() - (width.bit_length() - 1))
    coarse = (bins - low) >> shift if low or shift else bins
    n_coarse = ((high - low) >> shift) + 1
    cells = np.bincount(groups * n_coarse + coarse, counts, n_groups * n_coarse)
    cumulative = np.cumsum(cells.reshape(n_groups, n_coarse), axis=1)
    totals = cumulative[:, -1]
    # Rank of the quantile: ⌈q·N⌉, at least 1 (the tolerance keeps 0.95 × 20 at 19).
    rank = np.maximum(np.ceil(totals * q - 1e-9), 1)
    target = (cumulative < rank[:, None]).sum(axis=1)
    previous = cumulative[np.arange(n_groups), np.maximum(target - 1, 0)]
    before = np.where(target > 0, previous, 0.0)
    target[target == n_coarse] = -1  # not reached: q above 1, or a group without counts
    chosen = coarse == target[groups]
    g, b = _ranked(groups[chosen], bins[chosen], counts[chosen], before, rank)
    out[g] = b
    return out


def encode(bins: np.ndarray, counts: np.ndarray) -> bytes:
    """One histogram as bytes: ``uint32`` pairs ``(bin, count)`` in bin order."""
    pairs = np.empty((len(bins), 2), dtype=_PAIR)
    pairs[:, 0] = bins
    pairs[:, 1] = counts
    return pairs.tobytes()


def encode_rows(n_rows: int, rows: np.ndarray, bins: np.ndarray, counts: np.ndarray) -> list[bytes]:
    """Histograms ``(row, bin, count)`` (sorted by row, as :func:`histogram` gives) as one blob
    per row ``0..n_rows-1`` (empty bytes for a row without entries)."""
    bounds = np.searchsorted(rows, np.arange(n_rows + 1))
    pairs = np.empty((len(rows), 2), dtype=_PAIR)
    pairs[:, 0] = bins
    pairs[:, 1] = counts
    data = pairs.tobytes()
    width = 2 * _PAIR.itemsize
    return [data[a * width : z * width] for a, z in itertools.pairwise(bounds.tolist())]


def decode_many(blobs: Sequence[bytes | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Blobs of :func:`encode` to ``(row, bin, count)``, ``row`` being the blob's position."""
    width = 2 * _PAIR.itemsize
    has_none = None in blobs
    parts = [b"" if b is None else b for b in blobs] if has_none else cast(Sequence[bytes], blobs)
    lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)) // width
    pairs = np.frombuffer(b"".join(parts), dtype=_PAIR).reshape(-1, 2)
    rows = np.repeat(np.arange(len(parts), dtype=np.int64), lengths)
    return rows, pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.int64)
