"""Raw samples partitioned by day on PostgreSQL, so that retention drops whole days.

PostgreSQL: ``gpu_samples`` becomes a table partitioned by range of ``ts``, with the same
columns, primary key ``(ts, gpu_id)`` and unique index ``(gpu_id, ts)``: one partition per UTC
day that holds samples, plus a DEFAULT partition (docs/storage.md#retention). Every sample is
copied once (the indexes are built after the copy). The downgrade copies them back into one
plain table. SQLite: nothing changes.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from gpuwatch.store.partitions import DEFAULT_PARTITION, partition_name

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLE = "gpu_samples"
_OLD = "gpu_samples_before_0009"
_PK = "pk_gpu_samples"
_INDEX = "ix_gpu_samples_gpu_id_ts"
_DAY_S = 86_400

# The UTC days holding samples, one probe of the primary key per day (not a scan of the rows).
_DAYS_SQL = f"""
WITH RECURSIVE days(day) AS (
    SELECT (SELECT MIN(ts) FROM {_OLD}) / {_DAY_S} * {_DAY_S}
  UNION ALL
    SELECT (SELECT MIN(ts) FROM {_OLD} WHERE ts >= day + {_DAY_S}) / {_DAY_S} * {_DAY_S}
    FROM days WHERE day IS NOT NULL
)
SELECT day FROM days WHERE day IS NOT NULL
"""  # noqa: S608 - constants only


def _set_aside() -> None:
    """Rename the table, its key and its index out of the way of the new table's."""
    op.execute(f"ALTER TABLE {_TABLE} RENAME TO {_OLD}")
    op.execute(f"ALTER TABLE {_OLD} RENAME CONSTRAINT {_PK} TO pk_{_OLD}")
    op.execute(f"ALTER INDEX {_INDEX} RENAME TO ix_{_OLD}_gpu_id_ts")


def _keys() -> None:
    """The primary key and unique index, built once the rows are in (faster than row by row)."""
    op.execute(f"ALTER TABLE {_TABLE} ADD CONSTRAINT {_PK} PRIMARY KEY (ts, gpu_id)")
    op.execute(f"CREATE UNIQUE INDEX {_INDEX} ON {_TABLE} (gpu_id, ts)")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _set_aside()
    op.execute(f"CREATE TABLE {_TABLE} (LIKE {_OLD} INCLUDING DEFAULTS) PARTITION BY RANGE (ts)")
    op.execute(f"CREATE TABLE {DEFAULT_PARTITION} PARTITION OF {_TABLE} DEFAULT")
    for (day,) in op.get_bind().execute(sa.text(_DAYS_SQL)).all():
        op.execute(
            f"CREATE TABLE {partition_name(int(day))} PARTITION OF {_TABLE}"
            f" FOR VALUES FROM ({int(day)}) TO ({int(day) + _DAY_S})"
        )
    op.execute(f"INSERT INTO {_TABLE} SELECT * FROM {_OLD} ORDER BY ts, gpu_id")  # noqa: S608
    op.execute(f"DROP TABLE {_OLD}")
    _keys()


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _set_aside()
    op.execute(f"CREATE TABLE {_TABLE} (LIKE {_OLD} INCLUDING DEFAULTS)")
    op.execute(f"INSERT INTO {_TABLE} SELECT * FROM {_OLD} ORDER BY ts, gpu_id")  # noqa: S608
    op.execute(f"DROP TABLE {_OLD}")  # and its partitions with it
    _keys()
