"""How each GPU is handed out (device plugin, MIG, time-slicing, MPS, DRA), and the Dynamic
Resource Allocation devices that claims hold.

- ``nodes.gpu_sharing``: the node's mode (``device-plugin``, ``time-slice``, ``mps``, ``dra``).
- ``gpus.sharing``: the unit's mode; ``gpus.timeslice_replicas`` is the number of slots its GPU
  (or MIG instance, or DRA device) is split into: a slot's share is 1/R of it.
- ``pods.allocation``: ``dra`` for a pod that holds GPUs through ResourceClaims.
- ``dra_devices``: one row per device a ResourceClaim was allocated, with the GPU it is and the
  pods it is reserved for.

Existing rows keep NULL, read as before (``device-plugin``, or ``mig`` for a MIG instance).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("nodes", sa.Column("gpu_sharing", sa.String(length=16), nullable=True))
    op.add_column("gpus", sa.Column("sharing", sa.String(length=16), nullable=True))
    op.add_column("pods", sa.Column("allocation", sa.String(length=16), nullable=True))
    op.create_table(
        "dra_devices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("claim_namespace", sa.String(length=253), nullable=False),
        sa.Column("claim_name", sa.String(length=253), nullable=False),
        sa.Column("claim_uid", sa.String(length=64), nullable=False),
        sa.Column("request", sa.String(length=253), nullable=False),
        sa.Column("driver", sa.String(length=253), nullable=False),
        sa.Column("pool", sa.String(length=253), nullable=False),
        sa.Column("device", sa.String(length=253), nullable=False),
        sa.Column("node", sa.String(length=253), nullable=True),
        sa.Column("gpu_uuid", sa.String(length=64), nullable=True),
        sa.Column("mig_profile", sa.String(length=32), nullable=True),
        sa.Column("product", sa.String(length=128), nullable=True),
        sa.Column("memory_mib", sa.Integer(), nullable=True),
        sa.Column("consumers", sa.JSON(), nullable=False),
        sa.Column("first_seen_ts", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_ts", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_dra_devices_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dra_devices")),
        sa.UniqueConstraint(
            "cluster_id",
            "claim_uid",
            "driver",
            "pool",
            "device",
            name=op.f("uq_dra_devices_cluster_id_claim_uid_driver_pool_device"),
        ),
    )


def downgrade() -> None:
    op.drop_table("dra_devices")
    for table, column in (("pods", "allocation"), ("gpus", "sharing"), ("nodes", "gpu_sharing")):
        with op.batch_alter_table(table) as batch:
            batch.drop_column(column)
