"""Daily sums of the hourly roll-ups, kept for the pages' windows (0010, docs/storage.md).

``gpu_samples_daily`` holds, per UTC day, GPU unit and pod, the sums of ``gpu_samples_hourly``
that every cost figure is linear in (samples, seconds with data, utilized and idle seconds),
and the unit's health peaks and signal counts, so a window of whole days is read from a few
rows per unit instead of 24.
``gpu_health_daily`` (0011) holds, per UTC day, GPU unit and pod, the sums of the health roll-up
``gpu_health_hourly`` that add up over hours (the terms of
:func:`gpuwatch.analytics.health_sums.row_terms` but ``fail_s``) and the day's first failing
event, from which a window's ``fail_s`` follows (:mod:`gpuwatch.store.daily_health`).
``pod_detail_daily`` and ``workload_detail_daily`` (0012) hold, per UTC day, the recommendation
detail of ``pod_samples_hourly`` and ``workload_samples_hourly`` summed per pod and per workload
(:mod:`gpuwatch.store.daily_detail`).
``gpu_daily_state`` says which days those sums are current for: writers of hourly rows raise
a day's ``version`` (:func:`gpuwatch.store.daily.invalidate`), and a day's sums are read only
while ``built_version`` equals it (:mod:`gpuwatch.store.daily`).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Float, ForeignKey, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from gpuwatch.store.models import Base


class GpuSampleDaily(Base):
    __tablename__ = "gpu_samples_daily"

    #: The UTC day, epoch seconds of its midnight.
    day_ts: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    gpu_id: Mapped[int] = mapped_column(ForeignKey("gpus.id", ondelete="CASCADE"), primary_key=True)
    #: The pod that held the unit, or ``NO_POD`` (as in ``gpu_samples_hourly``).
    pod_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    samples: Mapped[int] = mapped_column(BigInteger)
    data_s: Mapped[int] = mapped_column(BigInteger)
    used_s: Mapped[float] = mapped_column(Float)
    idle_s: Mapped[int] = mapped_column(BigInteger)
    #: First and last raw sample instants behind the day's hourly rows.
    first_ts: Mapped[int] = mapped_column(BigInteger)
    last_ts: Mapped[int] = mapped_column(BigInteger)
    #: The longest step between raw samples.
    step_max_s: Mapped[int] = mapped_column(Integer)
    #: Raw samples whose utilization came from ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` and from
    #: ``DCGM_FI_DEV_GPU_UTIL``.
    prof_samples: Mapped[int] = mapped_column(BigInteger)
    dev_samples: Mapped[int] = mapped_column(BigInteger)
    #: Peaks of the hours: memory used over total, temperature, hourly mean power, XID.
    fb_used_ratio_max: Mapped[float | None] = mapped_column(Float)
    temp_max_c: Mapped[float | None] = mapped_column(Float)
    power_w_max: Mapped[float | None] = mapped_column(Float)
    xid_max: Mapped[int] = mapped_column(Integer)
    #: Hours of the day in which the unit reported an XID error, counted once per unit: on the
    #: unit's row of the lowest ``pod_id`` (0 on its other rows).
    xid_hours: Mapped[int] = mapped_column(Integer)


class GpuDailyState(Base):
    __tablename__ = "gpu_daily_state"

    day_ts: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    #: Raised by every write of the day's hourly rows.
    version: Mapped[int] = mapped_column(BigInteger)
    #: The version the day's sums were built from; NULL: not built (or stale).
    built_version: Mapped[int | None] = mapped_column(BigInteger)


class GpuHealthDaily(Base):
    __tablename__ = "gpu_health_daily"

    day_ts: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    gpu_id: Mapped[int] = mapped_column(ForeignKey("gpus.id", ondelete="CASCADE"), primary_key=True)
    #: The pod that held the unit, or ``NO_POD`` (as in ``gpu_health_hourly``).
    pod_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    #: Σ data_s and Σ clock_data_s of the day's hourly rows.
    data_s: Mapped[int] = mapped_column(BigInteger)
    clock_data_s: Mapped[int] = mapped_column(BigInteger)
    #: Σ data_s × the hour's throttled, busy-with-low-SM and inefficient shares.
    throttled_data_s: Mapped[float] = mapped_column(Float)
    low_sm_data_s: Mapped[float] = mapped_column(Float)
    inefficient_data_s: Mapped[float] = mapped_column(Float)
    #: Per activity reading: Σ data_s × the hour's ratio, Σ data_s, and hours, where it was read.
    engine_weighted_s: Mapped[float] = mapped_column(Float)
    engine_weight_s: Mapped[int] = mapped_column(BigInteger)
    engine_hours: Mapped[int] = mapped_column(Integer)
    sm_active_weighted_s: Mapped[float] = mapped_column(Float)
    sm_active_weight_s: Mapped[int] = mapped_column(BigInteger)
    sm_active_hours: Mapped[int] = mapped_column(Integer)
    sm_occupancy_weighted_s: Mapped[float] = mapped_column(Float)
    sm_occupancy_weight_s: Mapped[int] = mapped_column(BigInteger)
    sm_occupancy_hours: Mapped[int] = mapped_column(Integer)
    tensor_active_weighted_s: Mapped[float] = mapped_column(Float)
    tensor_active_weight_s: Mapped[int] = mapped_column(BigInteger)
    tensor_active_hours: Mapped[int] = mapped_column(Integer)
    dram_active_weighted_s: Mapped[float] = mapped_column(Float)
    dram_active_weight_s: Mapped[int] = mapped_column(BigInteger)
    dram_active_hours: Mapped[int] = mapped_column(Integer)
    #: Σ of the hourly mean bandwidths, and the hours that have one.
    pcie_bytes_per_s_sum: Mapped[float] = mapped_column(Float)
    pcie_bytes_per_s_hours: Mapped[int] = mapped_column(Integer)
    nvlink_bytes_per_s_sum: Mapped[float] = mapped_column(Float)
    nvlink_bytes_per_s_hours: Mapped[int] = mapped_column(Integer)
    #: The day's first failing event of the row (a failing instant, or the first sample of an
    #: hour with a DBE, a row-remap failure or a failing XID); NULL: none.
    fail_since_ts: Mapped[int | None] = mapped_column(BigInteger)


class PodDetailDaily(Base):
    """A pod's detail of one UTC day: its hourly rows of one GPU model summed (histogram counts
    added per bin, ``data_s`` summed, ``held_max`` the largest), ``hour_ts`` the first hour."""

    __tablename__ = "pod_detail_daily"
    __table_args__ = ({"sqlite_with_rowid": False},)

    day_ts: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    pod_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    #: The first hour of the pod's rows of this GPU model (one pod may have rows of two).
    hour_ts: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    gpu_model: Mapped[str | None] = mapped_column(String(128))
    data_s: Mapped[int] = mapped_column(BigInteger)
    held_max: Mapped[int] = mapped_column(Integer)
    busy_hist: Mapped[bytes] = mapped_column(LargeBinary)
    util_hist: Mapped[bytes] = mapped_column(LargeBinary)
    fb_used_hist: Mapped[bytes] = mapped_column(LargeBinary)


class WorkloadDetailDaily(Base):
    """A workload's histograms of one UTC day, summed per bin over its hourly rows; ``hour_ts``
    its first hour (its hourly ``data_s`` and ``util_sum_bin_s`` stay in the hourly rows)."""

    __tablename__ = "workload_detail_daily"
    __table_args__ = ({"sqlite_with_rowid": False},)

    day_ts: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    cluster_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    namespace: Mapped[str] = mapped_column(String(253), primary_key=True)
    workload_kind: Mapped[str] = mapped_column(String(64), primary_key=True)
    workload_name: Mapped[str] = mapped_column(String(253), primary_key=True)
    gpu_model: Mapped[str] = mapped_column(String(128), primary_key=True)
    hour_ts: Mapped[int] = mapped_column(BigInteger)
    held_hist: Mapped[bytes] = mapped_column(LargeBinary)
    util_sum_hist: Mapped[bytes] = mapped_column(LargeBinary)
