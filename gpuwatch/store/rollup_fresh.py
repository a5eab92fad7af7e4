"""The roll-up of the hours a page writes first, computed while the page's samples are written.

Hours that held no raw sample before a page (:func:`~gpuwatch.store.rollup.unstored_hours`) are
rolled up from the page itself: the hourly rows (:func:`~gpuwatch.store.rollup_rows.hourly_rows`),
the recommendation detail (:func:`~gpuwatch.store.rollup_detail.detail_of`) and the health rows
(:func:`~gpuwatch.store.rollup_health.fresh_rows`). That arithmetic is pure, so it can run in a
thread while the connection writes the samples (:func:`beside`): the SQLite and PostgreSQL
drivers release Python's interpreter lock while the database works. What needs the connection
happens before the samples' write (:func:`plan`: stale rows deleted, the facts the detail reads)
and after it (:func:`write`: the inserts), in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from sqlalchemy import Connection, delete

from gpuwatch.store import daily, rollup_detail, rollup_health, rollup_rows
from gpuwatch.store.models import HOUR_S, GpuSampleHourly
from gpuwatch.store.sample_columns import SampleColumns

F = TypeVar("F")
B = TypeVar("B")


def held(samples: SampleColumns) -> rollup_detail.HeldSamples:
    """What the recommendation detail reads of ``samples``."""
    return rollup_detail.held_samples(samples.gpu_id, samples.ts, samples.step_s, samples.pod_id,
                                      samples.util_ratio, samples.fb_used_mib)  # fmt: skip


@dataclass(frozen=True)
class Plan:
    """Samples whose hours are rolled up from them alone, and what that reads of the store."""

    samples: SampleColumns
    hours: list[int]
    idle_ratio: float
    facts: rollup_detail.Facts


@dataclass(frozen=True)
class Rows:
    """The roll-up rows of a :class:`Plan`, ready to insert."""

    hourly_names: list[str]
    hourly: list[tuple[Any, ...]]
    detail: rollup_detail.Detail
    health: dict[str, np.ndarray] | None


def plan(conn: Connection, mine: SampleColumns, idle_ratio: float) -> Plan:
    """Clear the hourly and health rows of ``mine``'s GPU units in its hours (their days' sums
    are built again), and read the facts its detail needs. ``mine`` must be every sample those
    units have in those hours; another cluster's units keep their rows (its collector may be
    rolling up the same hours at the same time)."""
    hours = sorted(np.unique(mine.ts - mine.ts % HOUR_S).tolist())
    units = np.unique(mine.gpu_id)
    table = GpuSampleHourly
    conn.execute(delete(table).where(table.hour_ts.in_(hours), table.gpu_id.in_(units.tolist())))
    daily.invalidate(conn, hours)
    rollup_health.delete_rows(conn, hours, units)
    return Plan(mine, hours, idle_ratio, rollup_detail.read_facts(conn, held(mine)))


def compute(work: Plan) -> Rows:
    """The rows of ``work`` (pure: reads no connection)."""
    columns = rollup_rows.hourly_rows(work.samples, work.idle_ratio)
    detail = rollup_detail.detail_of(held(work.samples), work.facts, work.idle_ratio)
    health = rollup_health.fresh_rows(work.samples)
    return Rows(list(columns), rollup_rows.records(columns), detail, health)


def write(conn: Connection, rows: Rows) -> int:
    """Insert ``rows``; returns the hourly rows written."""
    rollup_rows.insert_rows(conn, rows.hourly_names, rows.hourly)
    rollup_detail.write_detail(conn, rows.detail)
    if rows.health is not None:
        rollup_health.insert_rows(conn, rows.health)
    return len(rows.hourly)


def beside(foreground: Callable[[], F], background: Callable[[], B]) -> tuple[F, B]:
    """Run ``background`` in a thread of its own while ``foreground`` runs in this one; returns
    both results. The thread is always waited for before this returns or raises; an error of
    ``foreground`` is raised before one of ``background``."""
    with ThreadPoolExecutor(1, thread_name_prefix="gpuwatch-rollup") as pool:
        future = pool.submit(background)
        try:
            first = foreground()
        finally:
            wait([future])
        return first, future.result()
