"""Reads the recommendation detail of the hourly roll-ups (docs/storage.md#detail)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd
from sqlalchemy import Engine, select

from gpuwatch.domain.durations import DAY_S, HOUR_S
from gpuwatch.domain.series import StoredDetail
from gpuwatch.store import daily, daily_detail
from gpuwatch.store.detail_rows import LOAD_COLUMNS, histograms, pod_part, read_detail
from gpuwatch.store.models import PodSampleHourly


def _rows(engine: Engine, stmt: Any) -> list[Any]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(stmt)]


def load_detail(engine: Engine, start_ts: int, end_ts: int) -> StoredDetail:
    """The pod-hour and workload-hour detail of the hours starting in ``[start_ts, end_ts)``."""
    with engine.connect() as conn:
        return read_detail(conn, start_ts, end_ts)


def load_window_detail(engine: Engine, start_ts: int, end_ts: int) -> StoredDetail:
    """The detail of the hours starting in ``[start_ts, end_ts)`` summed per pod and per
    workload (:func:`~gpuwatch.domain.detail_sums.summed_detail`): whole days whose daily sums
    are current from them, the other hours read a day at a time
    (:mod:`gpuwatch.store.daily_detail`), so that a long window holds one row of histograms per
    pod instead of one per pod and hour. The recommendations' measures are the same from it as
    from :func:`load_detail`."""
    first_hour = -(-int(start_ts) // HOUR_S) * HOUR_S
    if first_hour >= int(end_ts):
        return load_detail(engine, start_ts, end_ts)
    return daily.read_days(engine, first_hour, int(end_ts), daily_detail.read).value


#: Pod ids per query of :func:`load_pod_detail` (well under SQLite's bound-parameter limit).
POD_CHUNK = 500


def _pod_rows(engine: Engine, hours: list[int], pods: list[int]) -> list[Any]:
    """Pod-hour rows of every hour in ``hours`` and pod in ``pods`` (primary-key lookups)."""
    p = PodSampleHourly
    found: list[Any] = []
    for first in range(0, len(pods), POD_CHUNK):
        found += _rows(
            engine,
            select(p.hour_ts, p.pod_id, p.gpu_model, p.data_s, p.held_max, p.busy_hist,
                   p.util_hist, p.fb_used_hist)
            .where(p.hour_ts.in_(hours), p.pod_id.in_(pods[first : first + POD_CHUNK])),
        )  # fmt: skip
    return found


def load_pod_detail(engine: Engine, hours: Iterable[int], pod_ids: Iterable[int]) -> StoredDetail:
    """The pod-hour detail of the (hour, pod) pairs ``zip(hours, pod_ids)`` (one workload's
    hours, for its page), in hour and pod order; the workload-hour part is left empty.

    Read a day of hours at a time by primary key (the day's hours × its pods), so a workload
    costs its own rows, whatever the size of the fleet.
    """
    wanted = {(int(h), int(p)) for h, p in zip(hours, pod_ids, strict=True)}
    days: dict[int, list[tuple[int, int]]] = {}
    for pair in sorted(wanted):
        days.setdefault(pair[0] // DAY_S, []).append(pair)
    pod_rows: list[Any] = []
    for pairs in days.values():
        hour_list = sorted({h for h, _ in pairs})
        pod_list = sorted({p for _, p in pairs})
        pod_rows += [r for r in _pod_rows(engine, hour_list, pod_list) if (r[0], r[1]) in wanted]
    pod_rows.sort(key=lambda r: (r[0], r[1]))
    pods, (busy, util, fb_used) = pod_part(pod_rows)
    empty = histograms([])
    return StoredDetail(
        pods=pods,
        pod_busy=busy,
        pod_util=util,
        pod_fb_used=fb_used,
        workloads=pd.DataFrame(columns=LOAD_COLUMNS),
        held=empty,
        util_sum=empty,
    )


def has_detail(engine: Engine, start_ts: int, end_ts: int) -> bool:
    """Whether any pod-hour detail falls in the window (a key-range probe)."""
    hours = PodSampleHourly.hour_ts
    with engine.connect() as conn:
        stmt = select(hours).where(hours >= int(start_ts), hours < int(end_ts)).limit(1)
        return conn.execute(stmt).first() is not None
