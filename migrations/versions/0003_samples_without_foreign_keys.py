"""Raw samples carry no foreign keys: the collector writes a page's GPU and pod rows in the
same transaction before its samples, and checking two parent rows per sample was two thirds of
PostgreSQL's ingest time (docs/storage.md#integrity).

On SQLite the table is rebuilt (SQLite cannot drop a constraint): every raw sample is copied
once, so upgrading a large store takes a while (about a second per million samples).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FOREIGN_KEYS = (
    ("fk_gpu_samples_gpu_id_gpus", ["gpu_id"], "gpus", "CASCADE"),
    ("fk_gpu_samples_pod_id_pods", ["pod_id"], "pods", "SET NULL"),
)
_COLUMNS = "ts, gpu_id, step_s, pod_id, util_ratio, util_signal, fb_used_mib, fb_total_mib, " \
    "power_w, temp_c, xid"  # fmt: skip


def _samples_table(name: str, foreign_keys: bool) -> None:
    constraints: list[sa.Constraint] = [
        sa.PrimaryKeyConstraint("ts", "gpu_id", name=op.f("pk_gpu_samples"))
    ]
    if foreign_keys:
        constraints += [
            sa.ForeignKeyConstraint(columns, [f"{parent}.id"], name=op.f(fk), ondelete=on_delete)
            for fk, columns, parent, on_delete in _FOREIGN_KEYS
        ]
    op.create_table(
        name,
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
        *constraints,
        sqlite_with_rowid=False,
    )


def _rebuild_sqlite(foreign_keys: bool) -> None:
    """Copy ``gpu_samples`` into a table of the new shape, keeping WITHOUT ROWID and its index."""
    _samples_table("gpu_samples_rebuilt", foreign_keys)
    op.execute(
        f"INSERT INTO gpu_samples_rebuilt ({_COLUMNS}) "  # noqa: S608 - constants only
        f"SELECT {_COLUMNS} FROM gpu_samples ORDER BY ts, gpu_id"
    )
    op.drop_index("ix_gpu_samples_gpu_id_ts", table_name="gpu_samples")
    op.drop_table("gpu_samples")
    op.rename_table("gpu_samples_rebuilt", "gpu_samples")
    op.create_index("ix_gpu_samples_gpu_id_ts", "gpu_samples", ["gpu_id", "ts"], unique=True)


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_sqlite(foreign_keys=False)
        return
    for name, _, _, _ in _FOREIGN_KEYS:
        op.drop_constraint(name, "gpu_samples", type_="foreignkey")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_sqlite(foreign_keys=True)
        return
    for name, columns, parent, on_delete in _FOREIGN_KEYS:
        op.create_foreign_key(name, "gpu_samples", parent, columns, ["id"], ondelete=on_delete)
