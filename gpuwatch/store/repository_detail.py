"""Reads the recommendation detail of the hourly roll-ups (docs/storage.md#detail)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, select

from gpuwatch.domain import sketch
from gpuwatch.domain.detail_sums import summed_detail, summed_parts
from gpuwatch.domain.durations import DAY_S
from gpuwatch.domain.series import Histograms, StoredDetail
from gpuwatch.store.models import Cluster, PodSampleHourly, WorkloadSampleHourly

_POD_COLUMNS = ["hour_ts", "pod_id", "gpu_model", "data_s", "held_max"]
_LOAD_COLUMNS = ["hour_ts", "cluster", "namespace", "workload_kind", "workload",
                 "gpu_model", "data_s", "util_sum_bin_s"]  # fmt: skip
_TEXT = frozenset({"gpu_model", "cluster", "namespace", "workload_kind", "workload"})


def _histograms(blobs: Sequence[Any]) -> Histograms:
    return Histograms(*sketch.decode_many(blobs))


def _rows(engine: Engine, stmt: Any) -> list[Any]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(stmt)]


def _driver_rows(engine: Engine, sql: str, start_ts: int, end_ts: int) -> list[Any]:
    """The driver's own row tuples of ``sql`` with its two window bounds (no per-row objects
    of SQLAlchemy: a week holds hundreds of thousands of rows)."""
    mark = "?" if engine.dialect.paramstyle == "qmark" else "%s"
    with engine.connect() as conn:
        cursor = conn.connection.cursor()
        try:
            cursor.execute(sql.format(mark=mark), (int(start_ts), int(end_ts)))
            return list(cursor.fetchall())
        finally:
            cursor.close()


def _frame(rows: list[Any], names: list[str]) -> tuple[pd.DataFrame, list[list[Any]]]:
    """The leading ``names`` of ``rows`` as a frame (integers int64, text as objects), and the
    columns after them (the blobs) as lists."""
    if not rows:
        empty = {name: pd.Series([], dtype="str" if name in _TEXT else "int64") for name in names}
        return pd.DataFrame(empty), []  # the dtypes rows give: text is inferred as ``str``
    columns = [list(map(itemgetter(n), rows)) for n in range(len(rows[0]))]
    data = {
        name: np.array(columns[n], dtype=object if name in _TEXT else np.int64)
        for n, name in enumerate(names)
    }
    return pd.DataFrame(data), columns[len(names) :]


# Table names from the models; the window bounds are bound parameters.
_POD_SQL = (
    "SELECT hour_ts, pod_id, gpu_model, data_s, held_max, busy_hist, util_hist, fb_used_hist "  # noqa: S608
    f"FROM {PodSampleHourly.__tablename__} "
    "WHERE hour_ts >= {mark} AND hour_ts < {mark} ORDER BY hour_ts, pod_id"
)
_LOAD_SQL = (
    "SELECT w.hour_ts, c.name, w.namespace, w.workload_kind, w.workload_name, w.gpu_model, "  # noqa: S608
    "w.data_s, w.util_sum_bin_s, w.held_hist, w.util_sum_hist "
    f"FROM {WorkloadSampleHourly.__tablename__} w JOIN {Cluster.__tablename__} c "
    "ON c.id = w.cluster_id WHERE w.hour_ts >= {mark} AND w.hour_ts < {mark} "
    "ORDER BY w.hour_ts, w.cluster_id, w.namespace, w.workload_kind, w.workload_name, "
    "w.gpu_model"
)


def load_detail(engine: Engine, start_ts: int, end_ts: int) -> StoredDetail:
    """The pod-hour and workload-hour detail of the hours starting in ``[start_ts, end_ts)``."""
    pods, pod_blobs = _frame(_driver_rows(engine, _POD_SQL, start_ts, end_ts), _POD_COLUMNS)
    loads, load_blobs = _frame(_driver_rows(engine, _LOAD_SQL, start_ts, end_ts), _LOAD_COLUMNS)
    nothing: tuple[Any, ...] = ()
    busy, util, fb_used = pod_blobs or (nothing, nothing, nothing)
    held, util_sum = load_blobs or (nothing, nothing)
    return StoredDetail(
        pods=pods,
        pod_busy=_histograms(busy),
        pod_util=_histograms(util),
        pod_fb_used=_histograms(fb_used),
        workloads=loads,
        held=_histograms(held),
        util_sum=_histograms(util_sum),
    )


#: Hours of detail :func:`load_window_detail` reads and sums at a time.
WINDOW_CHUNK_S = DAY_S


def load_window_detail(engine: Engine, start_ts: int, end_ts: int) -> StoredDetail:
    """The detail of the hours starting in ``[start_ts, end_ts)`` summed per pod and per
    workload (:func:`~gpuwatch.domain.detail_sums.summed_detail`), read a day at a time, so
    that a long window holds one row of histograms per pod instead of one per pod and hour.
    The recommendations' measures are the same from it as from :func:`load_detail`."""
    parts = [
        summed_detail(load_detail(engine, first, min(first + WINDOW_CHUNK_S, end_ts)))
        for first in range(int(start_ts), int(end_ts), WINDOW_CHUNK_S)
    ]
    return summed_parts(parts) if parts else load_detail(engine, start_ts, end_ts)


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
    pods, blobs = _frame(pod_rows, _POD_COLUMNS)
    nothing: tuple[Any, ...] = ()
    busy, util, fb_used = blobs or (nothing, nothing, nothing)
    empty = _histograms([])
    return StoredDetail(
        pods=pods,
        pod_busy=_histograms(busy),
        pod_util=_histograms(util),
        pod_fb_used=_histograms(fb_used),
        workloads=pd.DataFrame(columns=_LOAD_COLUMNS),
        held=empty,
        util_sum=empty,
    )


def has_detail(engine: Engine, start_ts: int, end_ts: int) -> bool:
    """Whether any pod-hour detail falls in the window (a key-range probe)."""
    hours = PodSampleHourly.hour_ts
    with engine.connect() as conn:
        stmt = select(hours).where(hours >= int(start_ts), hours < int(end_ts)).limit(1)
        return conn.execute(stmt).first() is not None
