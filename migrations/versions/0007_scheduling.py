"""Scheduling waste: queues, quotas and gangs (issue: scheduling waste).

- ``pods`` gains ``queue`` (Kueue ClusterQueue or Volcano queue) and its gang: ``gang_kind``,
  ``gang_name``, ``gang_size``.
- ``queue_flavors``: GPU quotas per (cluster, queue kind, queue, flavor, GPU resource).
- ``sched_workloads``: Kueue Workloads and Volcano PodGroups asking for GPUs.

Existing pods keep NULL (not in a queue or gang) until the next collection lists them.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

POD_COLUMNS = (
    ("queue", sa.String(253)),
    ("gang_kind", sa.String(16)),
    ("gang_name", sa.String(253)),
    ("gang_size", sa.Integer()),
)


def upgrade() -> None:
    with op.batch_alter_table("pods") as batch:
        for name, type_ in POD_COLUMNS:
            batch.add_column(sa.Column(name, type_, nullable=True))
    op.create_table(
        "queue_flavors",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("queue", sa.String(253), nullable=False),
        sa.Column("cohort", sa.String(253), nullable=True),
        sa.Column("flavor", sa.String(253), nullable=False),
        sa.Column("gpu_resource", sa.String(64), nullable=False),
        sa.Column("gpu_model", sa.String(128), nullable=True),
        sa.Column("nominal_gpus", sa.Float(), nullable=False),
        sa.Column("borrowing_limit_gpus", sa.Float(), nullable=True),
        sa.Column("lending_limit_gpus", sa.Float(), nullable=True),
        sa.Column("first_seen_ts", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_ts", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_queue_flavors_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queue_flavors")),
        sa.UniqueConstraint(
            "cluster_id",
            "kind",
            "queue",
            "flavor",
            "gpu_resource",
            name=op.f("uq_queue_flavors_cluster_id_kind_queue_flavor_gpu_resource"),
        ),
    )
    op.create_table(
        "sched_workloads",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("uid", sa.String(64), nullable=False),
        sa.Column("queue", sa.String(253), nullable=True),
        sa.Column("flavor", sa.String(253), nullable=True),
        sa.Column("owner_kind", sa.String(64), nullable=True),
        sa.Column("owner_name", sa.String(253), nullable=True),
        sa.Column("gpu_resource", sa.String(64), nullable=True),
        sa.Column("gpus_requested", sa.Float(), nullable=False),
        sa.Column("pod_count", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_ts", sa.BigInteger(), nullable=True),
        sa.Column("admitted_ts", sa.BigInteger(), nullable=True),
        sa.Column("finished_ts", sa.BigInteger(), nullable=True),
        sa.Column("evictions", sa.Integer(), nullable=False),
        sa.Column("last_seen_ts", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_sched_workloads_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sched_workloads")),
        sa.UniqueConstraint(
            "cluster_id",
            "kind",
            "namespace",
            "name",
            "uid",
            name=op.f("uq_sched_workloads_cluster_id_kind_namespace_name_uid"),
        ),
    )
    op.create_index("ix_sched_workloads_queue", "sched_workloads", ["cluster_id", "queue"])


def downgrade() -> None:
    op.drop_index("ix_sched_workloads_queue", table_name="sched_workloads")
    op.drop_table("sched_workloads")
    op.drop_table("queue_flavors")
    with op.batch_alter_table("pods") as batch:
        for name, _ in reversed(POD_COLUMNS):
            batch.drop_column(name)
