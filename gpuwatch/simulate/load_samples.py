"""Write simulated samples into ``gpu_samples`` through the driver (used by ``load``).

``COPY`` on psycopg, else ``executemany`` of multi-row INSERTs (one statement per row costs more
than the row), appended in primary-key order (the table's only index, migration 0013).
The efficiency and health readings that have a value are written with the rest of the row.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sqlalchemy import Table, insert
from sqlalchemy.engine import Connection

from gpuwatch.simulate.generate import UTIL_SIGNAL_NAMES
from gpuwatch.store import partitions
from gpuwatch.store.models import HEALTH_SAMPLE_FIELDS, SAMPLE_FIELDS, UTIL_SIGNALS, GpuSample
from gpuwatch.store.sample_columns import HEALTH_INTEGER_FIELDS

CHUNK_ROWS = 50_000
#: Rows per INSERT statement (at most 6,144 parameters, health readings included: within
#: SQLite's and PostgreSQL's limits).
ROWS_PER_STATEMENT = 256
SAMPLE_COLUMNS = SAMPLE_FIELDS
#: Rows boxed and written at a time (whole INSERT statements).
BLOCK_ROWS = 400 * ROWS_PER_STATEMENT
_PLACEHOLDERS = {"qmark": "?", "format": "%s", "pyformat": "%s"}
#: Columns of many distinct values (each value boxed on its own); the others box each distinct
#: value once.
_MANY_DISTINCT = frozenset(
    {"util_ratio", "fb_used_mib", "power_w", "sm_active_ratio", "sm_occupancy_ratio",
     "tensor_active_ratio", "dram_active_ratio", "pcie_bytes_per_s", "nvlink_bytes_per_s"}
)  # fmt: skip


def _table() -> Table:
    model: type[Any] = GpuSample
    table: Table = model.__table__
    return table


def insert_samples(
    conn: Connection, samples: pd.DataFrame, gpu_ids: NDArray[np.int64], pods: dict[str, int]
) -> int:
    """Write the sample rows (``gpu_ids``: each row's unit id; ``pods``: pod ids by uid), a
    block of rows at a time (boxing every value at once took as much memory as the frame)."""
    table = _table()
    if len(samples):
        partitions.ensure_partitions(conn, int(samples["ts"].min()), int(samples["ts"].max()))
    columns = _ordered_columns(samples, gpu_ids, pods)
    names = tuple(columns)
    for start in range(0, len(samples), BLOCK_ROWS):
        block = {name: values[start : start + BLOCK_ROWS] for name, values in columns.items()}
        _write_rows(conn, table, names, _boxed_block(block))
    return len(samples)


def _ordered_columns(
    samples: pd.DataFrame, gpu_ids: NDArray[np.int64], pods: dict[str, int]
) -> dict[str, NDArray[Any]]:
    """The ``gpu_samples`` columns written, in primary-key order of their rows:
    ``SAMPLE_FIELDS``, then the health readings that have a value (the others stay NULL, as on
    any fresh row). ``pod_id`` holds Python ints and None already."""
    uid = samples["pod_uid"].astype("category")
    known = [pods.get(str(u)) for u in uid.cat.categories]
    if any(k is None for k in known):
        raise ValueError("samples name a pod that is not in the pods frame")
    codes = {name: i for i, name in UTIL_SIGNALS.items()}
    signal = samples["util_signal"].astype(pd.CategoricalDtype(list(UTIL_SIGNAL_NAMES)))
    signal_codes = np.array([codes[n] for n in UTIL_SIGNAL_NAMES], dtype=np.int64)
    columns: dict[str, NDArray[Any]] = {
        "gpu_id": gpu_ids,
        "ts": samples["ts"].to_numpy(np.int64),
        "step_s": samples["step_s"].to_numpy(np.int64),
        "pod_id": np.array([*known, None], dtype=object)[uid.cat.codes.to_numpy()],
        "util_signal": signal_codes[signal.cat.codes.to_numpy()],
        "xid": samples["xid"].to_numpy(np.int64),
    }
    for name in ("util_ratio", "fb_used_mib", "fb_total_mib", "power_w", "temp_c"):
        columns[name] = samples[name].to_numpy(np.float64)
    order = _key_order(_table(), columns)
    ordered = {name: columns[name][order] for name in SAMPLE_COLUMNS}
    ordered |= {name: values[order] for name, values in _health_columns(samples).items()}
    return ordered


def _boxed_block(columns: dict[str, NDArray[Any]]) -> NDArray[np.object_]:
    """Rows of the columns as Python values (None for NULL)."""
    rows = len(next(iter(columns.values())))
    matrix = np.empty((rows, len(columns)), dtype=object)
    for index, (name, values) in enumerate(columns.items()):
        if name == "pod_id":
            matrix[:, index] = values
        elif name in HEALTH_INTEGER_FIELDS:
            matrix[:, index] = _boxed_whole(values)
        else:
            matrix[:, index] = _boxed(values, name not in _MANY_DISTINCT)
    return matrix


def _health_columns(samples: pd.DataFrame) -> dict[str, NDArray[np.float64]]:
    """The frame's health readings with at least one value (frames built before they existed
    have none)."""
    found = {}
    for name in HEALTH_SAMPLE_FIELDS:
        if name in samples.columns:
            values = samples[name].to_numpy(np.float64)
            if not np.isnan(values).all():
                found[name] = values
    return found


def _boxed_whole(values: NDArray[np.float64]) -> NDArray[np.object_]:
    """Whole-number readings (bitmasks, counts) as Python ints, NaN as None."""
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    return np.array([*(round(v) for v in uniques.tolist()), None], dtype=object)[codes]


def _boxed(values: NDArray[Any], few_distinct: bool) -> NDArray[np.object_]:
    """Values as Python objects, NaN as None (PostgreSQL keeps NaN as a value, not NULL).

    A column of ``few_distinct`` values (ids, instants, codes) boxes each distinct value once.
    """
    if few_distinct:
        codes, uniques = pd.factorize(values, use_na_sentinel=True)
        return np.array([*uniques.tolist(), None], dtype=object)[codes]
    boxed = values.astype(object)
    if values.dtype.kind == "f":
        boxed[np.isnan(values)] = None
    return boxed


def _key_order(table: Table, columns: dict[str, NDArray[Any]]) -> NDArray[np.intp]:
    """Row order by the table's primary key: appending in key order keeps B-tree writes
    sequential (the key is the table's only index)."""
    keys = [columns[column.name] for column in table.primary_key.columns]
    order: NDArray[np.intp] = np.lexsort(keys[::-1])
    return order


def _write_rows(
    conn: Connection, table: Table, columns: tuple[str, ...], matrix: NDArray[np.object_]
) -> None:
    """Bulk-write rows of ``columns`` through the driver: COPY on psycopg, else multi-row
    INSERTs."""
    names = ", ".join(columns)
    dbapi: Any = conn.connection.dbapi_connection
    if conn.dialect.driver == "psycopg":
        copy_sql = f"COPY {table.name} ({names}) FROM STDIN"
        with dbapi.cursor() as cursor, cursor.copy(copy_sql) as copy:
            for row in matrix.tolist():
                copy.write_row(row)
        return
    marker = _PLACEHOLDERS.get(conn.dialect.paramstyle)
    if marker is None:
        rows = [dict(zip(columns, r, strict=True)) for r in matrix.tolist()]
        conn.execute(insert(table), rows)
        return
    one = "(" + ", ".join([marker] * len(columns)) + ")"
    full = len(matrix) // ROWS_PER_STATEMENT * ROWS_PER_STATEMENT
    grouped = matrix[:full].reshape(-1, ROWS_PER_STATEMENT * len(columns))
    cursor = dbapi.cursor()
    try:
        # Names come from the schema; every value is a bound parameter.
        sql = f"INSERT INTO {table.name} ({names}) VALUES "  # noqa: S608
        for chunk in _chunks(grouped.tolist(), CHUNK_ROWS // ROWS_PER_STATEMENT):
            cursor.executemany(sql + ", ".join([one] * ROWS_PER_STATEMENT), chunk)
        if full < len(matrix):
            cursor.executemany(sql + one, matrix[full:].tolist())
    finally:
        cursor.close()


def _chunks(rows: list[Any], size: int) -> Iterable[list[Any]]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]
