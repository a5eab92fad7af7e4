"""Writes and reads queues, quotas and queued work (``queue_flavors``, ``sched_workloads``).

Rows are dicts of the tables' columns without ``id`` and ``cluster_id``
(:mod:`gpuwatch.store.models_scheduling`). Writing is an upsert on the natural key, so a
collection run twice stores the same rows; ``first_seen_ts`` keeps the first sighting and
``last_seen_ts`` the latest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from sqlalchemy import Connection, Engine, select

from gpuwatch.domain.frames import QUEUE_COLUMNS, SCHED_WORKLOAD_COLUMNS, conform
from gpuwatch.store.models import Cluster
from gpuwatch.store.models_scheduling import QueueFlavor, SchedWorkload
from gpuwatch.store.writer import upsert

QUEUE_KEY = ("kind", "queue", "flavor", "gpu_resource")
WORKLOAD_KEY = ("kind", "namespace", "name", "uid")


def write_queue_flavors(
    conn: Connection, cluster_id: int, rows: Sequence[Mapping[str, Any]]
) -> None:
    """Upsert GPU quotas (``queue_flavors`` columns; ``first_seen_ts`` = ``last_seen_ts`` = the
    snapshot's instant)."""
    upsert(
        conn,
        QueueFlavor,
        [{**row, "cluster_id": cluster_id} for row in rows],
        ("cluster_id", *QUEUE_KEY),
    )


def write_sched_workloads(
    conn: Connection, cluster_id: int, rows: Sequence[Mapping[str, Any]]
) -> None:
    """Upsert Kueue Workloads and Volcano PodGroups (``sched_workloads`` columns)."""
    upsert(
        conn,
        SchedWorkload,
        [{**row, "cluster_id": cluster_id} for row in rows],
        ("cluster_id", *WORKLOAD_KEY),
    )


def _read(engine: Engine, stmt: object) -> pd.DataFrame:
    with engine.connect() as conn:
        frame: pd.DataFrame = pd.read_sql_query(stmt, conn)  # type: ignore[call-overload]
        return frame


def load_queue_flavors(engine: Engine) -> pd.DataFrame:
    """Every GPU quota as last seen: :data:`~gpuwatch.domain.frames.QUEUE_COLUMNS`."""
    q = QueueFlavor
    stmt = (
        select(Cluster.name.label("cluster"), *(getattr(q, c.name) for c in QUEUE_COLUMNS[1:]))
        .join(Cluster, Cluster.id == q.cluster_id)
        .order_by(Cluster.name, q.kind, q.queue, q.flavor, q.gpu_resource)
    )
    return conform(_read(engine, stmt), QUEUE_COLUMNS)


def load_sched_workloads(engine: Engine, start_ts: int, end_ts: int) -> pd.DataFrame:
    """Workloads and PodGroups that existed in ``[start_ts, end_ts)`` (created before its end,
    last seen at or after its start): :data:`~gpuwatch.domain.frames.SCHED_WORKLOAD_COLUMNS`."""
    w = SchedWorkload
    stmt = (
        select(
            Cluster.name.label("cluster"),
            *(getattr(w, c.name) for c in SCHED_WORKLOAD_COLUMNS[1:]),
        )
        .join(Cluster, Cluster.id == w.cluster_id)
        .where((w.created_ts.is_(None)) | (w.created_ts < end_ts), w.last_seen_ts >= start_ts)
        .order_by(Cluster.name, w.kind, w.namespace, w.name)
    )
    return conform(_read(engine, stmt), SCHED_WORKLOAD_COLUMNS)
