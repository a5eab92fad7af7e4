"""Make a store's fleet need node-level attribution: one node's exporter without pod labels."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.store import daily
from gpuwatch.store import rollup as store_rollup


def strip_pod_labels_of_one_node(engine: Engine, finished_before_ts: int) -> int:
    """Clear the pods of the raw samples of the node whose whole GPUs held the most pods, roll
    the samples up again and build the finished days' sums, as the collector does after writing;
    returns the node's id."""
    with engine.begin() as conn:
        node_id = conn.execute(
            sa.text(
                "SELECT g.node_id FROM gpu_samples s JOIN gpus g ON g.id = s.gpu_id"
                " WHERE s.pod_id IS NOT NULL AND g.mig_gi_id = -1 AND g.timeslice_replicas = 1"
                " GROUP BY g.node_id ORDER BY COUNT(DISTINCT s.pod_id) DESC, g.node_id LIMIT 1"
            )
        ).scalar_one()
        conn.execute(
            sa.text(
                "UPDATE gpu_samples SET pod_id = NULL"
                " WHERE gpu_id IN (SELECT id FROM gpus WHERE node_id = :n)"
            ),
            {"n": node_id},
        )
        first, last = conn.execute(sa.text("SELECT MIN(ts), MAX(ts) FROM gpu_samples")).one()
        store_rollup.roll_up(conn, int(first), int(last) + 1)
    daily.build_pending(engine, finished_before_ts)
    return int(node_id)
