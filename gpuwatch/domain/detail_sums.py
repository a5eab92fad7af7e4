"""The stored detail of a window summed per pod and per workload, as the measures use it.

The recommendations' quantiles pool histograms: a pod's busy GPUs over all its hours, a
workload's utilization, memory, GPUs held and summed utilization over all its pods and hours
(:mod:`gpuwatch.analytics.measures`). A quantile of pooled histograms depends only on the count
of each bin per pod or workload (:func:`gpuwatch.domain.sketch.grouped_quantile`), so a window's
detail can be summed as it is read, a day at a time, instead of held hour by hour:

- pod rows: one per (pod, GPU model), ``hour_ts`` its first hour, ``data_s`` summed,
  ``held_max`` the largest, each histogram's counts summed per bin;
- workload rows: one per (workload, hour) as stored (``data_s`` and ``util_sum_bin_s`` are
  per hour, and the hours are counted), with each workload's ``held`` and ``util_sum``
  histograms summed per bin onto its first row.

Every measure is the same from the summed detail as from the hourly one; the pod rows of a
30-day window of 2,000 GPUs shrink from 0.8 million to 23 thousand
(docs/storage.md#recommendation-detail).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd

from gpuwatch.domain import sketch
from gpuwatch.domain.series import Histograms, StoredDetail

_POD_KEYS = ["pod_id", "gpu_model"]
_WORKLOAD_KEYS = ["cluster", "namespace", "workload_kind", "workload", "gpu_model"]
_POD_HISTOGRAMS = ("pod_busy", "pod_util", "pod_fb_used")
_WORKLOAD_HISTOGRAMS = ("held", "util_sum")
_PARTS = ("rows", "bins", "counts")
#: Entries of histograms merged (sorted) at once by :func:`summed_parts`.
MERGE_BLOCK_ENTRIES = 1 << 20


def _group_rows(frame: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, int]:
    """A dense group id per row of ``frame`` by ``keys`` (missing values a group of their own),
    groups in key order, and the number of groups."""
    if frame.empty:
        return np.zeros(0, np.int64), 0
    group = frame.groupby(keys, sort=True, dropna=False).ngroup().to_numpy(np.int64)
    return group, int(group.max()) + 1


def _first_rows(group: np.ndarray, n: int) -> np.ndarray:
    """The first row of each group ``0..n-1``."""
    first = np.full(n, len(group), np.int64)
    np.minimum.at(first, group, np.arange(len(group), dtype=np.int64))
    return first


def _summed_pods(pods: pd.DataFrame, group: np.ndarray, n: int) -> pd.DataFrame:
    """One row per group of ``pods`` (groups ``0..n-1``), columns as ``pods``'s."""
    hour = np.full(n, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(hour, group, pods["hour_ts"].to_numpy(np.int64))
    held = np.zeros(n, np.int64)
    np.maximum.at(held, group, pods["held_max"].to_numpy(np.int64))
    data_s = np.bincount(group, pods["data_s"].to_numpy(np.float64), n).astype(np.int64)
    out = pods.iloc[_first_rows(group, n)].reset_index(drop=True)
    return out.assign(hour_ts=hour, data_s=data_s, held_max=held)[list(pods.columns)]


def _block_sum(pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> Histograms:
    rows, bins, counts = (np.concatenate(part) for part in zip(*pieces, strict=True))
    return Histograms(*sketch.histogram(rows, bins, counts))


def _merged(hists: list[tuple[Histograms, np.ndarray]], n_groups: int) -> Histograms:
    """The histograms of every part summed by group (part rows moved by their ``group``), a
    block of groups at a time so that no sort spans every entry. Each part's entries must be
    in row order and its groups rise with its rows (parts of :func:`summed_detail`)."""
    moved = [group[hist.rows] for hist, group in hists]
    if not all(bool((np.diff(g) >= 0).all()) for g in moved):
        return _block_sum([(g, h.bins, h.counts) for g, (h, _) in zip(moved, hists, strict=True)])
    total = sum(len(g) for g in moved)
    step = max(1, -(-n_groups // max(1, -(-total // MERGE_BLOCK_ENTRIES))))
    blocks = []
    for low in range(0, max(n_groups, 1), step):
        pieces = []
        for g, (hist, _) in zip(moved, hists, strict=True):
            a, b = np.searchsorted(g, [low, low + step])
            pieces.append((g[a:b], hist.bins[a:b], hist.counts[a:b]))
        blocks.append(_block_sum(pieces))
    return Histograms(*(np.concatenate([getattr(b, name) for b in blocks]) for name in _PARTS))


def workload_first_rows(loads: pd.DataFrame) -> np.ndarray:
    """The row of ``loads`` that each workload's histograms are summed onto (its first), one per
    workload, workloads in key order."""
    group, n = _group_rows(loads, _WORKLOAD_KEYS)
    return _first_rows(group, n)


def _summed_workloads(loads: pd.DataFrame, hists: dict[str, Histograms]) -> dict[str, Histograms]:
    """Each workload's histograms of ``loads``'s rows summed onto its first row."""
    group, n = _group_rows(loads, _WORKLOAD_KEYS)
    first = _first_rows(group, n)[group]
    return {
        name: Histograms(*sketch.histogram(first[h.rows], h.bins, h.counts))
        for name, h in hists.items()
    }


def summed_detail(detail: StoredDetail) -> StoredDetail:
    """``detail`` summed per pod and per workload (see the module docstring)."""
    return summed_parts([detail])


def summed_parts(parts: Sequence[StoredDetail]) -> StoredDetail:
    """The detail of consecutive windows ``parts`` as one, summed per pod and per workload."""
    pods = pd.concat([p.pods for p in parts], ignore_index=True)
    group, n = _group_rows(pods, _POD_KEYS)
    bounds = np.cumsum([0, *(len(p.pods) for p in parts)])
    groups = [group[a:b] for a, b in itertools.pairwise(bounds)]
    pod_hists = {
        name: _merged([(getattr(p, name), g) for p, g in zip(parts, groups, strict=True)], n)
        for name in _POD_HISTOGRAMS
    }
    loads = pd.concat([p.workloads for p in parts], ignore_index=True)
    load_hists = {
        name: Histograms.concat([(getattr(p, name), len(p.workloads)) for p in parts])
        for name in _WORKLOAD_HISTOGRAMS
    }
    return StoredDetail(
        pods=_summed_pods(pods, group, n) if n else pods,
        workloads=loads,
        **pod_hists,
        **_summed_workloads(loads, load_hists),
    )
