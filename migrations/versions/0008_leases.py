"""Leases: one collector of several replicas collects (issue: scale out).

- ``leases``: one row per collection scope, held by one ``collect --follow`` replica until it
  expires (docs/architecture.md).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("holder", sa.String(253), nullable=False),
        sa.Column("acquired_ts", sa.BigInteger(), nullable=False),
        sa.Column("renewed_ts", sa.BigInteger(), nullable=False),
        sa.Column("expires_ts", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_leases")),
    )


def downgrade() -> None:
    op.drop_table("leases")
