"""Write simulated frames into an empty, migrated store (SQLite or PostgreSQL).

Small tables go through SQLAlchemy Core, the sample rows through the driver
(:mod:`gpuwatch.simulate.load_samples`). Ids are read back by natural key, never assumed, so
PostgreSQL sequences stay consistent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sqlalchemy import Table, func, insert, select
from sqlalchemy.engine import Connection

from gpuwatch.domain.providers import provider_from_node
from gpuwatch.simulate.generate import SimulatedData
from gpuwatch.simulate.kube_objects import provider_id
from gpuwatch.simulate.load_samples import insert_samples
from gpuwatch.store import daily, rollup
from gpuwatch.store.models import (
    Cluster,
    CollectionState,
    DraDevice,
    Namespace,
    Node,
    Pod,
)
from gpuwatch.store.models import Gpu as GpuRow
from gpuwatch.store.repository_scheduling import write_queue_flavors, write_sched_workloads

SOURCE = "simulated"
_KEY_SPAN = 1 << 12
_NODE_COLUMNS = (
    "gpu_model",
    "gpu_count",
    "gpu_memory_mib",
    "capacity_type",
    "instance_type",
    "mig_capable",
    "mig_strategy",
    "mig_config",
    "timeslice_replicas",
    "labels",
    "gpu_sharing",
)
_GPU_COLUMNS = (
    "uuid",
    "mig_gi_id",
    "slot",
    "gpu_index",
    "device",
    "model_name",
    "mig_profile",
    "timeslice_replicas",
    "sharing",
    "memory_total_mib",
)
_OPTIONAL_COLUMNS = frozenset(
    {"gpu_sharing", "sharing", "allocation", "queue", "gang_kind", "gang_name", "gang_size"}
)
_POD_COLUMNS = (
    "namespace",
    "uid",
    "phase",
    "workload_kind",
    "workload_name",
    "team",
    "gpu_resource",
    "gpu_count",
    "allocation",
    "labels",
    "created_ts",
    "started_ts",
    "finished_ts",
    "queue",
    "gang_kind",
    "gang_name",
    "gang_size",
)


@dataclass(frozen=True)
class LoadStats:
    """Rows written per table."""

    clusters: int
    nodes: int
    gpus: int
    namespaces: int
    pods: int
    samples: int
    dra_devices: int = 0
    sched_workloads: int = 0


def load_simulated(conn: Connection, data: SimulatedData) -> LoadStats:
    """Write every frame of ``data`` into the store behind ``conn``, in the caller's
    transaction. The store must be empty: simulated rows never mix with collected ones."""
    if conn.execute(select(func.count()).select_from(_table(Cluster))).scalar_one():
        raise ValueError("the store is not empty: load simulated data into a fresh database")
    gpu_index, seen = _sample_gpu_index(data)
    clusters = _insert_clusters(conn, data)
    nodes = _insert_nodes(conn, data, clusters, seen)
    gpu_ids = _insert_gpus(conn, data, clusters, nodes, seen)
    _insert_namespaces(conn, data, clusters)
    pods = _insert_pods(conn, data, clusters, nodes)
    written = insert_samples(conn, data.samples, gpu_ids[gpu_index], pods)
    devices = _insert_dra_devices(conn, data, clusters)
    queued = _insert_queues(conn, data, clusters)
    rollup.roll_up(conn, data.start_ts, data.end_ts)
    for day in daily.pending_days(conn, data.end_ts):
        daily.build_day_in(conn, day)
    state = {"source": SOURCE, "watermark_ts": data.end_ts, "updated_ts": data.end_ts}
    detail = {"start_ts": data.start_ts, "step_s": data.step_s}
    conn.execute(
        insert(_table(CollectionState)),
        [{"cluster_id": i, **state, "detail": detail} for i in clusters.values()],
    )
    return LoadStats(
        len(clusters),
        len(nodes),
        len(gpu_ids),
        len(data.namespaces),
        len(pods),
        written,
        devices,
        queued,
    )


def _table(model: type[Any]) -> Table:
    table: Table = model.__table__
    return table


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts of plain Python values, missing values as None."""
    plain = frame.astype(object).where(frame.notna(), None)
    return [{str(k): v for k, v in row.items()} for row in plain.to_dict("records")]


def _columns(record: dict[str, Any], columns: tuple[str, ...]) -> dict[str, Any]:
    """The record's values of ``columns``; the allocation-mode columns may be absent (frames
    built before they existed), and are then NULL."""
    return {c: record.get(c) if c in _OPTIONAL_COLUMNS else record[c] for c in columns}


def _ids(conn: Connection, model: type[Any], *key: str) -> dict[tuple[Any, ...], int]:
    """Store ids by natural key, read back after an insert."""
    table = _table(model)
    rows = conn.execute(select(table.c.id, *(table.c[k] for k in key))).all()
    return {tuple(row[1:]): int(row[0]) for row in rows}


def _sample_gpu_index(data: SimulatedData) -> tuple[NDArray[np.int64], pd.DataFrame]:
    """Per sample row, the position of its unit in ``data.gpus``; and per unit, its first and
    last sample instant (the window's bounds when it has none)."""
    gpus, samples = data.gpus, data.samples
    unit_keys = pd.Index(_unit_keys(gpus, gpus))
    if not unit_keys.is_unique:
        raise ValueError("the gpus frame names a GPU unit twice")
    index = unit_keys.get_indexer(pd.Index(_unit_keys(samples, gpus))).astype(np.int64)
    if (index < 0).any():
        raise ValueError("samples name a GPU unit that is not in the gpus frame")
    ts = pd.Series(samples["ts"].to_numpy(np.int64))
    seen = ts.groupby(index).agg(["min", "max"]).reindex(range(len(gpus)))
    seen = seen.fillna({"min": data.start_ts, "max": data.end_ts}).astype(np.int64)
    seen.columns = pd.Index(["first_seen_ts", "last_seen_ts"])
    return index, seen


def _unit_keys(frame: pd.DataFrame, gpus: pd.DataFrame) -> NDArray[np.int64]:
    """An integer per (cluster, uuid, mig_gi_id, slot), numbering strings as in ``gpus``."""
    key = np.zeros(len(frame), dtype=np.int64)
    for column in ("cluster", "uuid"):
        values = frame[column].astype("category")
        known = pd.Index(pd.unique(gpus[column].astype(object)))
        lookup = np.append(known.get_indexer(values.cat.categories), -1)
        key = key * (len(known) + 1) + lookup[values.cat.codes.to_numpy()] + 1
    gi = frame["mig_gi_id"].to_numpy(np.int64) + 1
    slot = frame["slot"].to_numpy(np.int64)
    if (gi < 0).any() or (gi >= _KEY_SPAN).any() or (slot < 0).any() or (slot >= _KEY_SPAN).any():
        raise ValueError(f"mig_gi_id and slot must lie in [-1, {_KEY_SPAN - 1})")
    keys: NDArray[np.int64] = (key * _KEY_SPAN + gi) * _KEY_SPAN + slot
    return keys


def _insert_clusters(conn: Connection, data: SimulatedData) -> dict[str, int]:
    conn.execute(insert(_table(Cluster)), [{"name": str(c)} for c in data.clusters["cluster"]])
    return {str(name): i for (name,), i in _ids(conn, Cluster, "name").items()}


def _insert_nodes(
    conn: Connection, data: SimulatedData, clusters: dict[str, int], seen: pd.DataFrame
) -> dict[tuple[str, str], int]:
    """Insert the nodes (seen over their units' samples); their ids by (cluster, node)."""
    where = pd.MultiIndex.from_frame(data.gpus[["cluster", "node"]].astype(object))
    spans = (
        seen.set_axis(where)
        .groupby(level=[0, 1])
        .agg({"first_seen_ts": "min", "last_seen_ts": "max"})
    )
    first = dict(zip(spans.index, spans["first_seen_ts"].tolist(), strict=True))
    last = dict(zip(spans.index, spans["last_seen_ts"].tolist(), strict=True))
    rows = []
    for node in _records(data.nodes):
        key = (node["cluster"], node["node"])
        row = _columns(node, _NODE_COLUMNS)
        row.update(cluster_id=clusters[node["cluster"]], name=node["node"])
        labels = node["labels"]
        row["provider"] = provider_from_node(provider_id(key[0], key[1], labels), labels)
        row.update(
            first_seen_ts=first.get(key, data.start_ts), last_seen_ts=last.get(key, data.end_ts)
        )
        rows.append(row)
    conn.execute(insert(_table(Node)), rows)
    names = {i: name for name, i in clusters.items()}
    return {(names[c], n): i for (c, n), i in _ids(conn, Node, "cluster_id", "name").items()}


def _insert_gpus(
    conn: Connection,
    data: SimulatedData,
    clusters: dict[str, int],
    nodes: dict[tuple[str, str], int],
    seen: pd.DataFrame,
) -> NDArray[np.int64]:
    """Insert the units; their store ids in the order of ``data.gpus``."""
    rows = []
    for gpu, span in zip(_records(data.gpus), _records(seen), strict=True):
        row = _columns(gpu, _GPU_COLUMNS)
        row.update(span, cluster_id=clusters[gpu["cluster"]])
        row["node_id"] = nodes.get((gpu["cluster"], gpu["node"]))
        rows.append(row)
    conn.execute(insert(_table(GpuRow)), rows)
    ids = _ids(conn, GpuRow, "cluster_id", "uuid", "mig_gi_id", "slot")
    keys = [(r["cluster_id"], r["uuid"], r["mig_gi_id"], r["slot"]) for r in rows]
    return np.array([ids[k] for k in keys], dtype=np.int64)


def _insert_namespaces(conn: Connection, data: SimulatedData, clusters: dict[str, int]) -> None:
    rows = [
        {
            "cluster_id": clusters[ns["cluster"]],
            "name": ns["namespace"],
            "team": ns["team"],
            "labels": ns["labels"],
            "last_seen_ts": data.end_ts,
        }
        for ns in _records(data.namespaces)
    ]
    if rows:
        conn.execute(insert(_table(Namespace)), rows)


def _insert_pods(
    conn: Connection,
    data: SimulatedData,
    clusters: dict[str, int],
    nodes: dict[tuple[str, str], int],
) -> dict[str, int]:
    """Insert the pods (last seen when they finished, else at the window's end); ids by uid."""
    rows = []
    for pod in _records(data.pods):
        row = _columns(pod, _POD_COLUMNS)
        row.update(cluster_id=clusters[pod["cluster"]], name=pod["pod"])
        row["node_id"] = None if pod["node"] is None else nodes[pod["cluster"], pod["node"]]
        row["last_seen_ts"] = pod["finished_ts"] or data.end_ts
        rows.append(row)
    if rows:
        conn.execute(insert(_table(Pod)), rows)
    return {str(uid): i for (uid,), i in _ids(conn, Pod, "uid").items()}


def _insert_dra_devices(conn: Connection, data: SimulatedData, clusters: dict[str, int]) -> int:
    """Insert the devices the window's ResourceClaims held (``consumers`` as JSON lists)."""
    rows = []
    for device in _records(data.dra_devices):
        row = {k: v for k, v in device.items() if k != "cluster"}
        row["cluster_id"] = clusters[device["cluster"]]
        rows.append(row)
    if rows:
        conn.execute(insert(_table(DraDevice)), rows)
    return len(rows)


def _insert_queues(conn: Connection, data: SimulatedData, clusters: dict[str, int]) -> int:
    """Write Kueue's GPU quotas and Workloads per cluster; the Workloads written."""
    for frame, write in (
        (data.queue_flavors, write_queue_flavors),
        (data.sched_workloads, write_sched_workloads),
    ):
        for cluster, part in frame.groupby("cluster", sort=True):
            rows = [{k: v for k, v in r.items() if k != "cluster"} for r in _records(part)]
            write(conn, clusters[str(cluster)], rows)
    return len(data.sched_workloads)
