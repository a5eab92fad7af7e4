"""Daily sums of the health roll-up, which a window's efficiency figures read (issue: scale out).

- ``gpu_health_daily``: per UTC day, GPU unit and pod, the sums of ``gpu_health_hourly`` that
  add up over hours, and the day's first failing event (docs/storage.md#daily-sums).

The days whose sums were built before this revision are recorded as not built: the next
``gpuwatch collect`` builds both sums of each (until then pages read those days' hourly rows).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "gpu_health_daily",
        sa.Column("day_ts", sa.BigInteger(), nullable=False),
        sa.Column("gpu_id", sa.Integer(), nullable=False),
        sa.Column("pod_id", sa.Integer(), nullable=False),
        sa.Column("data_s", sa.BigInteger(), nullable=False),
        sa.Column("clock_data_s", sa.BigInteger(), nullable=False),
        sa.Column("throttled_data_s", sa.Float(), nullable=False),
        sa.Column("low_sm_data_s", sa.Float(), nullable=False),
        sa.Column("inefficient_data_s", sa.Float(), nullable=False),
        sa.Column("engine_weighted_s", sa.Float(), nullable=False),
        sa.Column("engine_weight_s", sa.BigInteger(), nullable=False),
        sa.Column("engine_hours", sa.Integer(), nullable=False),
        sa.Column("sm_active_weighted_s", sa.Float(), nullable=False),
        sa.Column("sm_active_weight_s", sa.BigInteger(), nullable=False),
        sa.Column("sm_active_hours", sa.Integer(), nullable=False),
        sa.Column("sm_occupancy_weighted_s", sa.Float(), nullable=False),
        sa.Column("sm_occupancy_weight_s", sa.BigInteger(), nullable=False),
        sa.Column("sm_occupancy_hours", sa.Integer(), nullable=False),
        sa.Column("tensor_active_weighted_s", sa.Float(), nullable=False),
        sa.Column("tensor_active_weight_s", sa.BigInteger(), nullable=False),
        sa.Column("tensor_active_hours", sa.Integer(), nullable=False),
        sa.Column("dram_active_weighted_s", sa.Float(), nullable=False),
        sa.Column("dram_active_weight_s", sa.BigInteger(), nullable=False),
        sa.Column("dram_active_hours", sa.Integer(), nullable=False),
        sa.Column("pcie_bytes_per_s_sum", sa.Float(), nullable=False),
        sa.Column("pcie_bytes_per_s_hours", sa.Integer(), nullable=False),
        sa.Column("nvlink_bytes_per_s_sum", sa.Float(), nullable=False),
        sa.Column("nvlink_bytes_per_s_hours", sa.Integer(), nullable=False),
        sa.Column("fail_since_ts", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["gpu_id"],
            ["gpus.id"],
            name=op.f("fk_gpu_health_daily_gpu_id_gpus"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("day_ts", "gpu_id", "pod_id", name=op.f("pk_gpu_health_daily")),
    )
    # Built days have no health sums yet: the next collection builds them again, with both.
    op.execute("UPDATE gpu_daily_state SET built_version = NULL")


def downgrade() -> None:
    op.drop_table("gpu_health_daily")
