"""The Kubernetes labels of stored pods and nodes, for grouping by a label (Cost over time)."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import Engine, select

from gpuwatch.store.models import Cluster, Node, Pod


def load_pod_label(engine: Engine, key: str) -> pd.Series:
    """Each stored pod's value of label ``key``, indexed by ``pod_id`` (pods without it left
    out)."""
    stmt = select(Pod.id, Pod.labels)
    with engine.connect() as conn:
        rows = conn.execute(stmt).all()
    values = {pod_id: str(labels[key]) for pod_id, labels in rows if labels and key in labels}
    return pd.Series(values, dtype=object, name=key)


def load_node_pools(engine: Engine, keys: list[str]) -> pd.DataFrame:
    """Each stored node's pool: the value of the first of ``keys`` among its labels.

    Columns ``cluster``, ``node``, ``node_pool``; nodes with none of ``keys`` left out.
    """
    stmt = select(Cluster.name, Node.name, Node.labels).join(Cluster, Cluster.id == Node.cluster_id)
    with engine.connect() as conn:
        rows = conn.execute(stmt).all()
    out = []
    for cluster, node, labels in rows:
        pool = next((str(labels[k]) for k in keys if labels and labels.get(k)), None)
        if pool is not None:
            out.append((cluster, node, pool))
    return pd.DataFrame(out, columns=["cluster", "node", "node_pool"], dtype=object)
