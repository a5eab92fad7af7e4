"""Rows straight to and from the database driver, for hundreds of thousands of rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection


def driver_rows(conn: Connection, sql: str, *bounds: int) -> list[Any]:
    """The driver's own row tuples of ``sql`` (``{mark}`` its parameter marks) with ``bounds``
    bound, inside ``conn`` (no per-row objects of SQLAlchemy: numpy and pandas read plain
    tuples several times faster)."""
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    cursor = conn.connection.cursor()
    try:
        cursor.execute(sql.format(mark=mark), tuple(int(b) for b in bounds))
        return list(cursor.fetchall())
    finally:
        cursor.close()


def insert_tuples(
    conn: Connection, table: str, names: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """Insert ``rows`` (values in ``names`` order) into ``table`` with one ``executemany`` of
    plain tuples, inside ``conn`` (no per-row parameter dictionaries)."""
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    sql = (
        f"INSERT INTO {table} ({', '.join(names)}) "  # noqa: S608 - names from the models
        f"VALUES ({', '.join([mark] * len(names))})"
    )
    conn.exec_driver_sql(sql, list(rows))
