"""Per-hour detail behind the recommendations, exact at any storage resolution.

The measures of contract §5 are quantiles over *samples* (p95 utilization, p99 memory) or over
*sample times* (busy GPUs of a pod, GPUs held and summed utilization of a workload). An hour's
worth of each is kept as a mergeable histogram (:mod:`gpuwatch.domain.sketch`): from raw samples
or from stored hours the same histograms come out, so every resolution gives the same answer
(docs/recommendations.md#quantiles, docs/storage.md).

Both functions take one entry per sample *with a utilization reading* that a pod holds:

- ``ts``, ``step_s``: the sample's instant and step, seconds;
- ``pod``: the holding pod as a code ``0..P-1``; ``workload``: the workload row as a code;
- ``util_ratio``: 0–1; ``fb_used_mib``: MiB or NaN.

Hours are UTC hours (``ts − ts mod 3600``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuwatch.domain import sketch
from gpuwatch.domain.durations import HOUR_S


@dataclass(frozen=True)
class Histograms:
    """Histograms ``(row, bin, count)``; ``row`` indexes the rows of the owning table."""

    rows: np.ndarray
    bins: np.ndarray
    counts: np.ndarray

    def take(self, keep_rows: np.ndarray) -> Histograms:
        """The histograms of the rows where ``keep_rows`` (a boolean per row) is true,
        renumbered in order."""
        renumber = np.cumsum(keep_rows) - 1
        mask = keep_rows[self.rows]
        return Histograms(renumber[self.rows[mask]], self.bins[mask], self.counts[mask])

    @staticmethod
    def concat(parts: list[tuple[Histograms, int]]) -> Histograms:
        """Histograms of consecutive row blocks ``(histograms, rows in the block)``, each
        block's rows offset by the rows before it."""
        offset, rows, bins, counts = 0, [], [], []
        for hist, n_rows in parts:
            rows.append(hist.rows + offset)
            bins.append(hist.bins)
            counts.append(hist.counts)
            offset += n_rows
        empty = np.zeros(0, np.int64)
        return Histograms(*(np.concatenate([empty, *part]) for part in (rows, bins, counts)))


@dataclass(frozen=True)
class PodHours:
    """One row per (pod, hour) with data."""

    pod: np.ndarray
    hour_ts: np.ndarray
    data_s: np.ndarray  # Σ step over the pod's sample times with data
    held_max: np.ndarray  # most of the pod's units with data at one sample time
    busy: Histograms  # units at or above the idle threshold, per sample time
    util: Histograms  # every sample's utilization bin
    fb_used: Histograms  # every sample's framebuffer bin (samples with a reading)


@dataclass(frozen=True)
class WorkloadHours:
    """One row per (workload, hour) with data."""

    workload: np.ndarray
    hour_ts: np.ndarray
    data_s: np.ndarray  # Σ step over the workload's sample times with data
    util_sum_bin_s: np.ndarray  # Σ over sample times of summed utilization bins × step
    held: Histograms  # GPUs its pods hold at one sample time (limits, else units with data)
    util_sum: Histograms  # summed utilization bins of its units at one sample time


def _pairs(codes: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense ids of ``(code, ts)`` pairs in sorted order, and each id's first position."""
    order = np.lexsort((ts, codes))
    c, t = codes[order], ts[order]
    start = np.ones(len(c), dtype=bool)
    start[1:] = (c[1:] != c[:-1]) | (t[1:] != t[:-1])
    ids_sorted = np.cumsum(start) - 1
    ids = np.empty(len(c), dtype=np.int64)
    ids[order] = ids_sorted
    return ids, order[np.flatnonzero(start)]


def _hour_rows(codes: np.ndarray, hours: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return _pairs(codes, hours)


def pod_hours(
    pod: np.ndarray,
    ts: np.ndarray,
    step_s: np.ndarray,
    util_ratio: np.ndarray,
    fb_used_mib: np.ndarray,
    idle_threshold_ratio: float,
) -> PodHours:
    """The pod-hour detail of samples (see the module docstring for the arguments)."""
    pod, ts = np.asarray(pod, np.int64), np.asarray(ts, np.int64)
    step = np.asarray(step_s, np.int64)
    util = np.asarray(util_ratio, np.float64)
    fb = np.asarray(fb_used_mib, np.float64)
    at, at_first = _pairs(pod, ts)  # one id per (pod, sample time)
    n_at = len(at_first)
    held = np.bincount(at, minlength=n_at)
    busy = np.bincount(at, (util >= idle_threshold_ratio).astype(np.float64), n_at)
    at_hour = ts[at_first] - ts[at_first] % HOUR_S
    row_of_at, row_first = _hour_rows(pod[at_first], at_hour)
    n_rows = len(row_first)
    row = row_of_at[at]  # row of each sample
    step_at = np.zeros(n_at, np.int64)
    np.maximum.at(step_at, at, step)
    held_max = np.zeros(n_rows, np.int64)
    np.maximum.at(held_max, row_of_at, held)
    has_fb = ~np.isnan(fb)
    return PodHours(
        pod=pod[at_first][row_first],
        hour_ts=at_hour[row_first],
        data_s=np.bincount(row_of_at, step_at, n_rows).astype(np.int64),
        held_max=held_max,
        busy=Histograms(*sketch.histogram(row_of_at, busy.astype(np.int64))),
        util=Histograms(*sketch.histogram(row, sketch.util_bin(util))),
        fb_used=Histograms(*sketch.histogram(row[has_fb], sketch.fb_bin(fb[has_fb]))),
    )


def workload_hours(
    workload: np.ndarray,
    pod: np.ndarray,
    ts: np.ndarray,
    step_s: np.ndarray,
    util_ratio: np.ndarray,
    pod_gpus_requested: np.ndarray,
) -> WorkloadHours:
    """The workload-hour detail of samples.

    ``pod_gpus_requested[p]``: the GPUs pod ``p``'s spec asks for (limits, MIG resources,
    slots, DRA devices; each device counts 1), or 0 where unknown: then the units with data
    that the pod holds at that sample time count instead.
    """
    workload, pod = np.asarray(workload, np.int64), np.asarray(pod, np.int64)
    ts, step = np.asarray(ts, np.int64), np.asarray(step_s, np.int64)
    requested = np.asarray(pod_gpus_requested, np.float64)
    # Per (pod, sample time): units with data and their summed utilization bins.
    pt, pt_first = _pairs(pod, ts)
    n_pt = len(pt_first)
    units = np.bincount(pt, minlength=n_pt)
    util_bins = np.bincount(pt, sketch.util_bin(util_ratio).astype(np.float64), n_pt)
    asks = requested[pod[pt_first]]
    gpus = np.where(np.isnan(asks) | (asks <= 0), units, asks).astype(np.int64)
    # Per (workload, sample time): sums over its pods.
    wt, wt_first = _pairs(workload[pt_first], ts[pt_first])
    n_wt = len(wt_first)
    held = np.bincount(wt, gpus.astype(np.float64), n_wt).astype(np.int64)
    util_sum = np.bincount(wt, util_bins, n_wt).astype(np.int64)
    step_wt = np.zeros(n_wt, np.int64)
    np.maximum.at(step_wt, wt, step[pt_first])
    wt_ts = ts[pt_first][wt_first]
    wt_hour = wt_ts - wt_ts % HOUR_S
    row_of_wt, row_first = _hour_rows(workload[pt_first][wt_first], wt_hour)
    n_rows = len(row_first)
    return WorkloadHours(
        workload=workload[pt_first][wt_first][row_first],
        hour_ts=wt_hour[row_first],
        data_s=np.bincount(row_of_wt, step_wt, n_rows).astype(np.int64),
        util_sum_bin_s=np.bincount(row_of_wt, util_sum * step_wt, n_rows).astype(np.int64),
        held=Histograms(*sketch.histogram(row_of_wt, held)),
        util_sum=Histograms(*sketch.histogram(row_of_wt, util_sum)),
    )


@dataclass(frozen=True)
class StoredDetail:
    """Detail rows read from the store for a window (docs/storage.md#detail).

    ``pods``: ``hour_ts, pod_id, gpu_model, data_s, held_max``, histograms ``pod_busy``,
    ``pod_util``, ``pod_fb_used`` by row of ``pods``; ``workloads``: ``hour_ts, cluster,
    namespace, workload_kind, workload, gpu_model, data_s, util_sum_bin_s``, histograms
    ``held`` and ``util_sum`` by row of ``workloads``.
    """

    pods: pd.DataFrame
    pod_busy: Histograms
    pod_util: Histograms
    pod_fb_used: Histograms
    workloads: pd.DataFrame
    held: Histograms
    util_sum: Histograms
