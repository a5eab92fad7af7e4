"""Daily sums of the recommendation detail, which a window's recommendations read (issue: scale
out).

- ``pod_detail_daily``: per UTC day and pod (and GPU model), its hourly detail summed;
- ``workload_detail_daily``: per UTC day and workload, its histograms summed
  (docs/storage.md#daily-sums).

The days whose sums were built before this revision are recorded as not built: the next
``gpuwatch collect`` builds every sum of each (until then the windows read those days' hourly
rows).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "pod_detail_daily",
        sa.Column("day_ts", sa.BigInteger(), nullable=False),
        sa.Column("pod_id", sa.Integer(), nullable=False),
        sa.Column("hour_ts", sa.BigInteger(), nullable=False),
        sa.Column("gpu_model", sa.String(length=128), nullable=True),
        sa.Column("data_s", sa.BigInteger(), nullable=False),
        sa.Column("held_max", sa.Integer(), nullable=False),
        sa.Column("busy_hist", sa.LargeBinary(), nullable=False),
        sa.Column("util_hist", sa.LargeBinary(), nullable=False),
        sa.Column("fb_used_hist", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("day_ts", "pod_id", "hour_ts", name=op.f("pk_pod_detail_daily")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "workload_detail_daily",
        sa.Column("day_ts", sa.BigInteger(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("namespace", sa.String(length=253), nullable=False),
        sa.Column("workload_kind", sa.String(length=64), nullable=False),
        sa.Column("workload_name", sa.String(length=253), nullable=False),
        sa.Column("gpu_model", sa.String(length=128), nullable=False),
        sa.Column("hour_ts", sa.BigInteger(), nullable=False),
        sa.Column("held_hist", sa.LargeBinary(), nullable=False),
        sa.Column("util_sum_hist", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint(
            "day_ts",
            "cluster_id",
            "namespace",
            "workload_kind",
            "workload_name",
            "gpu_model",
            name=op.f("pk_workload_detail_daily"),
        ),
        sqlite_with_rowid=False,
    )
    # Built days have no detail sums yet: the next collection builds them again, with all.
    op.execute("UPDATE gpu_daily_state SET built_version = NULL")


def downgrade() -> None:
    op.drop_table("workload_detail_daily")
    op.drop_table("pod_detail_daily")
