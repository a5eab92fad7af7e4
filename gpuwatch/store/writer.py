"""Idempotent writes for collectors: upserts on natural keys, in the caller's transaction.

Writing the same facts twice changes nothing: entity rows are keyed by their natural keys
(``first_seen_ts`` kept, ``last_seen_ts`` only moves forward) and samples by ``(gpu_id, ts)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Table, case, select
from sqlalchemy.dialects import postgresql, sqlite

from gpuwatch.store.models import (
    SAMPLE_FIELDS,
    Cluster,
    CollectionState,
    Gpu,
    GpuSample,
    Namespace,
    Node,
    Pod,
)

_PLACEHOLDER = {"qmark": "?", "format": "%s", "pyformat": "%s"}
_CHUNK = 20_000


def table_of(model: type[Any]) -> Table:
    table: Table = model.__table__
    return table


def _insert(conn: Connection, table: Table) -> Any:
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


def upsert(
    conn: Connection,
    model: type[Any],
    rows: Sequence[Mapping[str, Any]],
    key: Sequence[str],
) -> None:
    """Insert ``rows``, updating the other columns of rows whose ``key`` exists.

    ``first_seen_ts`` is never overwritten; ``last_seen_ts`` keeps the later of old and new.
    """
    if not rows:
        return
    table = table_of(model)
    stmt = _insert(conn, table)
    excluded = stmt.excluded
    updates: dict[str, Any] = {}
    for column in rows[0]:
        if column in key or column == "first_seen_ts":
            continue
        if column == "last_seen_ts":
            updates[column] = case(
                (excluded.last_seen_ts > table.c.last_seen_ts, excluded.last_seen_ts),
                else_=table.c.last_seen_ts,
            )
        else:
            updates[column] = excluded[column]
    stmt = stmt.on_conflict_do_update(index_elements=list(key), set_=updates)
    for start in range(0, len(rows), _CHUNK):
        conn.execute(stmt, list(rows[start : start + _CHUNK]))


def ensure_cluster(conn: Connection, name: str) -> int:
    """The id of cluster ``name``, created if new."""
    table = table_of(Cluster)
    found = conn.execute(select(table.c.id).where(table.c.name == name)).scalar()
    if found is not None:
        return int(found)
    conn.execute(_insert(conn, table).values(name=name).on_conflict_do_nothing())
    return int(conn.execute(select(table.c.id).where(table.c.name == name)).scalar_one())


def id_map(
    conn: Connection, model: type[Any], cluster_id: int, key: Sequence[str]
) -> dict[tuple[Any, ...], int]:
    """Natural key → id for one cluster's rows of ``model``."""
    table = table_of(model)
    columns = [table.c[name] for name in key]
    stmt = select(table.c.id, *columns).where(table.c.cluster_id == cluster_id)
    return {tuple(row[1:]): int(row[0]) for row in conn.execute(stmt)}


def write_nodes(
    conn: Connection, cluster_id: int, rows: Sequence[Mapping[str, Any]]
) -> dict[str, int]:
    """Upsert nodes (dicts of ``nodes`` columns without ids); returns name → id."""
    upsert(conn, Node, [{**row, "cluster_id": cluster_id} for row in rows], ("cluster_id", "name"))
    return {key[0]: value for key, value in id_map(conn, Node, cluster_id, ("name",)).items()}


def write_namespaces(conn: Connection, cluster_id: int, rows: Sequence[Mapping[str, Any]]) -> None:
    upsert(
        conn, Namespace, [{**row, "cluster_id": cluster_id} for row in rows], ("cluster_id", "name")
    )


POD_KEY = ("namespace", "name", "uid")
GPU_KEY = ("uuid", "mig_gi_id", "slot")


def write_pods(
    conn: Connection, cluster_id: int, rows: Sequence[Mapping[str, Any]]
) -> dict[tuple[Any, ...], int]:
    """Upsert pods; returns (namespace, name, uid) → id."""
    upsert(conn, Pod, [{**row, "cluster_id": cluster_id} for row in rows], ("cluster_id", *POD_KEY))
    return id_map(conn, Pod, cluster_id, POD_KEY)


def write_gpus(
    conn: Connection, cluster_id: int, rows: Sequence[Mapping[str, Any]]
) -> dict[tuple[Any, ...], int]:
    """Upsert GPU units; returns (uuid, mig_gi_id, slot) → id."""
    upsert(conn, Gpu, [{**row, "cluster_id": cluster_id} for row in rows], ("cluster_id", *GPU_KEY))
    return id_map(conn, Gpu, cluster_id, GPU_KEY)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def write_samples(conn: Connection, rows: Iterable[Sequence[Any]]) -> int:
    """Upsert sample tuples in :data:`SAMPLE_FIELDS` order; returns rows written.

    Runs one prepared statement through the driver's ``executemany``: the same SQL on SQLite and
    PostgreSQL (both have ``ON CONFLICT ... DO UPDATE``).
    """
    mark = _PLACEHOLDER[conn.dialect.paramstyle]
    updates = ", ".join(f"{name} = excluded.{name}" for name in SAMPLE_FIELDS[2:])
    sql = (
        f"INSERT INTO {GpuSample.__tablename__} ({', '.join(SAMPLE_FIELDS)}) "  # noqa: S608
        f"VALUES ({', '.join([mark] * len(SAMPLE_FIELDS))}) "
        f"ON CONFLICT (gpu_id, ts) DO UPDATE SET {updates}"
    )
    cursor = conn.connection.cursor()
    written = 0
    batch: list[tuple[Any, ...]] = []
    try:
        for row in rows:
            batch.append(tuple(_clean(value) for value in row))
            if len(batch) >= _CHUNK:
                cursor.executemany(sql, batch)
                written += len(batch)
                batch = []
        if batch:
            cursor.executemany(sql, batch)
            written += len(batch)
    finally:
        cursor.close()
    return written


def read_watermark(conn: Connection, cluster_id: int, source: str) -> int | None:
    table = table_of(CollectionState)
    stmt = select(table.c.watermark_ts).where(
        table.c.cluster_id == cluster_id, table.c.source == source
    )
    value = conn.execute(stmt).scalar()
    return None if value is None else int(value)


def advance_watermark(
    conn: Connection,
    cluster_id: int,
    source: str,
    watermark_ts: int,
    now_ts: int,
    detail: Mapping[str, Any] | None = None,
) -> None:
    """Record that everything up to ``watermark_ts`` is written (never moves it backwards)."""
    current = read_watermark(conn, cluster_id, source)
    row = {
        "cluster_id": cluster_id,
        "source": source,
        "watermark_ts": max(watermark_ts, current or watermark_ts),
        "updated_ts": now_ts,
        "detail": dict(detail or {}),
    }
    upsert(conn, CollectionState, [row], ("cluster_id", "source"))
