"""Daily sums of the hourly roll-ups, kept for the pages' windows (0010, docs/storage.md).

``gpu_samples_daily`` holds, per UTC day, GPU unit and pod, the sums of ``gpu_samples_hourly``
that every cost figure is linear in (samples, seconds with data, utilized and idle seconds),
so a window of whole days is summed over a few rows per unit instead of 24.
``gpu_daily_state`` says which days those sums are current for: writers of hourly rows raise
a day's ``version`` (:func:`gpuwatch.store.daily.invalidate`), and a day's sums are read only
while ``built_version`` equals it (:mod:`gpuwatch.store.daily`).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Float, ForeignKey, Integer
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


class GpuDailyState(Base):
    __tablename__ = "gpu_daily_state"

    day_ts: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    #: Raised by every write of the day's hourly rows.
    version: Mapped[int] = mapped_column(BigInteger)
    #: The version the day's sums were built from; NULL: not built (or stale).
    built_version: Mapped[int | None] = mapped_column(BigInteger)
