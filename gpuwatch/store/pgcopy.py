"""Bulk upsert of samples on PostgreSQL: binary ``COPY`` into a temporary table, then one
``INSERT ... SELECT ... ON CONFLICT (gpu_id, ts) DO UPDATE`` (psycopg 3's ``cursor.copy``).

The COPY rows are fixed-width and built with numpy: the three key columns as ``int8``, every
other column as ``float8`` with NaN for a missing reading, turned into NULL (and cast to the
column's type) by the INSERT.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import Connection

from gpuwatch.store.models import SAMPLE_FIELDS, GpuSample

TEMP_TABLE = "gpuwatch_samples_in"
_INTEGER_FIELDS = SAMPLE_FIELDS[:3]
_CASTS = {"pod_id": "integer", "util_signal": "smallint", "xid": "integer"}
#: Rows per ``COPY`` write (about 13 MB).
_ROWS_PER_WRITE = 100_000
_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_TRAILER = b"\xff\xff"
_ROW = np.dtype(
    [("fields", ">i2")]
    + [
        item
        for name in SAMPLE_FIELDS
        for item in ((f"{name}_len", ">i4"), (name, ">i8" if name in _INTEGER_FIELDS else ">f8"))
    ]
)


def _create_sql() -> str:
    columns = ", ".join(
        f"{name} {'bigint' if name in _INTEGER_FIELDS else 'double precision'}"
        for name in SAMPLE_FIELDS
    )
    return f"CREATE TEMPORARY TABLE IF NOT EXISTS {TEMP_TABLE} ({columns}) ON COMMIT DROP"


def _insert_sql(upsert: bool) -> str:
    def value(name: str) -> str:
        if name in _INTEGER_FIELDS:
            return name
        plain = f"NULLIF({name}, 'NaN'::double precision)"
        return f"{plain}::{_CASTS[name]}" if name in _CASTS else plain

    updates = ", ".join(f"{name} = excluded.{name}" for name in SAMPLE_FIELDS[2:])
    return (
        f"INSERT INTO {GpuSample.__tablename__} ({', '.join(SAMPLE_FIELDS)}) "  # noqa: S608
        f"SELECT {', '.join(value(name) for name in SAMPLE_FIELDS)} FROM {TEMP_TABLE}"
        + (f" ON CONFLICT (gpu_id, ts) DO UPDATE SET {updates}" if upsert else "")
    )


def _any_stored(cursor: Any, first_ts: int, last_ts: int) -> bool:
    """Whether any sample is stored between the two instants (the table's key starts with ts)."""
    sql = f"SELECT 1 FROM {GpuSample.__tablename__} WHERE ts >= %s AND ts <= %s LIMIT 1"  # noqa: S608
    cursor.execute(sql, (first_ts, last_ts))
    return cursor.fetchone() is not None


def _insert(cursor: Any, first_ts: int, last_ts: int) -> None:
    """Move the temporary rows into ``gpu_samples``.

    A plain INSERT where no sample is stored in the time range yet (a backfill: about a third
    cheaper than ``ON CONFLICT``, whose speculative insertion checks two unique indexes);
    the upsert otherwise, and also when a concurrent writer got there first.
    """
    import psycopg  # only ever needed on PostgreSQL

    if _any_stored(cursor, first_ts, last_ts):
        cursor.execute(_insert_sql(upsert=True))
        return
    cursor.execute("SAVEPOINT gpuwatch_samples")
    try:
        cursor.execute(_insert_sql(upsert=False))
    except psycopg.errors.UniqueViolation:
        cursor.execute("ROLLBACK TO SAVEPOINT gpuwatch_samples")
        cursor.execute(_insert_sql(upsert=True))
    cursor.execute("RELEASE SAVEPOINT gpuwatch_samples")


def binary_rows(columns: Sequence[np.ndarray], rows: np.ndarray) -> bytes:
    """The rows at indices ``rows`` in COPY's binary format (no file header or trailer)."""
    out = np.empty(len(rows), dtype=_ROW)
    out["fields"] = len(SAMPLE_FIELDS)
    for name, column in zip(SAMPLE_FIELDS, columns, strict=True):
        out[f"{name}_len"] = 8
        out[name] = column[rows]
    return out.tobytes()


def write_samples(conn: Connection, columns: Sequence[np.ndarray], order: np.ndarray) -> None:
    """Upsert the rows at indices ``order`` (in that order, unique on (gpu_id, ts)) of
    columns given in :data:`SAMPLE_FIELDS` order."""
    count = len(order)
    driver = conn.connection.driver_connection  # psycopg's own connection, for cursor.copy
    assert driver is not None
    cursor = driver.cursor()
    try:
        cursor.execute(_create_sql())
        with cursor.copy(f"COPY {TEMP_TABLE} FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(_HEADER)
            for start in range(0, count, _ROWS_PER_WRITE):
                copy.write(binary_rows(columns, order[start : start + _ROWS_PER_WRITE]))
            copy.write(_TRAILER)
        ts = columns[SAMPLE_FIELDS.index("ts")]
        _insert(cursor, int(ts.min()), int(ts.max()))
        cursor.execute(f"TRUNCATE {TEMP_TABLE}")
    finally:
        cursor.close()
