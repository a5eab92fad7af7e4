"""Reads the pods table as the :data:`gpuwatch.domain.frames.POD_COLUMNS` frame, and the
devices their ResourceClaims held."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import Engine, func, select

from gpuwatch.domain.frames import POD_COLUMNS, conform
from gpuwatch.store.models import Cluster, DraDevice, Node, Pod


def load_pods(engine: Engine) -> pd.DataFrame:
    """Every stored pod with its cluster, node, owner, team, GPU request, life span, queue and
    gang."""
    stmt = (
        select(
            Cluster.name.label("cluster"),
            Pod.id.label("pod_id"),
            Pod.namespace,
            Pod.name.label("pod"),
            Node.name.label("node"),
            Pod.phase,
            Pod.workload_kind,
            Pod.workload_name.label("workload"),
            Pod.team,
            Pod.gpu_resource,
            Pod.gpu_count,
            Pod.created_ts,
            Pod.started_ts,
            Pod.finished_ts,
            (Pod.uid == "").label("dcgm_only"),
            Pod.allocation,
            Pod.queue,
            Pod.gang_kind,
            Pod.gang_name,
            Pod.gang_size,
        )
        .join(Cluster, Cluster.id == Pod.cluster_id)
        .outerjoin(Node, Node.id == Pod.node_id)
    )
    with engine.connect() as conn:
        frame: pd.DataFrame = pd.read_sql_query(stmt, conn)
    return conform(frame, POD_COLUMNS)


def load_dra_devices(engine: Engine) -> pd.DataFrame:
    """The devices ResourceClaims held at each cluster's last Kubernetes snapshot."""
    latest = (
        select(DraDevice.cluster_id, func.max(DraDevice.last_seen_ts).label("ts"))
        .group_by(DraDevice.cluster_id)
        .subquery()
    )
    stmt = (
        select(Cluster.name.label("cluster"), *(DraDevice.__table__.c[n] for n in _DRA_COLUMNS))
        .join(Cluster, Cluster.id == DraDevice.cluster_id)
        .join(
            latest,
            (latest.c.cluster_id == DraDevice.cluster_id) & (latest.c.ts == DraDevice.last_seen_ts),
        )
        .order_by(Cluster.name, DraDevice.claim_namespace, DraDevice.claim_name, DraDevice.device)
    )
    with engine.connect() as conn:
        frame: pd.DataFrame = pd.read_sql_query(stmt, conn)
    return frame


_DRA_COLUMNS = ("claim_namespace", "claim_name", "driver", "pool", "device", "node", "gpu_uuid",
                "mig_profile", "consumers")  # fmt: skip
