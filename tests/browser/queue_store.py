"""A store with queues: a demo fleet given a Kueue cohort, a waiting Workload and a stalled
gang over the last three hours of its hourly roll-ups (from 07:00 UTC), written by hand.

- Cohort ``qa-cohort`` of cluster ``prod-us-east``: ClusterQueue ``qa-idle`` (4 A100s of
  quota, no pod ever runs in it) and ``qa-wait`` (no quota), both seen for those three
  hours. Workload ``qa-waiting``, of the gang's namespace, asks ``qa-wait`` for 2 GPUs over
  them and is never admitted: for 3 hours work of the cohort waits while ``qa-idle``'s 4 GPUs
  sit unused: 12 idle quota GPU-hours at the $4.00 an A100 is priced at in
  :func:`settings_for`: $48.00.
- Gang ``jobset/qa-train``: a pod holding one whole GPU for each of the three hours (a full
  hour of data each) and a sibling of its workload created 10 minutes before them that never
  starts, so Pending longer than 10 minutes from the first hour on: 3 stalled GPU-hours at its
  node's $4.00: $12.00.

:func:`drop_queues` makes a store without queues or gangs (no Kueue, Volcano or JobSet).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from gpuwatch.config import Settings

HOUR_S = 3600
CLUSTER = "prod-us-east"
A100 = "NVIDIA A100-SXM4-80GB"
USD_PER_GPU_HOUR = 4.0
GANG = "qa-train"
_HELD = """
SELECT h.pod_id, p.namespace, p.name, p.team, p.workload_kind, p.workload_name, n.name,
  COUNT(*)
FROM gpu_samples_hourly h
JOIN pods p ON p.id = h.pod_id
JOIN clusters c ON c.id = p.cluster_id
JOIN gpus g ON g.id = h.gpu_id
JOIN nodes n ON n.id = g.node_id
WHERE c.name = ? AND h.hour_ts >= ? AND h.data_s = 3600
  AND g.mig_gi_id = -1 AND g.timeslice_replicas = 1 AND p.started_ts < ?
GROUP BY h.pod_id
HAVING COUNT(*) = 3 AND COUNT(DISTINCT h.gpu_id) = 1
ORDER BY h.pod_id
LIMIT 1
"""


@dataclass(frozen=True)
class QueuedFleet:
    namespace: str
    #: The gang's running pod, its team and its node.
    pod: str
    team: str
    workload_kind: str
    workload: str
    node: str
    #: The three hours with the waiting work, the idle quota and the stall.
    hours: tuple[int, int, int]


def _checkpoint(path: Path) -> None:
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def drop_queues(path: Path) -> None:
    """No queue, queued work or gang in the store at ``path``."""
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("DELETE FROM queue_flavors")
        conn.execute("DELETE FROM sched_workloads")
        conn.execute("UPDATE pods SET queue = NULL, gang_kind = NULL, gang_name = NULL")
    _checkpoint(path)


def _quota(conn: sqlite3.Connection, cluster_id: int, queue: str, nominal: float, ts: int) -> None:
    conn.execute(
        "INSERT INTO queue_flavors (cluster_id, kind, queue, cohort, flavor, gpu_resource, "
        "gpu_model, nominal_gpus, first_seen_ts, last_seen_ts) "
        "VALUES (?, 'kueue', ?, 'qa-cohort', 'a100', 'nvidia.com/gpu', ?, ?, ?, ?)",
        (cluster_id, queue, A100, nominal, ts, ts + 3 * HOUR_S),
    )


def add_queues(path: Path) -> QueuedFleet:
    """Write the queues, the waiting Workload and the stalled gang into the store at ``path``
    (after :func:`drop_queues`), as the module says."""
    drop_queues(path)
    with closing(sqlite3.connect(path)) as conn, conn:
        (last,) = conn.execute("SELECT MAX(hour_ts) FROM gpu_samples_hourly").fetchone()
        hours = (last - 2 * HOUR_S, last - HOUR_S, last)
        (cluster_id,) = conn.execute(
            "SELECT id FROM clusters WHERE name = ?", (CLUSTER,)
        ).fetchone()
        pod_id, namespace, pod, team, kind, workload, node, _ = conn.execute(
            _HELD, (CLUSTER, hours[0], hours[0] - 600)
        ).fetchone()
        _quota(conn, cluster_id, "qa-idle", 4.0, hours[0])
        _quota(conn, cluster_id, "qa-wait", 0.0, hours[0])
        conn.execute(
            "INSERT INTO sched_workloads (cluster_id, kind, namespace, name, uid, queue, "
            "gpu_resource, gpus_requested, pod_count, state, created_ts, evictions, "
            "last_seen_ts) VALUES (?, 'kueue', ?, 'qa-waiting', 'w1', 'qa-wait', "
            "'nvidia.com/gpu', 2, 2, 'pending', ?, 0, ?)",
            (cluster_id, namespace, hours[0], hours[0] + 3 * HOUR_S),
        )
        conn.execute(
            "UPDATE pods SET gang_kind = 'jobset', gang_name = ?, gang_size = 2 WHERE id = ?",
            (GANG, pod_id),
        )
        conn.execute(
            "INSERT INTO pods (cluster_id, namespace, name, uid, phase, workload_kind, "
            "workload_name, team, gpu_resource, gpu_count, labels, created_ts, last_seen_ts, "
            "gang_kind, gang_name, gang_size) VALUES (?, ?, 'qa-train-1', 'p1', 'Pending', "
            "?, ?, ?, 'nvidia.com/gpu', 1, '{}', ?, ?, 'jobset', ?, 2)",
            (cluster_id, namespace, kind, workload, team, hours[0] - 600, hours[2], GANG),
        )
    _checkpoint(path)
    return QueuedFleet(namespace, pod, team, kind, workload, node, hours)


def settings_for(fleet: QueuedFleet) -> Settings:
    """Default settings, with A100s and the gang's node priced at $4.00 per GPU-hour."""
    return Settings(
        pricing={
            "models": {A100: {"on_demand": USD_PER_GPU_HOUR}},
            "nodes": {fleet.node: USD_PER_GPU_HOUR},
        }
    )
