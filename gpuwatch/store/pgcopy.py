"""Bulk writes of samples on PostgreSQL with binary ``COPY`` (psycopg 3's ``cursor.copy``).

Where no sample is stored yet in the page's time range (a backfill, or the newest minute of
``collect --follow``), the rows are copied straight into ``gpu_samples``. Otherwise, and when a
concurrent writer got there first, they are copied into a temporary table and moved with one
``INSERT ... SELECT ... ON CONFLICT (gpu_id, ts) DO UPDATE``.

The COPY rows are built with numpy, whole columns at a time: each value in the column's own
binary type, and a missing reading (NaN) sent as NULL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import BigInteger, Connection, Float, Integer, SmallInteger

from gpuwatch.store.models import SAMPLE_FIELDS, GpuSample

SAMPLES_TABLE = GpuSample.__tablename__
TEMP_TABLE = "gpuwatch_samples_in"
#: Rows per ``COPY`` write (about 10 MB).
_ROWS_PER_WRITE = 100_000
_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_TRAILER = b"\xff\xff"


def _wire_type(column_type: Any) -> str:
    """The big-endian numpy type of a column's binary COPY format."""
    for sql_type, wire in ((BigInteger, ">i8"), (SmallInteger, ">i2"), (Integer, ">i4")):
        if isinstance(column_type, sql_type):
            return wire
    assert isinstance(column_type, Float), column_type
    return ">f8"


_WIRE = {name: _wire_type(GpuSample.__table__.c[name].type) for name in SAMPLE_FIELDS}
_ROW = np.dtype(
    [("fields", ">i2")]
    + [item for name in SAMPLE_FIELDS for item in ((f"{name}_len", ">i4"), (name, _WIRE[name]))]
)

_OFFSETS = {name: int(_ROW.fields[name][1]) for name in SAMPLE_FIELDS} if _ROW.fields else {}


def binary_rows(columns: Sequence[np.ndarray], start: int, stop: int) -> bytes:
    """Rows ``start:stop`` in COPY's binary format (no file header or trailer).

    Every row is first laid out at full width; the value bytes of NULL fields are then cut out
    with one boolean mask over the bytes (a NULL is its length, -1, and nothing else).
    """
    count = stop - start
    out = np.zeros(count, dtype=_ROW)
    out["fields"] = len(SAMPLE_FIELDS)
    keep = np.ones((count, _ROW.itemsize), dtype=bool)
    for name, column in zip(SAMPLE_FIELDS, columns, strict=True):
        values = column[start:stop]
        width = np.dtype(_WIRE[name]).itemsize
        missing = np.isnan(values) if values.dtype.kind == "f" else None
        if missing is None or not missing.any():
            out[f"{name}_len"] = width
            out[name] = values
            continue
        out[f"{name}_len"] = np.where(missing, -1, width)
        out[name] = np.where(missing, 0, values)
        offset = _OFFSETS[name]
        keep[:, offset : offset + width] = ~missing[:, None]
    raw = out.view(np.uint8).reshape(count, _ROW.itemsize)
    return bytes(raw[keep]) if not keep.all() else out.tobytes()


def _copy(cursor: Any, table: str, columns: Sequence[np.ndarray]) -> None:
    sql = f"COPY {table} ({', '.join(SAMPLE_FIELDS)}) FROM STDIN (FORMAT BINARY)"
    with cursor.copy(sql) as copy:
        copy.write(_HEADER)
        count = len(columns[0])
        for start in range(0, count, _ROWS_PER_WRITE):
            copy.write(binary_rows(columns, start, min(start + _ROWS_PER_WRITE, count)))
        copy.write(_TRAILER)


def _any_stored(cursor: Any, first_ts: int, last_ts: int) -> bool:
    """Whether any sample is stored between the two instants (the table's key starts with ts)."""
    sql = f"SELECT 1 FROM {SAMPLES_TABLE} WHERE ts >= %s AND ts <= %s LIMIT 1"  # noqa: S608
    cursor.execute(sql, (first_ts, last_ts))
    return cursor.fetchone() is not None


def _copy_direct(cursor: Any, columns: Sequence[np.ndarray]) -> bool:
    """Copy straight into ``gpu_samples``; False (and nothing written) on a stored duplicate."""
    import psycopg  # only ever needed on PostgreSQL

    cursor.execute("SAVEPOINT gpuwatch_samples")
    try:
        _copy(cursor, SAMPLES_TABLE, columns)
    except psycopg.errors.UniqueViolation:
        cursor.execute("ROLLBACK TO SAVEPOINT gpuwatch_samples")
        copied = False
    else:
        copied = True
    cursor.execute("RELEASE SAVEPOINT gpuwatch_samples")
    return copied


def _upsert_via_temp(cursor: Any, columns: Sequence[np.ndarray]) -> None:
    cursor.execute(
        f"CREATE TEMPORARY TABLE IF NOT EXISTS {TEMP_TABLE} (LIKE {SAMPLES_TABLE}) ON COMMIT DROP"
    )
    _copy(cursor, TEMP_TABLE, columns)
    names = ", ".join(SAMPLE_FIELDS)
    updates = ", ".join(f"{name} = excluded.{name}" for name in SAMPLE_FIELDS[2:])
    cursor.execute(
        f"INSERT INTO {SAMPLES_TABLE} ({names}) SELECT {names} FROM {TEMP_TABLE} "  # noqa: S608
        f"ON CONFLICT (gpu_id, ts) DO UPDATE SET {updates}"
    )
    cursor.execute(f"TRUNCATE {TEMP_TABLE}")


def write_samples(conn: Connection, columns: Sequence[np.ndarray]) -> None:
    """Upsert the rows of columns given in :data:`SAMPLE_FIELDS` order, in their order (unique
    on (gpu_id, ts))."""
    driver = conn.connection.driver_connection  # psycopg's own connection, for cursor.copy
    assert driver is not None
    cursor = driver.cursor()
    try:
        ts = columns[SAMPLE_FIELDS.index("ts")]
        if not _any_stored(cursor, int(ts.min()), int(ts.max())) and _copy_direct(cursor, columns):
            return
        _upsert_via_temp(cursor, columns)
    finally:
        cursor.close()
