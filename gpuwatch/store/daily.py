"""Daily sums of the hourly roll-ups: dropped and built by the writers, read by the pages.

A window of the pages is summed per (UTC day, GPU unit, pod) from ``gpu_samples_daily`` for its
whole days whose sums are current and from ``gpu_samples_hourly`` for the rest
(docs/storage.md#daily-sums):

- every writer of hourly rows calls :func:`invalidate` for the days it touched, in its own
  transaction: the day's ``version`` goes up and its sums are deleted;
- after writing, the collector (and the simulated fleet's loader) builds the finished days
  whose sums are not current (:func:`build_pending`, one transaction per day, guarded by the
  day's state row);
- :func:`read_sums` only reads: the current sums and the remaining hours, again if a writer
  changed a day meanwhile. The dashboard never writes to the store.

The sums are the same SQL on SQLite and PostgreSQL, and equal the hourly rows' sums exactly
(integers, and one float sum per row).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
import pandas as pd
from sqlalchemy import Connection, Engine, delete, select, text, update
from sqlalchemy.exc import OperationalError

from gpuwatch.domain.durations import DAY_S, HOUR_S
from gpuwatch.store import daily_detail, daily_health
from gpuwatch.store.daily_health import Spans
from gpuwatch.store.models import UTIL_SIGNAL_DEV, UTIL_SIGNAL_PROF
from gpuwatch.store.models_daily import (
    GpuDailyState,
    GpuHealthDaily,
    GpuSampleDaily,
    PodDetailDaily,
    WorkloadDetailDaily,
)
from gpuwatch.store.writer import table_of

#: Columns of :func:`read_sums`, in order.
SUM_COLUMNS = (
    *("day_ts", "gpu_id", "pod_id", "samples", "data_s", "used_s", "idle_s", "first_ts"),
    *("last_ts", "step_max_s", "prof_samples", "dev_samples", "fb_used_ratio_max"),
    *("temp_max_c", "power_w_max", "xid_max", "xid_hours"),
)
#: Columns that may be NULL (no reading).
NULLABLE = ("fb_used_ratio_max", "temp_max_c", "power_w_max")
#: Times :func:`read_sums` reads again when writers change the window's days while it reads.
READ_TRIES = 3
_DAY = f"(hour_ts / {DAY_S}) * {DAY_S}"
_WINDOW = "FROM gpu_samples_hourly WHERE hour_ts >= :start_ts AND hour_ts < :end_ts"
# Per (day, unit, pod) the sums and peaks; per (day, unit) the hours with an XID, counted once
# (on the unit's row of the lowest pod id).
_HOURLY_SUMS = f"""
SELECT p.day_ts, p.gpu_id, p.pod_id, p.samples, p.data_s, p.used_s, p.idle_s, p.first_ts,
    p.last_ts, p.step_max_s, p.prof_samples, p.dev_samples, p.fb_used_ratio_max, p.temp_max_c,
    p.power_w_max, p.xid_max, CASE WHEN p.pod_id = g.first_pod THEN g.xid_hours ELSE 0 END
FROM (
    SELECT {_DAY} AS day_ts, gpu_id, pod_id, SUM(samples) AS samples, SUM(data_s) AS data_s,
        SUM(used_s) AS used_s, SUM(idle_s) AS idle_s, MIN(first_ts) AS first_ts,
        MAX(last_ts) AS last_ts, MAX(step_s) AS step_max_s,
        SUM(CASE WHEN util_signal = {UTIL_SIGNAL_PROF} THEN samples ELSE 0 END) AS prof_samples,
        SUM(CASE WHEN util_signal = {UTIL_SIGNAL_DEV} THEN samples ELSE 0 END) AS dev_samples,
        MAX(CASE WHEN fb_total_mib > 0 THEN fb_used_max_mib / fb_total_mib END)
            AS fb_used_ratio_max,
        MAX(temp_max_c) AS temp_max_c,
        MAX(CASE WHEN power_n > 0 THEN power_w_sum / power_n END) AS power_w_max,
        COALESCE(MAX(xid), 0) AS xid_max
    {_WINDOW}
    GROUP BY {_DAY}, gpu_id, pod_id
) p JOIN (
    SELECT {_DAY} AS day_ts, gpu_id, MIN(pod_id) AS first_pod,
        COUNT(DISTINCT CASE WHEN xid <> 0 THEN hour_ts END) AS xid_hours
    {_WINDOW}
    GROUP BY {_DAY}, gpu_id
) g ON g.day_ts = p.day_ts AND g.gpu_id = p.gpu_id
"""  # noqa: S608 - constants only
_BUILD = f"INSERT INTO gpu_samples_daily ({', '.join(SUM_COLUMNS)}) {_HOURLY_SUMS}"
_DAILY = f"""
SELECT {", ".join(SUM_COLUMNS)} FROM gpu_samples_daily
WHERE day_ts >= :start_ts AND day_ts < :end_ts
"""  # noqa: S608 - constants only
_BUMP = """
INSERT INTO gpu_daily_state (day_ts, version, built_version) VALUES (:day_ts, 1, NULL)
ON CONFLICT (day_ts) DO UPDATE
SET version = gpu_daily_state.version + 1, built_version = NULL
"""
_ENSURE = """
INSERT INTO gpu_daily_state (day_ts, version, built_version) VALUES (:day_ts, 0, NULL)
ON CONFLICT (day_ts) DO NOTHING
"""


#: The tables of daily sums, built, dropped and read together under ``gpu_daily_state``.
_SUMS = (GpuSampleDaily, GpuHealthDaily, PodDetailDaily, WorkloadDetailDaily)


def day_floor(ts: int) -> int:
    return int(ts) - int(ts) % DAY_S


def invalidate(conn: Connection, hours: Iterable[int]) -> None:
    """The days of ``hours`` (hour or any instant) are written: raise their version, drop their
    sums. Call in the transaction that writes their hourly rows. Days go in order, so two
    writers never wait on each other's days crosswise."""
    days = sorted({day_floor(int(ts)) for ts in hours})
    if not days:
        return
    conn.execute(text(_BUMP), [{"day_ts": day} for day in days])
    for table in _SUMS:
        conn.execute(delete(table).where(table.day_ts.in_(days)))


def invalidate_range(conn: Connection, start_ts: int, end_ts: int) -> None:
    """Every day that ``[start_ts, end_ts)`` touches is written (see :func:`invalidate`)."""
    if end_ts > start_ts:
        invalidate(conn, range(day_floor(start_ts), int(end_ts), DAY_S))


def drop_before(conn: Connection, cut_ts: int) -> None:
    """Hourly rows before ``cut_ts`` are deleted: days wholly before it go, its own is written."""
    first_kept = day_floor(cut_ts)
    for table in _SUMS:
        conn.execute(delete(table).where(table.day_ts < first_kept))
    conn.execute(delete(GpuDailyState).where(GpuDailyState.day_ts < first_kept))
    if cut_ts % DAY_S:
        invalidate(conn, [cut_ts])


class _Changed(Exception):
    """A writer raised the day's version while its sums were being built."""


def build_day_in(conn: Connection, day_ts: int) -> bool:
    """Sum one day's hourly rows into ``gpu_samples_daily`` in the caller's transaction; False
    where a writer raised the day's version meanwhile (nothing recorded as built)."""
    conn.execute(text(_ENSURE), {"day_ts": day_ts})  # SQLite: the write lock, first
    state = table_of(GpuDailyState)
    row = conn.execute(
        select(state.c.version).where(state.c.day_ts == day_ts).with_for_update()
    ).one()
    for table in _SUMS:
        conn.execute(delete(table).where(table.day_ts == day_ts))
    bounds = {"start_ts": day_ts, "end_ts": day_ts + DAY_S}
    conn.execute(text(_BUILD), bounds)
    conn.execute(text(daily_health.BUILD), {"day_ts": day_ts, **bounds})
    daily_detail.build(conn, day_ts)
    done = conn.execute(
        update(state)
        .where(state.c.day_ts == day_ts, state.c.version == row[0])
        .values(built_version=row[0])
    )
    return done.rowcount == 1


def build_day(engine: Engine, day_ts: int) -> bool:
    """:func:`build_day_in`, in a transaction of its own; False (nothing kept) where a writer got
    there first or held the day's lock too long."""
    try:
        with engine.begin() as conn:
            if not build_day_in(conn, day_ts):
                raise _Changed
    except _Changed:
        return False
    except OperationalError as error:
        if not _contention(error):
            raise
        return False
    return True


def pending_days(conn: Connection, finished_before_ts: int) -> list[int]:
    """The days written since their sums were built (or never built) that end by
    ``finished_before_ts``, in order."""
    state = table_of(GpuDailyState)
    stale = state.c.built_version.is_(None) | (state.c.built_version != state.c.version)
    last = int(finished_before_ts) - DAY_S
    stmt = select(state.c.day_ts).where(stale, state.c.day_ts <= last).order_by(state.c.day_ts)
    return [int(r[0]) for r in conn.execute(stmt)]


def build_pending(engine: Engine, finished_before_ts: int) -> int:
    """Build the sums of every :func:`pending_days` day, a transaction each (the writers call
    this after writing: the dashboard only reads); returns the days built."""
    with engine.connect() as conn:
        days = pending_days(conn, finished_before_ts)
    return sum(build_day(engine, day) for day in days)


#: SQLSTATEs of a lock that could not be had: serialization failure, deadlock, lock timeout.
_CONTENTION_STATES = frozenset({"40001", "40P01", "55P03"})


def _contention(error: OperationalError) -> bool:
    """Whether ``error`` says another transaction holds what the build needs (SQLite: the
    database is locked or busy; PostgreSQL: :data:`_CONTENTION_STATES`), not a broken store."""
    state = getattr(error.orig, "sqlstate", None)
    if state is not None:
        return state in _CONTENTION_STATES
    text_ = str(error.orig).lower()
    return "locked" in text_ or "busy" in text_


def _versions(conn: Connection, start_ts: int, end_ts: int) -> dict[int, tuple[int, int | None]]:
    """(version, built version) of the days in ``[start_ts, end_ts)`` that have a state row."""
    state = table_of(GpuDailyState)
    stmt = select(state.c.day_ts, state.c.version, state.c.built_version).where(
        state.c.day_ts >= start_ts, state.c.day_ts < end_ts
    )
    return {int(r[0]): (int(r[1]), None if r[2] is None else int(r[2])) for r in conn.execute(stmt)}


def whole_days(start_ts: int, end_ts: int) -> list[int]:
    """The UTC days wholly inside ``[start_ts, end_ts)``."""
    first = -(-int(start_ts) // DAY_S) * DAY_S
    return list(range(first, int(end_ts) - DAY_S + 1, DAY_S))


T = TypeVar("T")
#: A read of a window inside one connection: (connection, spans of whole days with current
#: sums, spans of the remaining hours) → its result.
DaysReader = Callable[[Connection, Spans, Spans], T]


@dataclass(frozen=True)
class DaysRead(Generic[T]):
    """What :func:`read_days` read: the reader's result, how many days came from daily sums,
    and how many times it was read."""

    value: T
    daily_days: int
    tries: int


@dataclass(frozen=True)
class SumsRead:
    """What :func:`read_sums` read: the sums, and how many days came from daily sums."""

    sums: pd.DataFrame
    daily_days: int
    tries: int


def _frame(rows: list[tuple[object, ...]]) -> pd.DataFrame:
    # Plain tuples first: numpy reads a result row item by item through its key lookup.
    matrix = np.array([tuple(r) for r in rows], dtype="float64").reshape(-1, len(SUM_COLUMNS))
    frame = pd.DataFrame(matrix, columns=list(SUM_COLUMNS))
    floats = ("used_s", *NULLABLE)
    return frame.astype({name: "int64" for name in SUM_COLUMNS if name not in floats})


def read_days(engine: Engine, start_ts: int, end_ts: int, read: DaysReader[T]) -> DaysRead[T]:
    """``read(conn, days, hours)`` over ``[start_ts, end_ts)`` (from the start's hour): ``days``
    the spans of the window's whole days whose sums are current, ``hours`` the rest. Read again
    (up to :data:`READ_TRIES` times) if a writer changed a day of the window meanwhile."""
    start_ts, end_ts = int(start_ts) - int(start_ts) % HOUR_S, int(end_ts)
    days = whole_days(start_ts, end_ts)
    tries = 0
    while True:
        tries += 1
        with engine.connect() as conn:
            before = _versions(conn, day_floor(start_ts), end_ts)
            built = [d for d in days if d in before and before[d][1] == before[d][0]]
            value = read(conn, _runs(built), _gaps(start_ts, end_ts, built))
            after = _versions(conn, day_floor(start_ts), end_ts)
        if before == after or tries >= READ_TRIES:
            return DaysRead(value=value, daily_days=len(built), tries=tries)


def _daily_rows(conn: Connection, days: Spans) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for lo, hi in days:
        rows += conn.execute(text(_DAILY), {"start_ts": lo, "end_ts": hi}).all()
    return rows


def _read_cost_sums(conn: Connection, days: Spans, hours: Spans) -> pd.DataFrame:
    rows = _daily_rows(conn, days)
    for lo, hi in hours:
        rows += conn.execute(text(_HOURLY_SUMS), {"start_ts": lo, "end_ts": hi}).all()
    return _frame(rows)


def _runs(days: list[int]) -> list[tuple[int, int]]:
    """Consecutive days as ``[start, end)`` spans."""
    out: list[tuple[int, int]] = []
    for day in days:
        if out and out[-1][1] == day:
            out[-1] = (out[-1][0], day + DAY_S)
        else:
            out.append((day, day + DAY_S))
    return out


def _gaps(start_ts: int, end_ts: int, built: list[int]) -> list[tuple[int, int]]:
    """The parts of ``[start_ts, end_ts)`` outside the ``built`` days."""
    out, at = [], int(start_ts)
    for lo, hi in _runs(built):
        if lo > at:
            out.append((at, lo))
        at = hi
    if at < end_ts:
        out.append((at, int(end_ts)))
    return out


def read_sums(engine: Engine, start_ts: int, end_ts: int) -> SumsRead:
    """Per (UTC day, GPU unit, pod) the sums of the hourly rows of ``[start_ts, end_ts)``
    (whole hours): :data:`SUM_COLUMNS`, in no set order. Reads only.

    The window's whole days whose sums are current come from ``gpu_samples_daily``; the other
    hours (the window's ends, days still being written, days not built yet) are summed from the
    hourly rows by the same SQL.
    """
    got = read_days(engine, start_ts, end_ts, _read_cost_sums)
    return SumsRead(sums=got.value, daily_days=got.daily_days, tries=got.tries)


def read_built_sums(engine: Engine, start_ts: int, end_ts: int) -> tuple[pd.DataFrame, Spans]:
    """The sums of the window's whole days whose sums are current (:data:`SUM_COLUMNS`, from
    ``gpu_samples_daily`` only), and those days as ``[start, end)`` spans: a reader sums the
    other hours itself, or reads them as hourly rows."""

    def read(conn: Connection, days: Spans, hours: Spans) -> tuple[pd.DataFrame, Spans]:
        return _frame(_daily_rows(conn, days)), days

    return read_days(engine, start_ts, end_ts, read).value
