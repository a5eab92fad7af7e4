"""Per-hour detail for recommendations: pod and workload histograms (docs/storage.md#detail),
and the cloud provider of each node.

Existing hours get their detail from `gpuwatch db rollup`, which rebuilds every hour that
still has raw samples; until then reports read raw samples for windows whose hours lack it.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("nodes", sa.Column("provider", sa.String(length=32), nullable=True))
    op.create_table(
        "pod_samples_hourly",
        sa.Column("hour_ts", sa.BigInteger(), nullable=False),
        sa.Column("pod_id", sa.Integer(), nullable=False),
        sa.Column("gpu_model", sa.String(length=128), nullable=True),
        sa.Column("data_s", sa.Integer(), nullable=False),
        sa.Column("held_max", sa.Integer(), nullable=False),
        sa.Column("busy_hist", sa.LargeBinary(), nullable=False),
        sa.Column("util_hist", sa.LargeBinary(), nullable=False),
        sa.Column("fb_used_hist", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("hour_ts", "pod_id", name=op.f("pk_pod_samples_hourly")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "workload_samples_hourly",
        sa.Column("hour_ts", sa.BigInteger(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("namespace", sa.String(length=253), nullable=False),
        sa.Column("workload_kind", sa.String(length=64), nullable=False),
        sa.Column("workload_name", sa.String(length=253), nullable=False),
        sa.Column("gpu_model", sa.String(length=128), nullable=False),
        sa.Column("data_s", sa.Integer(), nullable=False),
        sa.Column("util_sum_bin_s", sa.BigInteger(), nullable=False),
        sa.Column("held_hist", sa.LargeBinary(), nullable=False),
        sa.Column("util_sum_hist", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint(
            "hour_ts",
            "cluster_id",
            "namespace",
            "workload_kind",
            "workload_name",
            "gpu_model",
            name=op.f("pk_workload_samples_hourly"),
        ),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("workload_samples_hourly")
    op.drop_table("pod_samples_hourly")
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("provider")
