"""The hourly health and efficiency roll-up (0006): one row per (hour, GPU unit, pod) that has
any efficiency or health reading, beside ``gpu_samples_hourly`` (same key, same hours).

Seconds are exact sums over the hour's raw samples (Σ step), never averages, so rows add across
hours and pods. Each ``*_data_s`` is the seconds that had the reading: a ratio's hourly mean is
``*_active_s / *_data_s``, and no reading (0 data seconds) is no data, never 0. The busy and
throttle seconds count against the fixed limits of :mod:`gpuwatch.domain.health`. Error counts
are NULL where no increase was reported. docs/storage.md#health.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, SmallInteger
from sqlalchemy.orm import Mapped, mapped_column

from gpuwatch.store.models import Base


class GpuHealthHourly(Base):
    __tablename__ = "gpu_health_hourly"
    __table_args__ = (
        Index("ix_gpu_health_hourly_gpu_id_hour_ts", "gpu_id", "hour_ts"),
        {"sqlite_with_rowid": False},
    )

    hour_ts: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    gpu_id: Mapped[int] = mapped_column(ForeignKey("gpus.id", ondelete="CASCADE"), primary_key=True)
    pod_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    #: Σ step of the row's samples (any reading), the first and last sample instant.
    data_s: Mapped[int] = mapped_column(Integer)
    first_ts: Mapped[int] = mapped_column(BigInteger)
    last_ts: Mapped[int] = mapped_column(BigInteger)
    #: Engine busy (the utilization the cost model uses): Σ util ratio × step, and Σ step
    #: with a utilization reading (as ``gpu_samples_hourly.used_s`` / ``data_s``).
    util_s: Mapped[float] = mapped_column(Float, default=0.0)
    util_data_s: Mapped[int] = mapped_column(Integer, default=0)
    # Profiling ratios: Σ ratio × step, and Σ step where the reading exists.
    sm_active_s: Mapped[float] = mapped_column(Float, default=0.0)
    sm_data_s: Mapped[int] = mapped_column(Integer, default=0)
    sm_occupancy_s: Mapped[float] = mapped_column(Float, default=0.0)
    sm_occupancy_data_s: Mapped[int] = mapped_column(Integer, default=0)
    tensor_active_s: Mapped[float] = mapped_column(Float, default=0.0)
    tensor_data_s: Mapped[int] = mapped_column(Integer, default=0)
    dram_active_s: Mapped[float] = mapped_column(Float, default=0.0)
    dram_data_s: Mapped[int] = mapped_column(Integer, default=0)
    #: Busy (util ≥ BUSY_UTIL_RATIO) seconds with an SM reading, and those with SM active below
    #: LOW_SM_ACTIVE_RATIO; busy seconds with a tensor reading, and those below NO_TENSOR_RATIO.
    busy_sm_data_s: Mapped[int] = mapped_column(Integer, default=0)
    busy_low_sm_s: Mapped[int] = mapped_column(Integer, default=0)
    busy_tensor_data_s: Mapped[int] = mapped_column(Integer, default=0)
    busy_no_tensor_s: Mapped[int] = mapped_column(Integer, default=0)
    #: Seconds with a clock-event reading; of those, throttled (THROTTLE_MASK) and each class.
    clock_data_s: Mapped[int] = mapped_column(Integer, default=0)
    throttled_s: Mapped[int] = mapped_column(Integer, default=0)
    thermal_s: Mapped[int] = mapped_column(Integer, default=0)
    power_cap_s: Mapped[int] = mapped_column(Integer, default=0)
    hw_slowdown_s: Mapped[int] = mapped_column(Integer, default=0)
    # Means as sum and count of readings.
    sm_clock_mhz_sum: Mapped[float | None] = mapped_column(Float)
    sm_clock_n: Mapped[int] = mapped_column(Integer, default=0)
    pcie_bytes_sum: Mapped[float | None] = mapped_column(Float)
    pcie_bytes_n: Mapped[int] = mapped_column(Integer, default=0)
    nvlink_bytes_sum: Mapped[float | None] = mapped_column(Float)
    nvlink_bytes_n: Mapped[int] = mapped_column(Integer, default=0)
    # Error counts in the hour (NULL: none reported) and the row-remap failure flag (max).
    ecc_sbe: Mapped[int | None] = mapped_column(Integer)
    ecc_dbe: Mapped[int | None] = mapped_column(Integer)
    pcie_replays: Mapped[int | None] = mapped_column(Integer)
    nvlink_errors: Mapped[int | None] = mapped_column(Integer)
    row_remap_failure: Mapped[int | None] = mapped_column(SmallInteger)
    #: First instant in the hour of a failing event (a DBE, a row-remap failure, or an XID of
    #: FAILING_XIDS); the hour's highest failing XID and highest application XID.
    fail_first_ts: Mapped[int | None] = mapped_column(BigInteger)
    fail_xid: Mapped[int | None] = mapped_column(Integer)
    app_xid: Mapped[int | None] = mapped_column(Integer)
    #: The hour's highest XID code the catalogue does not list (read as degraded).
    other_xid: Mapped[int | None] = mapped_column(Integer)
