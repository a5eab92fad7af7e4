"""Raw samples keep their primary key ``(ts, gpu_id)`` only: the unique index ``(gpu_id, ts)``
goes (issue: scale out).

Every sample written paid for two B-trees; the second served one GPU unit's history, which is
now read through the primary key, one probe per stored instant (docs/storage.md#raw-samples).
Upserts name the primary key as their conflict target. PostgreSQL: dropping the index of the
partitioned table drops it from every partition. The downgrade builds the index again.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLE = "gpu_samples"
_INDEX = "ix_gpu_samples_gpu_id_ts"


def upgrade() -> None:
    op.drop_index(_INDEX, table_name=_TABLE)


def downgrade() -> None:
    op.create_index(_INDEX, _TABLE, ["gpu_id", "ts"], unique=True)
