"""Initial schema: clusters, nodes, GPU units, namespaces, pods, GPU samples, collection state.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "clusters",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_clusters")),
        sa.UniqueConstraint("name", name=op.f("uq_clusters_name")),
    )
    op.create_table(
        "collection_state",
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("watermark_ts", sa.BigInteger(), nullable=False),
        sa.Column("updated_ts", sa.BigInteger(), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_collection_state_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("cluster_id", "source", name=op.f("pk_collection_state")),
    )
    op.create_table(
        "namespaces",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("team", sa.String(length=128), nullable=True),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("last_seen_ts", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_namespaces_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_namespaces")),
        sa.UniqueConstraint("cluster_id", "name", name=op.f("uq_namespaces_cluster_id_name")),
    )
    op.create_table(
        "nodes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("gpu_model", sa.String(length=128), nullable=True),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("gpu_memory_mib", sa.Integer(), nullable=True),
        sa.Column("capacity_type", sa.String(length=16), nullable=False),
        sa.Column("instance_type", sa.String(length=64), nullable=True),
        sa.Column("mig_capable", sa.Boolean(), nullable=False),
        sa.Column("mig_strategy", sa.String(length=16), nullable=True),
        sa.Column("mig_config", sa.String(length=64), nullable=True),
        sa.Column("timeslice_replicas", sa.Integer(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("first_seen_ts", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_ts", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_nodes_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nodes")),
        sa.UniqueConstraint("cluster_id", "name", name=op.f("uq_nodes_cluster_id_name")),
    )
    op.create_table(
        "gpus",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=True),
        sa.Column("uuid", sa.String(length=64), nullable=False),
        sa.Column("mig_gi_id", sa.Integer(), nullable=False),
        sa.Column("slot", sa.SmallInteger(), nullable=False),
        sa.Column("gpu_index", sa.Integer(), nullable=True),
        sa.Column("device", sa.String(length=32), nullable=True),
        sa.Column("model_name", sa.String(length=128), nullable=True),
        sa.Column("mig_profile", sa.String(length=32), nullable=True),
        sa.Column("timeslice_replicas", sa.Integer(), nullable=False),
        sa.Column("memory_total_mib", sa.Float(), nullable=True),
        sa.Column("first_seen_ts", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_ts", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_gpus_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["node_id"], ["nodes.id"], name=op.f("fk_gpus_node_id_nodes"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gpus")),
        sa.UniqueConstraint(
            "cluster_id",
            "uuid",
            "mig_gi_id",
            "slot",
            name=op.f("uq_gpus_cluster_id_uuid_mig_gi_id_slot"),
        ),
    )
    op.create_table(
        "pods",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("namespace", sa.String(length=253), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("uid", sa.String(length=64), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=True),
        sa.Column("phase", sa.String(length=16), nullable=True),
        sa.Column("workload_kind", sa.String(length=64), nullable=False),
        sa.Column("workload_name", sa.String(length=253), nullable=False),
        sa.Column("team", sa.String(length=128), nullable=False),
        sa.Column("gpu_resource", sa.String(length=64), nullable=True),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("created_ts", sa.BigInteger(), nullable=True),
        sa.Column("started_ts", sa.BigInteger(), nullable=True),
        sa.Column("finished_ts", sa.BigInteger(), nullable=True),
        sa.Column("last_seen_ts", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_pods_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["node_id"], ["nodes.id"], name=op.f("fk_pods_node_id_nodes"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pods")),
        sa.UniqueConstraint(
            "cluster_id",
            "namespace",
            "name",
            "uid",
            name=op.f("uq_pods_cluster_id_namespace_name_uid"),
        ),
    )
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.create_index(
            "ix_pods_workload",
            ["cluster_id", "namespace", "workload_kind", "workload_name"],
            unique=False,
        )

    op.create_table(
        "gpu_samples",
        sa.Column("ts", sa.BigInteger(), nullable=False),
        sa.Column("gpu_id", sa.Integer(), nullable=False),
        sa.Column("step_s", sa.Integer(), nullable=False),
        sa.Column("pod_id", sa.Integer(), nullable=True),
        sa.Column("util_ratio", sa.Float(), nullable=True),
        sa.Column("util_signal", sa.SmallInteger(), nullable=True),
        sa.Column("fb_used_mib", sa.Float(), nullable=True),
        sa.Column("fb_total_mib", sa.Float(), nullable=True),
        sa.Column("power_w", sa.Float(), nullable=True),
        sa.Column("temp_c", sa.Float(), nullable=True),
        sa.Column("xid", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["gpu_id"], ["gpus.id"], name=op.f("fk_gpu_samples_gpu_id_gpus"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["pod_id"], ["pods.id"], name=op.f("fk_gpu_samples_pod_id_pods"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("ts", "gpu_id", name=op.f("pk_gpu_samples")),
        sqlite_with_rowid=False,
    )
    with op.batch_alter_table("gpu_samples", schema=None) as batch_op:
        batch_op.create_index("ix_gpu_samples_gpu_id_ts", ["gpu_id", "ts"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("gpu_samples", schema=None) as batch_op:
        batch_op.drop_index("ix_gpu_samples_gpu_id_ts")

    op.drop_table("gpu_samples")
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.drop_index("ix_pods_workload")

    op.drop_table("pods")
    op.drop_table("gpus")
    op.drop_table("nodes")
    op.drop_table("namespaces")
    op.drop_table("collection_state")
    op.drop_table("clusters")
