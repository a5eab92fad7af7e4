"""Hourly roll-ups of ``gpu_samples`` and the retention of raw samples (docs/storage.md).

Every writer of samples rolls up the hours it touched in the same transaction
(:func:`roll_up`), so ``gpu_samples_hourly`` (and, with it, the health roll-up
``gpu_health_hourly``: :mod:`gpuwatch.store.rollup_health`) always holds every hour that has
raw samples, and
raw samples can be deleted after ``storage.raw_retention`` without losing a GPU-hour or a
dollar (:func:`compact`). The SQL is the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection, delete, func, insert, select, text

from gpuwatch.domain.durations import DAY_S
from gpuwatch.store import (
    daily,
    partitions,
    rollup_append,
    rollup_detail,
    rollup_fresh,
    rollup_health,
    rollup_rows,
    writer,
)
from gpuwatch.store.models import (
    HOUR_S,
    NO_POD,
    GpuSample,
    GpuSampleHourly,
    PodSampleHourly,
    RollupState,
    WorkloadSampleHourly,
)
from gpuwatch.store.writer import SampleColumns

#: ``rollup_state`` has one row.
STATE_ID = 1
DEFAULT_IDLE_UTIL_PCT = 5.0

_COLUMNS = (
    "hour_ts, gpu_id, pod_id, samples, step_s, first_ts, last_ts, data_s, used_s, idle_s, "
    "util_max, util_signal, fb_used_max_mib, fb_total_mib, power_w_sum, power_n, temp_max_c, xid"
)
# util_ratio is clipped to 0-1 for used_s, as the cost model does; NULL readings are no data.
_ROLL_UP_SQL = f"""
INSERT INTO gpu_samples_hourly ({_COLUMNS})
SELECT (ts / {HOUR_S}) * {HOUR_S}, gpu_id, COALESCE(pod_id, {NO_POD}),
    COUNT(*), MAX(step_s), MIN(ts), MAX(ts),
    SUM(CASE WHEN util_ratio IS NULL THEN 0 ELSE step_s END),
    SUM(CASE WHEN util_ratio IS NULL OR util_ratio <= 0 THEN 0.0
             WHEN util_ratio >= 1 THEN step_s * 1.0 ELSE util_ratio * step_s END),
    SUM(CASE WHEN util_ratio IS NOT NULL AND util_ratio < :idle_ratio THEN step_s ELSE 0 END),
    MAX(util_ratio), MAX(util_signal), MAX(fb_used_mib), MAX(fb_total_mib),
    SUM(power_w), COUNT(power_w), MAX(temp_c), MAX(xid)
FROM gpu_samples
WHERE ts >= :start_ts AND ts < :end_ts
GROUP BY (ts / {HOUR_S}) * {HOUR_S}, gpu_id, COALESCE(pod_id, {NO_POD})
"""  # noqa: S608 - constants only


@dataclass(frozen=True)
class RollupInfo:
    """How the roll-ups were built, and the oldest instant raw samples are kept from."""

    idle_util_pct: float
    updated_ts: int
    raw_kept_from_ts: int | None


def hour_floor(ts: int) -> int:
    return ts - ts % HOUR_S


def hour_ceil(ts: int) -> int:
    return -(-ts // HOUR_S) * HOUR_S


def read_state(conn: Connection) -> RollupInfo | None:
    row = conn.execute(
        select(RollupState.idle_util_pct, RollupState.updated_ts, RollupState.raw_kept_from_ts)
    ).first()
    if row is None:
        return None
    kept = None if row[2] is None else int(row[2])
    return RollupInfo(float(row[0]), int(row[1]), kept)


def write_state(
    conn: Connection, idle_util_pct: float, now_ts: int, raw_kept_from_ts: int | None
) -> None:
    conn.execute(delete(RollupState))
    conn.execute(
        insert(RollupState).values(
            id=STATE_ID,
            idle_util_pct=float(idle_util_pct),
            updated_ts=int(now_ts),
            raw_kept_from_ts=raw_kept_from_ts,
        )
    )


def idle_util_pct(conn: Connection) -> float:
    """The threshold roll-ups count idle seconds against (the default before any is recorded)."""
    state = read_state(conn)
    return DEFAULT_IDLE_UTIL_PCT if state is None else state.idle_util_pct


def roll_up(conn: Connection, start_ts: int, end_ts: int) -> int:
    """Rebuild the roll-ups of every hour that ``[start_ts, end_ts)`` touches; returns rows.

    Whole hours are recomputed from the raw samples, so rolling up again changes nothing.
    """
    if end_ts <= start_ts:
        return 0
    first, last = hour_floor(int(start_ts)), hour_ceil(int(end_ts))
    hours = (GpuSampleHourly.hour_ts >= first) & (GpuSampleHourly.hour_ts < last)
    conn.execute(delete(GpuSampleHourly).where(hours))
    daily.invalidate_range(conn, first, last)
    idle_ratio = idle_util_pct(conn) / 100.0
    params = {"idle_ratio": idle_ratio, "start_ts": first, "end_ts": last}
    result = conn.execute(text(_ROLL_UP_SQL), params)
    rollup_detail.roll_up_range(conn, first, last, idle_ratio)
    rollup_health.roll_up_range(conn, first, last)
    return max(int(result.rowcount or 0), 0)


def unstored_hours(conn: Connection, first_ts: int, last_ts: int) -> set[int]:
    """The hours from ``first_ts``'s to ``last_ts``'s that hold no raw sample (one indexed
    probe per hour)."""
    out = set()
    for hour in range(hour_floor(int(first_ts)), int(last_ts) + 1, HOUR_S):
        probe = select(GpuSample.ts).where(GpuSample.ts >= hour, GpuSample.ts < hour + HOUR_S)
        if conn.execute(probe.limit(1)).first() is None:
            out.add(hour)
    return out


#: How two hourly rows of one (hour, GPU unit, pod) merge (:mod:`~gpuwatch.store.rollup_append`).
HOURLY_KEYS = rollup_append.KEYS
HOURLY_RULES = {
    "samples": "sum", "step_s": "max", "first_ts": "min", "last_ts": "max", "data_s": "sum",
    "used_s": "sum", "idle_s": "sum", "util_max": "max", "util_signal": "max",
    "fb_used_max_mib": "max", "fb_total_mib": "max", "power_w_sum": "sum", "power_n": "sum",
    "temp_max_c": "max", "xid": "max",
}  # fmt: skip


def write_and_roll_up(
    conn: Connection,
    samples: SampleColumns,
    fresh_hours: set[int],
    appended_hours: set[int] | None = None,
    raised_pods: set[int] | None = None,
) -> int:
    """Write ``samples`` (unique per GPU unit and instant, in write order:
    :func:`~gpuwatch.store.writer.write_unique_samples`) and roll up every hour they touch, in
    the caller's transaction; returns the samples written.

    ``fresh_hours`` held no raw sample before the write (:func:`unstored_hours`): their samples
    of these GPU units are exactly ``samples``, rolled up in memory (the roll-ups of other units in
    those hours are left alone), in a thread while the samples are written
    (:mod:`gpuwatch.store.rollup_fresh`). ``appended_hours`` held none of the cluster's samples
    at or after the page's first instant (:func:`~gpuwatch.store.rollup_append.appended_hours`):
    the page's rows are merged into the stored rows of its units (the health rows of a unit whose
    first health reading of the hour the page brings are rolled up from the table), unless a pod
    of ``raised_pods`` (pods whose GPU count the page raised) already has rows in those hours.
    Other hours are rolled up from the table after the write. ``raised_pods`` must be raised
    before (:func:`~gpuwatch.store.pods.raise_gpu_counts`): the fresh hours' detail reads the
    pods' GPU counts before the write.
    """
    fresh = _in_hours(samples, fresh_hours)
    work = None
    if fresh.any():
        work = rollup_fresh.plan(conn, _part(samples, fresh), idle_util_pct(conn) / 100.0)
    if work is None:  # no fresh hour: nothing to roll up beside the write
        written, rows = writer.write_unique_samples(conn, samples), None
    else:
        written, rows = rollup_fresh.beside(
            lambda: writer.write_unique_samples(conn, samples),
            lambda: rollup_fresh.compute(work),
        )
    if len(samples):
        _roll_up_stored(conn, samples, fresh, appended_hours, raised_pods)
    if rows is not None:
        rollup_fresh.write(conn, rows)
    return written


def _in_hours(samples: SampleColumns, hours: set[int]) -> np.ndarray:
    """Which of ``samples`` fall in one of ``hours``."""
    wanted = np.fromiter(hours, dtype=np.int64, count=len(hours))
    return np.isin(samples.ts - samples.ts % HOUR_S, wanted)


def _part(samples: SampleColumns, mask: np.ndarray) -> SampleColumns:
    return samples if mask.all() else samples.take(mask)


def _roll_up_stored(
    conn: Connection,
    samples: SampleColumns,
    fresh: np.ndarray,
    appended_hours: set[int] | None,
    raised_pods: set[int] | None,
) -> int:
    """Roll up the hours of ``samples`` outside ``fresh`` (written already): merged into the
    stored rows where only appended to, else from the table; returns rows."""
    hours = samples.ts - samples.ts % HOUR_S
    added = np.isin(hours, sorted(appended_hours or ())) & ~fresh
    rows = 0
    if added.any():
        merged = _merge_appended(conn, samples.take(added), raised_pods or set())
        rows += merged or 0
        if merged is None:
            added[:] = False
    for hour in np.unique(hours[~fresh & ~added]).tolist():
        rows += roll_up(conn, hour, hour + HOUR_S)
    return rows


def _merge_appended(conn: Connection, mine: SampleColumns, raised_pods: set[int]) -> int | None:
    """Merge the rows of ``mine`` (appended to their hours) into the stored ones; rows written,
    or None (nothing written) where the hours must be rolled up from the table instead."""
    hours = sorted(np.unique(mine.ts - mine.ts % HOUR_S).tolist())
    units = np.unique(mine.gpu_id)
    stored = rollup_append.read_columns(conn, GpuSampleHourly.__tablename__, _HOURLY_NAMES, hours)
    if raised_pods and np.isin(stored["pod_id"], sorted(raised_pods)).any():
        return None  # a pod already in these hours: its stored detail used its old GPU count
    old = rollup_append.rows_where(stored, np.isin(stored["gpu_id"], units))
    idle_ratio = idle_util_pct(conn) / 100.0
    new = rollup_rows.hourly_rows(mine, idle_ratio)
    merged = rollup_append.merge_columns(old, new, HOURLY_KEYS, HOURLY_RULES)
    in_hours = GpuSampleHourly.hour_ts.in_(hours)
    conn.execute(
        delete(GpuSampleHourly).where(in_hours, GpuSampleHourly.gpu_id.in_(units.tolist()))
    )
    daily.invalidate(conn, hours)
    columns = {name: merged[name] for name in _HOURLY_NAMES}
    records = rollup_rows.records(columns)
    rollup_rows.insert_rows(conn, list(columns), records)
    rollup_health.merge_appended(conn, old, mine, hours, units)
    rollup_detail.merge_samples(conn, rollup_fresh.held(mine), idle_ratio)
    return len(records)


_HOURLY_NAMES = (*HOURLY_KEYS, *HOURLY_RULES)


def rebuild(conn: Connection, idle_util_pct_value: float, now_ts: int, span_s: int = DAY_S) -> int:
    """Recompute every roll-up from the raw samples at a new idle threshold; returns rows.

    Hours whose raw samples are gone (past the retention) keep their roll-ups as they are.
    """
    state = read_state(conn)
    kept_from = None if state is None else state.raw_kept_from_ts
    write_state(conn, idle_util_pct_value, now_ts, kept_from)
    bounds = conn.execute(select(func.min(GpuSample.ts), func.max(GpuSample.ts))).one()
    if bounds[0] is None:
        return 0
    rows = 0
    for start in range(hour_floor(int(bounds[0])), int(bounds[1]) + 1, span_s):
        rows += roll_up(conn, start, start + span_s)
    return rows


@dataclass(frozen=True)
class Compaction:
    """What :func:`compact` removed: rows deleted, and (PostgreSQL) the day partitions of raw
    samples dropped whole, whose rows ``raw_deleted`` does not count."""

    raw_deleted: int
    hourly_deleted: int
    raw_kept_from_ts: int
    hourly_kept_from_ts: int
    partitions_dropped: tuple[str, ...] = ()


def compact(conn: Connection, now_ts: int, raw_keep_s: int, hourly_keep_s: int) -> Compaction:
    """Delete raw samples older than ``raw_keep_s`` and roll-ups older than ``hourly_keep_s``.

    Cut-offs are whole hours, so an hour is either entirely raw-backed or roll-up only. Where
    raw samples are partitioned by day (PostgreSQL), the days wholly before the cut are dropped
    first, then the older rows of the cut's day and of the DEFAULT partition are deleted.
    """
    raw_cut = hour_floor(int(now_ts) - int(raw_keep_s))
    hourly_cut = hour_floor(int(now_ts) - max(int(hourly_keep_s), int(raw_keep_s)))
    dropped = partitions.drop_partitions_before(conn, raw_cut)
    raw = conn.execute(delete(GpuSample).where(GpuSample.ts < raw_cut))
    old = conn.execute(delete(GpuSampleHourly).where(GpuSampleHourly.hour_ts < hourly_cut))
    daily.drop_before(conn, hourly_cut)
    conn.execute(delete(PodSampleHourly).where(PodSampleHourly.hour_ts < hourly_cut))
    conn.execute(delete(WorkloadSampleHourly).where(WorkloadSampleHourly.hour_ts < hourly_cut))
    rollup_health.delete_before(conn, hourly_cut)
    state = read_state(conn)
    threshold = DEFAULT_IDLE_UTIL_PCT if state is None else state.idle_util_pct
    updated = now_ts if state is None else state.updated_ts
    write_state(conn, threshold, updated, raw_cut)
    raw_deleted, hourly_deleted = int(raw.rowcount or 0), int(old.rowcount or 0)
    return Compaction(raw_deleted, hourly_deleted, raw_cut, hourly_cut, tuple(dropped))
