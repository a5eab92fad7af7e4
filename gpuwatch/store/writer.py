"""Idempotent writes for collectors: upserts on natural keys, in the caller's transaction.

Writing the same facts twice changes nothing: entity rows are keyed by their natural keys
(``first_seen_ts`` kept, ``last_seen_ts`` only moves forward) and samples by ``(ts, gpu_id)``.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import numpy as np
from sqlalchemy import Connection, Table, case, func, select, update
from sqlalchemy.dialects import postgresql, sqlite

from gpuwatch.store import pgcopy
from gpuwatch.store.models import (
    Cluster,
    CollectionState,
    Gpu,
    GpuSample,
    Namespace,
    Node,
    Pod,
)

# Re-exported: ``SampleColumns(..., health={name: array})`` also carries the efficiency and health
# readings (``HEALTH_SAMPLE_FIELDS``; a name not given is stored NULL).
from gpuwatch.store.sample_columns import SampleColumns as SampleColumns  # noqa: PLC0414

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


def gpu_keys(conn: Connection, cluster_id: int) -> set[tuple[Any, ...]]:
    """The natural keys (:data:`GPU_KEY`) of the cluster's GPU units in the store."""
    return set(id_map(conn, Gpu, cluster_id, GPU_KEY))


def recent_units(conn: Connection, cluster_id: int, since_ts: int) -> int:
    """How many of the cluster's GPU units were seen at or after ``since_ts``."""
    table = table_of(Gpu)
    stmt = select(func.count()).where(
        table.c.cluster_id == cluster_id, table.c.last_seen_ts >= since_ts
    )
    return int(conn.execute(stmt).scalar_one())


def write_gpus(
    conn: Connection, cluster_id: int, rows: Sequence[Mapping[str, Any]]
) -> dict[tuple[Any, ...], int]:
    """Upsert GPU units; returns (uuid, mig_gi_id, slot) → id.

    A unit whose stored facts are the row's only has its ``last_seen_ts`` raised, by one
    ``UPDATE`` per instant for all such units: a steady minute changes no unit's facts, and
    upserting every unit of a large fleet each minute costs more than the rest of the write.
    """
    if not rows:
        return id_map(conn, Gpu, cluster_id, GPU_KEY)
    table = table_of(Gpu)
    facts = [n for n in rows[0] if n not in ("first_seen_ts", "last_seen_ts")]
    columns = [table.c.id, table.c.last_seen_ts, *(table.c[n] for n in facts)]
    stored = {
        tuple(row[n] for n in GPU_KEY): row
        for row in conn.execute(select(*columns).where(table.c.cluster_id == cluster_id)).mappings()
    }
    changed: list[dict[str, Any]] = []
    seen: dict[int, list[int]] = {}
    for row in rows:
        old = stored.get(tuple(row[n] for n in GPU_KEY))
        if old is None or any(row[n] != old[n] for n in facts):
            changed.append({**row, "cluster_id": cluster_id})
        elif row["last_seen_ts"] > old["last_seen_ts"]:
            seen.setdefault(int(row["last_seen_ts"]), []).append(int(old["id"]))
    upsert(conn, Gpu, changed, ("cluster_id", *GPU_KEY))
    for ts, ids in seen.items():
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            later = (table.c.id.in_(chunk), table.c.last_seen_ts < ts)
            conn.execute(update(table).where(*later).values(last_seen_ts=ts))
    if not changed:
        return {key: int(row["id"]) for key, row in stored.items()}
    return id_map(conn, Gpu, cluster_id, GPU_KEY)


def _write_order(samples: SampleColumns) -> np.ndarray:
    """The indices of the rows in write order, the last of repeated (ts, gpu_id) only.

    The primary key's order, instant by instant and GPU by GPU within an instant: the table
    (clustered by ``(ts, gpu_id)``, its only index) then grows at one place, its end where the
    page is newer than every stored sample.
    """
    ts, gpu = samples.ts.astype(np.int64), samples.gpu_id.astype(np.int64)
    since = ts - ts.min()
    gpu_span = int(gpu.max() - gpu.min()) + 1
    if (int(since.max()) + 1) * gpu_span < 2**62:
        key = since * gpu_span + (gpu - gpu.min())
        order = np.argsort(key, kind="stable")
        ordered = key[order]
        last = np.append(ordered[1:] != ordered[:-1], True)
    else:  # pragma: no cover - instants or ids too far apart for one integer key
        order = np.lexsort((gpu, ts))
        same = (ts[order][1:] == ts[order][:-1]) & (gpu[order][1:] == gpu[order][:-1])
        last = np.append(~same, True)
    result: np.ndarray = order[last]
    return result


def unique_samples(samples: SampleColumns) -> SampleColumns:
    """The rows in write order (:func:`_write_order`), the last of a repeated (ts, gpu_id) only."""
    order = _write_order(samples) if len(samples) else np.zeros(0, dtype=np.int64)
    return samples.take(order)


#: Rows per INSERT statement on SQLite (each one step, run without holding the GIL).
_SQLITE_ROWS = 2000


@functools.lru_cache(maxsize=16)
def _upsert_sql(mark: str, rows: int, names: tuple[str, ...], cleared: tuple[str, ...]) -> str:
    """The upsert of ``rows`` rows of ``names``; on a stored (ts, gpu_id) every column is
    replaced, those of ``cleared`` (no value given) by NULL."""
    updates = ", ".join(
        [f"{name} = excluded.{name}" for name in names[2:]] + [f"{name} = NULL" for name in cleared]
    )
    one = f"({', '.join([mark] * len(names))})"
    return (
        f"INSERT INTO {GpuSample.__tablename__} ({', '.join(names)}) "  # noqa: S608
        f"VALUES {', '.join([one] * rows)} "
        f"ON CONFLICT (ts, gpu_id) DO UPDATE SET {updates}"
    )


def _write_sqlite(conn: Connection, samples: SampleColumns) -> None:
    """Multi-row upserts: one statement (one step) per ``_SQLITE_ROWS`` rows.

    Every value is bound as a float: SQLite stores NaN as NULL and a whole float in an INTEGER
    column as that integer, so what is stored is what integer binding would store. Health
    readings that no row has are not bound at all (NULL, as on a stored row they replace).
    """
    names, columns, cleared = samples.stored()
    limit = max(1, _sqlite_variables(conn) // len(columns))
    per = min(_SQLITE_ROWS, limit)
    count = len(samples)
    full = count - count % per
    # One float matrix of the rows; each statement binds a contiguous slice of it. Python
    # floats exist for one statement at a time, never for the whole page at once.
    matrix = np.empty((count, len(columns)), dtype=np.float64)
    for index, column in enumerate(columns):
        matrix[:, index] = column

    def values(start: int, stop: int) -> list[float]:
        table: list[float] = matrix[start:stop].ravel().tolist()
        return table

    cursor = cast(sqlite3.Connection, conn.connection.driver_connection).cursor()
    try:
        if full:
            chunks = (values(start, start + per) for start in range(0, full, per))
            cursor.executemany(_upsert_sql("?", per, names, cleared), chunks)
        if full < count:
            cursor.execute(_upsert_sql("?", count - full, names, cleared), values(full, count))
    finally:
        cursor.close()


def _sqlite_variables(conn: Connection) -> int:
    driver = cast(sqlite3.Connection, conn.connection.driver_connection)
    return int(driver.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))


def write_samples(conn: Connection, rows: SampleColumns | Iterable[Sequence[Any]]) -> int:
    """Upsert samples (columns, or tuples in :data:`SAMPLE_FIELDS` order); returns rows given.

    A row repeated for one GPU and instant is written once, with its last values
    (:func:`unique_samples`); then :func:`write_unique_samples`.
    """
    samples = rows if isinstance(rows, SampleColumns) else SampleColumns.from_rows(rows)
    del rows
    if len(samples):
        write_unique_samples(conn, unique_samples(samples))
    return len(samples)


def write_unique_samples(conn: Connection, samples: SampleColumns) -> int:
    """Upsert rows already unique per (ts, gpu_id) and in write order, as
    :func:`unique_samples` gives them; returns rows written.

    On SQLite, multi-row ``INSERT ... ON CONFLICT (ts, gpu_id) DO UPDATE`` statements; on
    PostgreSQL, binary ``COPY`` (:mod:`gpuwatch.store.pgcopy`: straight into the table where the
    rows' time range holds no sample yet, else through a temporary table and one upsert). NaN is
    stored as NULL.
    """
    if not len(samples):
        return 0
    if conn.dialect.name == "postgresql":
        names, columns, cleared = samples.stored()
        pgcopy.write_samples(conn, columns, names, cleared)
    else:
        _write_sqlite(conn, samples)
    return len(samples)


def read_watermark(conn: Connection, cluster_id: int, source: str) -> int | None:
    table = table_of(CollectionState)
    stmt = select(table.c.watermark_ts).where(
        table.c.cluster_id == cluster_id, table.c.source == source
    )
    value = conn.execute(stmt).scalar()
    return None if value is None else int(value)


def read_state_detail(conn: Connection, cluster_id: int, source: str) -> dict[str, Any]:
    """The ``detail`` kept with a source's watermark (empty where there is none)."""
    table = table_of(CollectionState)
    stmt = select(table.c.detail).where(table.c.cluster_id == cluster_id, table.c.source == source)
    detail = conn.execute(stmt).scalar()
    return dict(detail) if isinstance(detail, dict) else {}


def advance_watermark(
    conn: Connection,
    cluster_id: int,
    source: str,
    watermark_ts: int,
    now_ts: int,
    detail: Mapping[str, Any] | None = None,
) -> None:
    """Record that everything up to ``watermark_ts`` is written (never moves it backwards, nor
    past ``now_ts``)."""
    current = read_watermark(conn, cluster_id, source)
    row = {
        "cluster_id": cluster_id,
        "source": source,
        "watermark_ts": max(min(watermark_ts, now_ts), current or 0),
        "updated_ts": now_ts,
        "detail": dict(detail or {}),
    }
    upsert(conn, CollectionState, [row], ("cluster_id", "source"))


def stored_samples_end(conn: Connection, cluster_id: int) -> int | None:
    """The end of the last stored sample's step (``ts + step_s``) of a cluster; None if none."""
    samples, gpus = table_of(GpuSample), table_of(Gpu)
    stmt = (
        select(func.max(samples.c.ts + samples.c.step_s))
        .select_from(samples.join(gpus, gpus.c.id == samples.c.gpu_id))
        .where(gpus.c.cluster_id == cluster_id)
    )
    value = conn.execute(stmt).scalar()
    return None if value is None else int(value)


def clamp_watermark(
    conn: Connection, cluster_id: int, source: str, now_ts: int
) -> tuple[int, int | None] | None:
    """Repair a watermark past ``now_ts``: set it to the end of the last stored sample (no
    later than now), or remove it when no sample is stored. Returns ``(old, new)`` when it was
    repaired, None when it was not in the future."""
    old = read_watermark(conn, cluster_id, source)
    if old is None or old <= now_ts:
        return None
    table = table_of(CollectionState)
    here = (table.c.cluster_id == cluster_id) & (table.c.source == source)
    end = stored_samples_end(conn, cluster_id)
    if end is None:
        conn.execute(table.delete().where(here))
        return old, None
    new = min(end, now_ts)
    detail = {"clamped_from_ts": old}
    conn.execute(
        table.update().where(here).values(watermark_ts=new, updated_ts=now_ts, detail=detail)
    )
    return old, new
