"""Reads the recommendation detail of the hourly roll-ups (docs/storage.md#detail)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd
from sqlalchemy import Engine, select

from gpuwatch.domain import sketch
from gpuwatch.domain.durations import DAY_S
from gpuwatch.domain.series import Histograms, StoredDetail
from gpuwatch.store.models import Cluster, PodSampleHourly, WorkloadSampleHourly


def _histograms(blobs: list[Any]) -> Histograms:
    return Histograms(*sketch.decode_many(blobs))


def _rows(engine: Engine, stmt: Any) -> list[Any]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(stmt)]


def load_detail(engine: Engine, start_ts: int, end_ts: int) -> StoredDetail:
    """The pod-hour and workload-hour detail of the hours starting in ``[start_ts, end_ts)``."""
    p = PodSampleHourly
    pod_rows = _rows(
        engine,
        select(p.hour_ts, p.pod_id, p.gpu_model, p.data_s, p.held_max, p.busy_hist, p.util_hist,
               p.fb_used_hist)
        .where(p.hour_ts >= start_ts, p.hour_ts < end_ts)
        .order_by(p.hour_ts, p.pod_id),
    )  # fmt: skip
    w = WorkloadSampleHourly
    load_rows = _rows(
        engine,
        select(w.hour_ts, Cluster.name, w.namespace, w.workload_kind, w.workload_name,
               w.gpu_model, w.data_s, w.util_sum_bin_s, w.held_hist, w.util_sum_hist)
        .join(Cluster, Cluster.id == w.cluster_id)
        .where(w.hour_ts >= start_ts, w.hour_ts < end_ts)
        .order_by(w.hour_ts, w.cluster_id, w.namespace, w.workload_kind, w.workload_name,
                  w.gpu_model),
    )  # fmt: skip
    pod_columns = ["hour_ts", "pod_id", "gpu_model", "data_s", "held_max"]
    load_columns = ["hour_ts", "cluster", "namespace", "workload_kind", "workload",
                    "gpu_model", "data_s", "util_sum_bin_s"]  # fmt: skip
    pods = pd.DataFrame([r[:5] for r in pod_rows], columns=pod_columns)
    loads = pd.DataFrame([r[:8] for r in load_rows], columns=load_columns)
    return StoredDetail(
        pods=pods,
        pod_busy=_histograms([r[5] for r in pod_rows]),
        pod_util=_histograms([r[6] for r in pod_rows]),
        pod_fb_used=_histograms([r[7] for r in pod_rows]),
        workloads=loads,
        held=_histograms([r[8] for r in load_rows]),
        util_sum=_histograms([r[9] for r in load_rows]),
    )


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
    pod_columns = ["hour_ts", "pod_id", "gpu_model", "data_s", "held_max"]
    load_columns = ["hour_ts", "cluster", "namespace", "workload_kind", "workload",
                    "gpu_model", "data_s", "util_sum_bin_s"]  # fmt: skip
    nothing = _histograms([])
    return StoredDetail(
        pods=pd.DataFrame([r[:5] for r in pod_rows], columns=pod_columns),
        pod_busy=_histograms([r[5] for r in pod_rows]),
        pod_util=_histograms([r[6] for r in pod_rows]),
        pod_fb_used=_histograms([r[7] for r in pod_rows]),
        workloads=pd.DataFrame(columns=load_columns),
        held=nothing,
        util_sum=nothing,
    )


def has_detail(engine: Engine, start_ts: int, end_ts: int) -> bool:
    """Whether any pod-hour detail falls in the window (a key-range probe)."""
    hours = PodSampleHourly.hour_ts
    with engine.connect() as conn:
        stmt = select(hours).where(hours >= int(start_ts), hours < int(end_ts)).limit(1)
        return conn.execute(stmt).first() is not None
