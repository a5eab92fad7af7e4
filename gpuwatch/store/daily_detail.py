"""Daily sums of the recommendation detail, and a window's detail from them (issue: scale out).

A window's recommendations pool the detail's histograms per pod and per workload
(:mod:`gpuwatch.domain.detail_sums`), so a day's can be summed once: ``pod_detail_daily`` holds
each pod's rows of a day summed (:func:`~gpuwatch.domain.detail_sums.summed_detail`), and
``workload_detail_daily`` each workload's histograms of a day summed. A workload's hourly
``data_s`` and ``util_sum_bin_s`` are kept per hour (their hourly quantiles need them), so its
hourly rows are still read, without their histograms.

The sums are built with the cost and health sums of :mod:`gpuwatch.store.daily` and read under
the same day versions. A window's detail is its current days' sums and the other hours' rows,
summed per pod and per workload exactly as they would be from the hourly rows alone
(docs/storage.md#daily-sums).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import Connection, insert, text

from gpuwatch.domain.detail_sums import summed_detail, summed_parts, workload_first_rows
from gpuwatch.domain.durations import DAY_S
from gpuwatch.domain.series import Histograms, StoredDetail
from gpuwatch.store.daily_health import Spans
from gpuwatch.store.detail_rows import (
    LOAD_COLUMNS,
    LOAD_ROWS_SQL,
    blobs,
    frame,
    histograms,
    pod_part,
    read_detail,
)
from gpuwatch.store.driver import driver_rows
from gpuwatch.store.models import Cluster
from gpuwatch.store.models_daily import PodDetailDaily, WorkloadDetailDaily

_PODS = PodDetailDaily.__tablename__
_LOADS = WorkloadDetailDaily.__tablename__
_DAY_PODS = (
    "SELECT hour_ts, pod_id, gpu_model, data_s, held_max, busy_hist, util_hist, fb_used_hist "  # noqa: S608
    f"FROM {_PODS} WHERE day_ts = {{mark}} ORDER BY pod_id, hour_ts"
)
_DAY_LOADS = (
    "SELECT d.hour_ts, c.name, d.namespace, d.workload_kind, d.workload_name, d.gpu_model, "  # noqa: S608
    f"d.held_hist, d.util_sum_hist FROM {_LOADS} d JOIN {Cluster.__tablename__} c "
    "ON c.id = d.cluster_id WHERE d.day_ts = {mark}"
)
#: The leading columns of a workload-hour row that name it: hour, cluster, namespace, kind,
#: name and GPU model.
_KEY_LEN = 6


def _pod_rows(day_ts: int, summed: StoredDetail) -> list[dict[str, Any]]:
    pods, n = summed.pods, len(summed.pods)
    busy, util, fb = (blobs(h, n) for h in (summed.pod_busy, summed.pod_util, summed.pod_fb_used))
    models = pods["gpu_model"].tolist()
    return [
        {
            "day_ts": day_ts,
            "pod_id": int(pod),
            "hour_ts": int(hour),
            "gpu_model": None if not isinstance(models[i], str) else models[i],
            "data_s": int(data_s),
            "held_max": int(held),
            "busy_hist": busy[i],
            "util_hist": util[i],
            "fb_used_hist": fb[i],
        }
        for i, (hour, pod, data_s, held) in enumerate(
            pods[["hour_ts", "pod_id", "data_s", "held_max"]].itertuples(index=False)
        )
    ]


def _workload_rows(conn: Connection, day_ts: int, summed: StoredDetail) -> list[dict[str, Any]]:
    loads, n = summed.workloads, len(summed.workloads)
    held, util_sum = blobs(summed.held, n), blobs(summed.util_sum, n)
    cluster_ids = {name: cid for cid, name in conn.execute(text("SELECT id, name FROM clusters"))}
    first = workload_first_rows(loads)
    names = ["hour_ts", "cluster", "namespace", "workload_kind", "workload", "gpu_model"]
    return [
        {
            "day_ts": day_ts,
            "cluster_id": cluster_ids[cluster],
            "namespace": namespace,
            "workload_kind": kind,
            "workload_name": workload,
            "gpu_model": model,
            "hour_ts": int(hour),
            "held_hist": held[i],
            "util_sum_hist": util_sum[i],
        }
        for i, (hour, cluster, namespace, kind, workload, model) in zip(
            first.tolist(), loads[names].iloc[first].itertuples(index=False), strict=True
        )
    ]


def build(conn: Connection, day_ts: int) -> None:
    """Sum the day's detail into the daily tables, in the caller's transaction (the day's rows
    there already deleted)."""
    summed = summed_detail(read_detail(conn, day_ts, day_ts + DAY_S))
    pods = _pod_rows(day_ts, summed)
    if pods:
        conn.execute(insert(PodDetailDaily), pods)
    loads = _workload_rows(conn, day_ts, summed)
    if loads:
        conn.execute(insert(WorkloadDetailDaily), loads)


def _placed(daily: list[Any], column: int, at: np.ndarray) -> Histograms:
    """The histograms in ``column`` of the ``daily`` rows, each on the workload-hour row ``at``
    names (those at -1 left out)."""
    hist = histograms([row[column] for row in daily])
    row = at[hist.rows]
    kept = row >= 0
    return Histograms(row[kept], hist.bins[kept], hist.counts[kept])


def _day(conn: Connection, day_ts: int) -> StoredDetail:
    """One built day's detail: its pod sums, its workload-hour rows with each workload's summed
    histograms on the row of its first hour."""
    pods, (busy, util, fb_used) = pod_part(driver_rows(conn, _DAY_PODS, day_ts))
    rows = driver_rows(conn, LOAD_ROWS_SQL, day_ts, day_ts + DAY_S)
    loads, _ = frame(rows, LOAD_COLUMNS)
    position = {tuple(row[:_KEY_LEN]): i for i, row in enumerate(rows)}
    daily = driver_rows(conn, _DAY_LOADS, day_ts)
    # A day rebuilt between the two reads may name a workload-hour the first did not see: its
    # versions changed, so :func:`~gpuwatch.store.daily.read_days` reads the window again.
    at = np.array([position.get(tuple(row[:_KEY_LEN]), -1) for row in daily], np.int64)
    held, util_sum = (_placed(daily, n, at) for n in (_KEY_LEN, _KEY_LEN + 1))
    return StoredDetail(
        pods=pods,
        pod_busy=busy,
        pod_util=util,
        pod_fb_used=fb_used,
        workloads=loads,
        held=held,
        util_sum=util_sum,
    )


def read(conn: Connection, days: Spans, hours: Spans) -> StoredDetail:
    """The detail of ``days`` (spans of whole days with current sums) and ``hours`` (the rest,
    read a day at a time), summed per pod and per workload, parts in time order."""
    spans = sorted([(lo, hi, True) for lo, hi in days] + [(lo, hi, False) for lo, hi in hours])
    parts = []
    for lo, hi, built in spans:
        for first in range(int(lo), int(hi), DAY_S):
            last = min(first + DAY_S, int(hi))
            part = _day(conn, first) if built else summed_detail(read_detail(conn, first, last))
            parts.append(part)
    if not parts:
        return read_detail(conn, 0, 0)
    return summed_parts(parts)
