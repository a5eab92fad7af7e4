"""Hourly roll-ups of GPU samples, and the roll-up state (idle threshold, raw retention).

Existing samples are rolled up at the default idle threshold (5 %); `gpuwatch db rollup
--rebuild` recomputes them at the configured one.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copy of the roll-up of gpuwatch.store.rollup as of this revision.
BACKFILL = """
INSERT INTO gpu_samples_hourly (hour_ts, gpu_id, pod_id, samples, step_s, first_ts, last_ts,
    data_s, used_s, idle_s, util_max, util_signal, fb_used_max_mib, fb_total_mib, power_w_sum,
    power_n, temp_max_c, xid)
SELECT (ts / 3600) * 3600, gpu_id, COALESCE(pod_id, 0),
    COUNT(*), MAX(step_s), MIN(ts), MAX(ts),
    SUM(CASE WHEN util_ratio IS NULL THEN 0 ELSE step_s END),
    SUM(CASE WHEN util_ratio IS NULL OR util_ratio <= 0 THEN 0.0
             WHEN util_ratio >= 1 THEN step_s * 1.0 ELSE util_ratio * step_s END),
    SUM(CASE WHEN util_ratio IS NOT NULL AND util_ratio < 0.05 THEN step_s ELSE 0 END),
    MAX(util_ratio), MAX(util_signal), MAX(fb_used_mib), MAX(fb_total_mib),
    SUM(power_w), COUNT(power_w), MAX(temp_c), MAX(xid)
FROM gpu_samples
GROUP BY (ts / 3600) * 3600, gpu_id, COALESCE(pod_id, 0)
"""


def upgrade() -> None:
    op.create_table(
        "rollup_state",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("idle_util_pct", sa.Float(), nullable=False),
        sa.Column("updated_ts", sa.BigInteger(), nullable=False),
        sa.Column("raw_kept_from_ts", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rollup_state")),
    )
    op.create_table(
        "gpu_samples_hourly",
        sa.Column("hour_ts", sa.BigInteger(), nullable=False),
        sa.Column("gpu_id", sa.Integer(), nullable=False),
        sa.Column("pod_id", sa.Integer(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("step_s", sa.Integer(), nullable=False),
        sa.Column("first_ts", sa.BigInteger(), nullable=False),
        sa.Column("last_ts", sa.BigInteger(), nullable=False),
        sa.Column("data_s", sa.Integer(), nullable=False),
        sa.Column("used_s", sa.Float(), nullable=False),
        sa.Column("idle_s", sa.Integer(), nullable=False),
        sa.Column("util_max", sa.Float(), nullable=True),
        sa.Column("util_signal", sa.SmallInteger(), nullable=True),
        sa.Column("fb_used_max_mib", sa.Float(), nullable=True),
        sa.Column("fb_total_mib", sa.Float(), nullable=True),
        sa.Column("power_w_sum", sa.Float(), nullable=True),
        sa.Column("power_n", sa.Integer(), nullable=False),
        sa.Column("temp_max_c", sa.Float(), nullable=True),
        sa.Column("xid", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["gpu_id"],
            ["gpus.id"],
            name=op.f("fk_gpu_samples_hourly_gpu_id_gpus"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("hour_ts", "gpu_id", "pod_id", name=op.f("pk_gpu_samples_hourly")),
        sqlite_with_rowid=False,
    )
    op.create_index(
        "ix_gpu_samples_hourly_gpu_id_hour_ts",
        "gpu_samples_hourly",
        ["gpu_id", "hour_ts"],
        unique=False,
    )
    op.execute(BACKFILL)
    state = sa.table(
        "rollup_state",
        sa.column("id", sa.Integer),
        sa.column("idle_util_pct", sa.Float),
        sa.column("updated_ts", sa.BigInteger),
    )
    op.bulk_insert(state, [{"id": 1, "idle_util_pct": 5.0, "updated_ts": int(time.time())}])


def downgrade() -> None:
    op.drop_index("ix_gpu_samples_hourly_gpu_id_hour_ts", table_name="gpu_samples_hourly")
    op.drop_table("gpu_samples_hourly")
    op.drop_table("rollup_state")
