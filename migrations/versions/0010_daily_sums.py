"""Daily sums of the hourly roll-ups, which the pages' windows read (issue: scale out).

- ``gpu_samples_daily``: per UTC day, GPU unit and pod, the sums of ``gpu_samples_hourly``
  that the cost figures are linear in, and the unit's health peaks and signal counts.
- ``gpu_daily_state``: per day, the version its hourly rows are at and the version its sums
  were built from (docs/storage.md#daily-sums).

The days that already have hourly rows are recorded as written and not built: the next
``gpuwatch collect`` builds their sums (until then pages read those days' hourly rows).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DAY_S = 86_400
_PENDING_DAYS = f"""
INSERT INTO gpu_daily_state (day_ts, version, built_version)
SELECT DISTINCT (hour_ts / {_DAY_S}) * {_DAY_S}, 1, CAST(NULL AS BIGINT) FROM gpu_samples_hourly
"""  # noqa: S608 - constants only


def upgrade() -> None:
    op.create_table(
        "gpu_samples_daily",
        sa.Column("day_ts", sa.BigInteger(), nullable=False),
        sa.Column("gpu_id", sa.Integer(), nullable=False),
        sa.Column("pod_id", sa.Integer(), nullable=False),
        sa.Column("samples", sa.BigInteger(), nullable=False),
        sa.Column("data_s", sa.BigInteger(), nullable=False),
        sa.Column("used_s", sa.Float(), nullable=False),
        sa.Column("idle_s", sa.BigInteger(), nullable=False),
        sa.Column("first_ts", sa.BigInteger(), nullable=False),
        sa.Column("last_ts", sa.BigInteger(), nullable=False),
        sa.Column("step_max_s", sa.Integer(), nullable=False),
        sa.Column("prof_samples", sa.BigInteger(), nullable=False),
        sa.Column("dev_samples", sa.BigInteger(), nullable=False),
        sa.Column("fb_used_ratio_max", sa.Float(), nullable=True),
        sa.Column("temp_max_c", sa.Float(), nullable=True),
        sa.Column("power_w_max", sa.Float(), nullable=True),
        sa.Column("xid_max", sa.Integer(), nullable=False),
        sa.Column("xid_hours", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["gpu_id"],
            ["gpus.id"],
            name=op.f("fk_gpu_samples_daily_gpu_id_gpus"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("day_ts", "gpu_id", "pod_id", name=op.f("pk_gpu_samples_daily")),
    )
    op.create_table(
        "gpu_daily_state",
        sa.Column("day_ts", sa.BigInteger(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("built_version", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("day_ts", name=op.f("pk_gpu_daily_state")),
    )

    # Every day that already has hourly rows is pending: the next collection builds its sums.
    op.execute(_PENDING_DAYS)


def downgrade() -> None:
    op.drop_table("gpu_daily_state")
    op.drop_table("gpu_samples_daily")
