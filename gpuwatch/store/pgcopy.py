"""Bulk writes of samples on PostgreSQL with binary ``COPY`` (psycopg 3's ``cursor.copy``).

Where no sample is stored yet in the page's time range (a backfill, or the newest minute of
``collect --follow``), the rows are copied straight into ``gpu_samples``. Otherwise, and when a
concurrent writer got there first, they are copied into a temporary table and moved with one
``INSERT ... SELECT ... ON CONFLICT (ts, gpu_id) DO UPDATE``.

The COPY rows are built with numpy, whole columns at a time: each value in the column's own
binary type, and a missing reading (NaN) sent as NULL.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import BigInteger, Connection, Float, Integer, SmallInteger

from gpuwatch.store.models import HEALTH_SAMPLE_FIELDS, SAMPLE_FIELDS, GpuSample

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


#: Every sample column's wire type (the health readings included).
_WIRE = {
    name: _wire_type(GpuSample.__table__.c[name].type)
    for name in (*SAMPLE_FIELDS, *HEALTH_SAMPLE_FIELDS)
}


@functools.lru_cache(maxsize=16)
def _layout(names: tuple[str, ...]) -> tuple[np.dtype[Any], dict[str, int]]:
    """The full-width binary row of ``names`` and each value's byte offset in it."""
    row = np.dtype(
        [("fields", ">i2")]
        + [item for name in names for item in ((f"{name}_len", ">i4"), (name, _WIRE[name]))]
    )
    assert row.fields is not None
    return row, {name: int(row.fields[name][1]) for name in names}


def binary_rows(
    columns: Sequence[np.ndarray], start: int, stop: int, names: Sequence[str] = SAMPLE_FIELDS
) -> bytes:
    """Rows ``start:stop`` of the columns of ``names`` in COPY's binary format (no file header
    or trailer).

    Every row is first laid out at full width; the value bytes of NULL fields are then cut out
    with one boolean mask over the bytes (a NULL is its length, -1, and nothing else).
    """
    layout, offsets = _layout(tuple(names))
    count = stop - start
    out = np.zeros(count, dtype=layout)
    out["fields"] = len(names)
    keep = np.ones((count, layout.itemsize), dtype=bool)
    for name, column in zip(names, columns, strict=True):
        values = column[start:stop]
        width = np.dtype(_WIRE[name]).itemsize
        missing = np.isnan(values) if values.dtype.kind == "f" else None
        if missing is None or not missing.any():
            out[f"{name}_len"] = width
            out[name] = values
            continue
        out[f"{name}_len"] = np.where(missing, -1, width)
        out[name] = np.where(missing, 0, values)
        offset = offsets[name]
        keep[:, offset : offset + width] = ~missing[:, None]
    raw = out.view(np.uint8).reshape(count, layout.itemsize)
    return bytes(raw[keep]) if not keep.all() else out.tobytes()


def _copy(cursor: Any, table: str, columns: Sequence[np.ndarray], names: Sequence[str]) -> None:
    sql = f"COPY {table} ({', '.join(names)}) FROM STDIN (FORMAT BINARY)"
    with cursor.copy(sql) as copy:
        copy.write(_HEADER)
        count = len(columns[0])
        for start in range(0, count, _ROWS_PER_WRITE):
            stop = min(start + _ROWS_PER_WRITE, count)
            copy.write(binary_rows(columns, start, stop, names))
        copy.write(_TRAILER)


def _any_stored(cursor: Any, first_ts: int, last_ts: int) -> bool:
    """Whether any sample is stored between the two instants (the table's key starts with ts)."""
    sql = f"SELECT 1 FROM {SAMPLES_TABLE} WHERE ts >= %s AND ts <= %s LIMIT 1"  # noqa: S608
    cursor.execute(sql, (first_ts, last_ts))
    return cursor.fetchone() is not None


def _copy_direct(cursor: Any, columns: Sequence[np.ndarray], names: Sequence[str]) -> bool:
    """Copy straight into ``gpu_samples``; False (and nothing written) on a stored duplicate."""
    import psycopg  # only ever needed on PostgreSQL

    cursor.execute("SAVEPOINT gpuwatch_samples")
    try:
        _copy(cursor, SAMPLES_TABLE, columns, names)
    except psycopg.errors.UniqueViolation:
        cursor.execute("ROLLBACK TO SAVEPOINT gpuwatch_samples")
        copied = False
    else:
        copied = True
    cursor.execute("RELEASE SAVEPOINT gpuwatch_samples")
    return copied


def _upsert_via_temp(
    cursor: Any, columns: Sequence[np.ndarray], names: Sequence[str], cleared: Sequence[str]
) -> None:
    cursor.execute(
        f"CREATE TEMPORARY TABLE IF NOT EXISTS {TEMP_TABLE} (LIKE {SAMPLES_TABLE}) ON COMMIT DROP"
    )
    _copy(cursor, TEMP_TABLE, columns, names)
    listed = ", ".join(names)
    updates = ", ".join(
        [f"{name} = excluded.{name}" for name in names[2:]] + [f"{name} = NULL" for name in cleared]
    )
    cursor.execute(
        f"INSERT INTO {SAMPLES_TABLE} ({listed}) SELECT {listed} FROM {TEMP_TABLE} "  # noqa: S608
        f"ON CONFLICT (ts, gpu_id) DO UPDATE SET {updates}"
    )
    cursor.execute(f"TRUNCATE {TEMP_TABLE}")


def write_samples(
    conn: Connection,
    columns: Sequence[np.ndarray],
    names: Sequence[str] = SAMPLE_FIELDS,
    cleared: Sequence[str] = (),
) -> None:
    """Upsert the rows of ``columns`` (those of ``names``, :data:`SAMPLE_FIELDS` first), in
    their order (unique on (ts, gpu_id)); on a stored row the columns of ``cleared`` become
    NULL."""
    driver = conn.connection.driver_connection  # psycopg's own connection, for cursor.copy
    assert driver is not None
    cursor = driver.cursor()
    try:
        ts = columns[list(names).index("ts")]
        fits = not _any_stored(cursor, int(ts.min()), int(ts.max()))
        if fits and _copy_direct(cursor, columns, names):
            return
        _upsert_via_temp(cursor, columns, names, cleared)
    finally:
        cursor.close()
