"""Efficiency and health readings (issue: GPU health and real efficiency).

- ``gpu_samples`` gains the profiling ratios, SM clock, PCIe/NVLink bandwidth, the clock-event
  bitmask and the per-step increases of the ECC, PCIe replay and NVLink error counters (NULL:
  not exported, or no increase).
- ``gpu_health_hourly``: their hourly roll-up, one row per (hour, GPU unit, pod) with any of them.

Existing rows keep NULL: no data, never 0. ``gpuwatch db rollup`` fills the health roll-up of
hours whose raw samples are still kept.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SAMPLE_COLUMNS = (
    ("sm_active_ratio", sa.Float()),
    ("sm_occupancy_ratio", sa.Float()),
    ("tensor_active_ratio", sa.Float()),
    ("dram_active_ratio", sa.Float()),
    ("sm_clock_mhz", sa.Float()),
    ("pcie_bytes_per_s", sa.Float()),
    ("nvlink_bytes_per_s", sa.Float()),
    ("clock_events", sa.Integer()),
    ("ecc_sbe_count", sa.Integer()),
    ("ecc_dbe_count", sa.Integer()),
    ("pcie_replay_count", sa.Integer()),
    ("nvlink_error_count", sa.Integer()),
    ("row_remap_failure", sa.SmallInteger()),
)


def upgrade() -> None:
    with op.batch_alter_table("gpu_samples") as batch:
        for name, type_ in SAMPLE_COLUMNS:
            batch.add_column(sa.Column(name, type_, nullable=True))
    op.create_table(
        "gpu_health_hourly",
        sa.Column("hour_ts", sa.BigInteger(), nullable=False),
        sa.Column("gpu_id", sa.Integer(), nullable=False),
        sa.Column("pod_id", sa.Integer(), nullable=False),
        sa.Column("data_s", sa.Integer(), nullable=False),
        sa.Column("first_ts", sa.BigInteger(), nullable=False),
        sa.Column("last_ts", sa.BigInteger(), nullable=False),
        sa.Column("util_s", sa.Float(), nullable=False),
        sa.Column("util_data_s", sa.Integer(), nullable=False),
        sa.Column("sm_active_s", sa.Float(), nullable=False),
        sa.Column("sm_data_s", sa.Integer(), nullable=False),
        sa.Column("sm_occupancy_s", sa.Float(), nullable=False),
        sa.Column("sm_occupancy_data_s", sa.Integer(), nullable=False),
        sa.Column("tensor_active_s", sa.Float(), nullable=False),
        sa.Column("tensor_data_s", sa.Integer(), nullable=False),
        sa.Column("dram_active_s", sa.Float(), nullable=False),
        sa.Column("dram_data_s", sa.Integer(), nullable=False),
        sa.Column("busy_sm_data_s", sa.Integer(), nullable=False),
        sa.Column("busy_low_sm_s", sa.Integer(), nullable=False),
        sa.Column("busy_tensor_data_s", sa.Integer(), nullable=False),
        sa.Column("busy_no_tensor_s", sa.Integer(), nullable=False),
        sa.Column("clock_data_s", sa.Integer(), nullable=False),
        sa.Column("throttled_s", sa.Integer(), nullable=False),
        sa.Column("thermal_s", sa.Integer(), nullable=False),
        sa.Column("power_cap_s", sa.Integer(), nullable=False),
        sa.Column("hw_slowdown_s", sa.Integer(), nullable=False),
        sa.Column("sm_clock_mhz_sum", sa.Float(), nullable=True),
        sa.Column("sm_clock_n", sa.Integer(), nullable=False),
        sa.Column("pcie_bytes_sum", sa.Float(), nullable=True),
        sa.Column("pcie_bytes_n", sa.Integer(), nullable=False),
        sa.Column("nvlink_bytes_sum", sa.Float(), nullable=True),
        sa.Column("nvlink_bytes_n", sa.Integer(), nullable=False),
        sa.Column("ecc_sbe", sa.Integer(), nullable=True),
        sa.Column("ecc_dbe", sa.Integer(), nullable=True),
        sa.Column("pcie_replays", sa.Integer(), nullable=True),
        sa.Column("nvlink_errors", sa.Integer(), nullable=True),
        sa.Column("row_remap_failure", sa.SmallInteger(), nullable=True),
        sa.Column("fail_first_ts", sa.BigInteger(), nullable=True),
        sa.Column("fail_xid", sa.Integer(), nullable=True),
        sa.Column("app_xid", sa.Integer(), nullable=True),
        sa.Column("other_xid", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["gpu_id"],
            ["gpus.id"],
            name=op.f("fk_gpu_health_hourly_gpu_id_gpus"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("hour_ts", "gpu_id", "pod_id", name=op.f("pk_gpu_health_hourly")),
        sqlite_with_rowid=False,
    )
    op.create_index(
        "ix_gpu_health_hourly_gpu_id_hour_ts", "gpu_health_hourly", ["gpu_id", "hour_ts"]
    )


def downgrade() -> None:
    op.drop_index("ix_gpu_health_hourly_gpu_id_hour_ts", table_name="gpu_health_hourly")
    op.drop_table("gpu_health_hourly")
    with op.batch_alter_table("gpu_samples") as batch:
        for name, _ in reversed(SAMPLE_COLUMNS):
            batch.drop_column(name)
