"""Where the stored hours lie: cheap probes of the hourly roll-ups' key (no rows read).

- :func:`hourly_span`: the first and last hour with a roll-up in a window, what a window's
  monthly figures are extrapolated over (:func:`gpuwatch.analytics.totals.data_span` of the
  same rows);
- :func:`recent_step_s`: the sampling step of the latest hours.
"""

from __future__ import annotations

from sqlalchemy import Engine, func, select

from gpuwatch.domain.durations import HOUR_S
from gpuwatch.store.models import GpuSampleHourly


def hourly_span(engine: Engine, start_ts: int, end_ts: int) -> tuple[int, int] | None:
    """``[first hour with a roll-up, end of the last one)`` within ``[start_ts, end_ts)``;
    ``None`` when no roll-up lies in it. Two index probes (each a lone MIN or MAX, which both
    SQLite and PostgreSQL answer from the key's ends)."""
    window = (GpuSampleHourly.hour_ts >= int(start_ts), GpuSampleHourly.hour_ts < int(end_ts))
    with engine.connect() as conn:
        first = conn.execute(select(func.min(GpuSampleHourly.hour_ts)).where(*window)).scalar()
        last = conn.execute(select(func.max(GpuSampleHourly.hour_ts)).where(*window)).scalar()
    if first is None or last is None:
        return None
    first, last = int(first), int(last)
    return first - first % HOUR_S, last - last % HOUR_S + HOUR_S


def recent_step_s(engine: Engine, since_ts: int) -> int:
    """The longest raw sampling step (s) of the roll-ups of the hours from ``since_ts`` on
    (0 without any)."""
    with engine.connect() as conn:
        step = conn.execute(
            select(func.max(GpuSampleHourly.step_s)).where(GpuSampleHourly.hour_ts >= since_ts)
        )
        value = step.scalar()
    return 0 if value is None else int(value)
