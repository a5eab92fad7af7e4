"""Day partitions of ``gpu_samples`` on PostgreSQL (docs/storage.md#retention).

From schema 0009, PostgreSQL keeps raw samples in a table partitioned by range of ``ts``: one
partition per UTC day, ``gpu_samples_pYYYYMMDD`` holding ``[day, day + 1 d)``, and a DEFAULT
partition ``gpu_samples_default`` for rows of a day without its own partition. Writers create the
day partitions of their samples before writing them (:func:`ensure_partitions`); retention drops
whole days (:func:`drop_partitions_before`). On SQLite, and on a PostgreSQL table that is not
partitioned, both do nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, text

from gpuwatch.domain.durations import DAY_S
from gpuwatch.store.models import GpuSample

SAMPLES_TABLE = GpuSample.__tablename__
DEFAULT_PARTITION = f"{SAMPLES_TABLE}_default"
_DAY_NAME = re.compile(rf"{SAMPLES_TABLE}_p(\d{{8}})")
_COLUMNS = ", ".join(column.name for column in GpuSample.__table__.columns)


@dataclass(frozen=True)
class DayPartition:
    """The partition of the samples with ``start_ts <= ts < end_ts``."""

    name: str
    start_ts: int
    end_ts: int


def day_floor(ts: int) -> int:
    """The start of ``ts``'s UTC day."""
    return int(ts) - int(ts) % DAY_S


def partition_name(day_ts: int) -> str:
    """The name of the partition of the UTC day starting at ``day_ts``."""
    return f"{SAMPLES_TABLE}_p{datetime.fromtimestamp(day_ts, UTC):%Y%m%d}"


def day_partition(name: str) -> DayPartition | None:
    """The day partition called ``name``; None for any other name."""
    found = _DAY_NAME.fullmatch(name)
    if found is None:
        return None
    start = int(datetime.strptime(found.group(1), "%Y%m%d").replace(tzinfo=UTC).timestamp())
    return DayPartition(name, start, start + DAY_S)


def is_partition_name(name: str) -> bool:
    """Whether ``name`` is one of the partitions of ``gpu_samples`` (a day's or the DEFAULT)."""
    return name == DEFAULT_PARTITION or day_partition(name) is not None


def days_between(start_ts: int, end_ts: int) -> list[int]:
    """The starts of the UTC days from ``start_ts``'s to ``end_ts``'s, both included."""
    return list(range(day_floor(start_ts), day_floor(end_ts) + 1, DAY_S))


def is_partitioned(conn: Connection) -> bool:
    """Whether the store keeps ``gpu_samples`` as a partitioned table (PostgreSQL from 0009)."""
    if conn.dialect.name != "postgresql":
        return False
    found = conn.execute(
        text("SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass(:table)"),
        {"table": SAMPLES_TABLE},
    )
    return found.first() is not None


def attached(conn: Connection) -> set[str]:
    """The names of the partitions attached to ``gpu_samples`` (none where it is not
    partitioned)."""
    if conn.dialect.name != "postgresql":
        return set()
    rows = conn.execute(
        text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = to_regclass(:table)"
        ),
        {"table": SAMPLES_TABLE},
    )
    return {str(row[0]) for row in rows}


def day_partitions(conn: Connection) -> list[DayPartition]:
    """The day partitions of ``gpu_samples``, oldest first."""
    found = (day_partition(name) for name in attached(conn))
    return sorted((p for p in found if p is not None), key=lambda p: p.start_ts)


def ensure_partitions(conn: Connection, start_ts: int, end_ts: int) -> list[str]:
    """Create the missing day partitions from ``start_ts``'s day to ``end_ts``'s; returns the
    names created (none on SQLite or an unpartitioned table).

    Call it before the transaction touches ``gpu_samples`` (attaching a partition locks the
    DEFAULT partition). Writers doing it at once take turns on a SHARE UPDATE EXCLUSIVE lock of
    the table, which neither readers nor writers of samples wait for; the second finds the
    first's partitions and creates nothing. Rows of a new partition's day already in the DEFAULT
    partition are moved into it.
    """
    if not is_partitioned(conn):
        return []
    wanted = {partition_name(day): day for day in days_between(start_ts, end_ts)}
    if not wanted.keys() - attached(conn):
        return []
    conn.execute(text(f"LOCK TABLE {SAMPLES_TABLE} IN SHARE UPDATE EXCLUSIVE MODE"))
    present = attached(conn)  # read again: another writer may have created some meanwhile
    created = []
    for name, day in sorted(wanted.items()):
        if name not in present:
            _create(conn, DayPartition(name, day, day + DAY_S), DEFAULT_PARTITION in present)
            created.append(name)
    return created


def _create(conn: Connection, part: DayPartition, has_default: bool) -> None:
    """A table for ``part``, filled with its rows from the DEFAULT partition, then attached."""
    conn.execute(text(f"CREATE TABLE {part.name} (LIKE {SAMPLES_TABLE} INCLUDING DEFAULTS)"))
    if has_default:
        conn.execute(
            text(
                f"WITH moved AS (DELETE FROM {DEFAULT_PARTITION}"  # noqa: S608 - constants only
                f" WHERE ts >= {part.start_ts} AND ts < {part.end_ts} RETURNING {_COLUMNS})"
                f" INSERT INTO {part.name} ({_COLUMNS}) SELECT {_COLUMNS} FROM moved"
            )
        )
    conn.execute(
        text(
            f"ALTER TABLE {SAMPLES_TABLE} ATTACH PARTITION {part.name}"
            f" FOR VALUES FROM ({part.start_ts}) TO ({part.end_ts})"
        )
    )


def drop_partitions_before(conn: Connection, cut_ts: int) -> list[str]:
    """Drop the day partitions that end at or before ``cut_ts`` (every row older than the cut);
    returns their names, oldest first (none on SQLite or an unpartitioned table)."""
    if not is_partitioned(conn):
        return []
    dropped = [p.name for p in day_partitions(conn) if p.end_ts <= cut_ts]
    for name in dropped:
        conn.execute(text(f"DROP TABLE {name}"))
    return dropped
