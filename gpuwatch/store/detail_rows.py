"""The hourly rows of the recommendation detail as read for a window (docs/storage.md#detail):
plain driver tuples turned into a :class:`~gpuwatch.domain.series.StoredDetail`, inside the
caller's connection (the window readers and the daily sums' builder share them)."""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Connection

from gpuwatch.domain import sketch
from gpuwatch.domain.series import Histograms, StoredDetail
from gpuwatch.store.driver import driver_rows
from gpuwatch.store.models import Cluster, PodSampleHourly, WorkloadSampleHourly

POD_COLUMNS = ["hour_ts", "pod_id", "gpu_model", "data_s", "held_max"]
LOAD_COLUMNS = ["hour_ts", "cluster", "namespace", "workload_kind", "workload",
                "gpu_model", "data_s", "util_sum_bin_s"]  # fmt: skip
_TEXT = frozenset({"gpu_model", "cluster", "namespace", "workload_kind", "workload"})
_NOTHING: tuple[Any, ...] = ()


def histograms(blobs: Sequence[Any]) -> Histograms:
    """Stored histogram blobs as one :class:`Histograms`, row ``i`` the ``i``-th blob."""
    return Histograms(*sketch.decode_many(blobs))


def blobs(hist: Histograms, n_rows: int) -> list[bytes]:
    """:class:`Histograms` of rows ``0..n_rows-1`` as one stored blob per row (the inverse of
    :func:`histograms`)."""
    return sketch.encode_rows(n_rows, hist.rows, hist.bins, hist.counts)


def frame(rows: list[Any], names: list[str]) -> tuple[pd.DataFrame, list[list[Any]]]:
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
POD_SQL = (
    "SELECT hour_ts, pod_id, gpu_model, data_s, held_max, busy_hist, util_hist, fb_used_hist "  # noqa: S608
    f"FROM {PodSampleHourly.__tablename__} "
    "WHERE hour_ts >= {mark} AND hour_ts < {mark} ORDER BY hour_ts, pod_id"
)
_LOAD_FROM = (
    f"FROM {WorkloadSampleHourly.__tablename__} w JOIN {Cluster.__tablename__} c "
    "ON c.id = w.cluster_id WHERE w.hour_ts >= {mark} AND w.hour_ts < {mark} "
    "ORDER BY w.hour_ts, w.cluster_id, w.namespace, w.workload_kind, w.workload_name, "
    "w.gpu_model"
)
_LOAD_FIELDS = (
    "w.hour_ts, c.name, w.namespace, w.workload_kind, w.workload_name, w.gpu_model, "
    "w.data_s, w.util_sum_bin_s"
)
LOAD_SQL = f"SELECT {_LOAD_FIELDS}, w.held_hist, w.util_sum_hist {_LOAD_FROM}"
#: The workload-hour rows without their histograms.
LOAD_ROWS_SQL = f"SELECT {_LOAD_FIELDS} {_LOAD_FROM}"


def pod_part(rows: list[Any]) -> tuple[pd.DataFrame, list[Histograms]]:
    """Pod rows (:data:`POD_COLUMNS` then the three histogram blobs) as a frame and their
    busy, utilization and framebuffer histograms."""
    pods, blobs = frame(rows, POD_COLUMNS)
    busy, util, fb_used = blobs or (_NOTHING, _NOTHING, _NOTHING)
    return pods, [histograms(busy), histograms(util), histograms(fb_used)]


def read_detail(conn: Connection, start_ts: int, end_ts: int) -> StoredDetail:
    """The pod-hour and workload-hour detail of the hours starting in ``[start_ts, end_ts)``."""
    pods, (busy, util, fb_used) = pod_part(driver_rows(conn, POD_SQL, start_ts, end_ts))
    loads, load_blobs = frame(driver_rows(conn, LOAD_SQL, start_ts, end_ts), LOAD_COLUMNS)
    held, util_sum = load_blobs or (_NOTHING, _NOTHING)
    return StoredDetail(
        pods=pods,
        pod_busy=busy,
        pod_util=util,
        pod_fb_used=fb_used,
        workloads=loads,
        held=histograms(held),
        util_sum=histograms(util_sum),
    )
