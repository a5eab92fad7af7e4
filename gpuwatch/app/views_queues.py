"""What the Queues page (and the Overview's scheduling cards) show: the scheduling analytics
(:mod:`gpuwatch.analytics.queues`, :mod:`~gpuwatch.analytics.gangs`,
:mod:`~gpuwatch.analytics.capacity`) of the window, then the rows of the filters.

The analytics run once per window and data version over the whole fleet (memoized in the
snapshot): idle quota is quota unused while *another* team's work waited in the cohort, so
the filters pick rows of the result, never the analytics' input. Every figure is the
analytics'; this module only reads the store's queues and picks rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuwatch.analytics.capacity import capacity_report, capacity_timeline, consolidate_hint
from gpuwatch.analytics.gangs import gang_stalls
from gpuwatch.analytics.queues import queue_report, queue_timeline
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.views import filter_mask, hourly_rows, window_bounds
from gpuwatch.domain.frames import QUEUE_COLUMNS, SCHED_WORKLOAD_COLUMNS, empty_frame
from gpuwatch.domain.pricing import PriceBook
from gpuwatch.domain.scheduling import SchedulingPolicy
from gpuwatch.store import repository_scheduling

#: The queue keys of the report's rows, and of the timeline's.
QUEUE_KEY = ("cluster", "queue", "flavor")
CLUSTER = (("cluster", "cluster"),)
CLUSTER_MODEL = (("cluster", "cluster"), ("model", "gpu_model"))
GANG_FILTERS = (("cluster", "cluster"), ("team", "team"), ("namespace", "namespace"))


@dataclass(frozen=True)
class Scheduling:
    """The scheduling analytics of one window, whole fleet: ``queues``
    (:func:`~gpuwatch.analytics.queues.queue_report`), ``queue_hours`` (its
    :func:`~gpuwatch.analytics.queues.queue_timeline`), ``gangs``
    (:func:`~gpuwatch.analytics.gangs.gang_stalls`), ``capacity`` and ``capacity_hours``
    (:func:`~gpuwatch.analytics.capacity.capacity_report` and its timeline), ``moves``
    (:func:`~gpuwatch.analytics.capacity.consolidate_hint`); ``quotas``: the stored queues,
    ``workloads``: the queued work of the window."""

    queues: pd.DataFrame
    queue_hours: pd.DataFrame
    gangs: pd.DataFrame
    capacity: pd.DataFrame
    capacity_hours: pd.DataFrame
    moves: pd.DataFrame
    quotas: pd.DataFrame
    workloads: pd.DataFrame


def stored_queues(snap: Snapshot, window: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The store's GPU quotas and the queued work of the window."""

    def compute() -> tuple[pd.DataFrame, pd.DataFrame]:
        if snap.engine is None or snap.empty:
            return empty_frame(QUEUE_COLUMNS), empty_frame(SCHED_WORKLOAD_COLUMNS)
        start, end = window_bounds(snap, Filters(window=window))
        return (
            repository_scheduling.load_queue_flavors(snap.engine),
            repository_scheduling.load_sched_workloads(snap.engine, start, end),
        )

    return snap.memo(("stored_queues", window), compute)


def scheduling_of(
    samples: pd.DataFrame,
    pods: pd.DataFrame,
    quotas: pd.DataFrame,
    workloads: pd.DataFrame,
    prices: PriceBook,
    policy: SchedulingPolicy,
    bounds: tuple[int, int],
) -> Scheduling:
    """The analytics of a window's costed rows, pods, quotas and queued work."""
    start, end = bounds
    return Scheduling(
        queues=queue_report(
            quotas, workloads, pods, samples, policy, start, end, price_book=prices
        ),
        queue_hours=queue_timeline(quotas, workloads, pods, samples, policy, start, end),
        gangs=gang_stalls(samples, pods, policy, start, end),
        capacity=capacity_report(samples, pods, start, end),
        capacity_hours=capacity_timeline(samples, pods, start, end),
        moves=consolidate_hint(samples, pods, start, end),
        quotas=quotas,
        workloads=workloads,
    )


def scheduling(snap: Snapshot, window: str, policy: SchedulingPolicy) -> Scheduling:
    """The scheduling analytics of the window's hourly rows, whole fleet."""

    def compute() -> Scheduling:
        f = Filters(window=window)
        bounds = window_bounds(snap, f)
        quotas, workloads = stored_queues(snap, window)
        samples = hourly_rows(snap, f)
        return scheduling_of(samples, snap.pods, quotas, workloads, snap.price_book, policy, bounds)

    return snap.memo(("scheduling", window, policy), compute, pin=True, share=True)


def team_queues(pods: pd.DataFrame, workloads: pd.DataFrame) -> pd.DataFrame:
    """The queues each (team, cluster, namespace) submits to: those its pods ran or waited
    in, and those of the queued work of its namespaces. Columns ``team``, ``cluster``,
    ``namespace``, ``queue``; sorted."""
    columns = ["team", "cluster", "namespace", "queue"]
    queued = pods.loc[pods["queue"].notna(), columns].astype(object)
    teams = pods.loc[pods["team"].notna(), columns[:3]].astype(object).drop_duplicates()
    named = workloads.loc[workloads["queue"].notna(), ["cluster", "namespace", "queue"]]
    of_work = named.astype(object).merge(teams, on=["cluster", "namespace"], how="inner")
    out = pd.concat([queued, of_work[columns]], ignore_index=True).dropna().drop_duplicates()
    return out.sort_values(columns, ignore_index=True)


def submitted_queues(snap: Snapshot, f: Filters) -> pd.DataFrame:
    """:func:`team_queues` of the window, for the filters' cluster, team and namespace."""

    def compute() -> pd.DataFrame:
        teams = team_queues(snap.pods, stored_queues(snap, f.window)[1])
        return teams[filter_mask(teams, f, GANG_FILTERS)].reset_index(drop=True)

    return snap.memo(("submitted_queues", f), compute)


def in_scope(frame: pd.DataFrame, keys: pd.DataFrame, on: list[str]) -> np.ndarray:
    """Rows of ``frame`` whose ``on`` columns match a row of ``keys``."""
    if frame.empty:
        return np.zeros(0, dtype=bool)
    wanted = pd.MultiIndex.from_frame(keys[on].astype(str))
    found = pd.MultiIndex.from_frame(frame[on].astype(str))
    return np.asarray(found.isin(wanted), dtype=bool)


def queue_mask(sched: Scheduling, pods: pd.DataFrame, f: Filters, queue: str | None) -> np.ndarray:
    """Queue rows of the filters: of the cluster and GPU model; with a team or namespace, the
    queues it submits to; with ``queue``, that queue only."""
    rows = sched.queues
    mask = filter_mask(rows, f, CLUSTER_MODEL)
    if queue is not None:
        mask &= rows["queue"].astype(object).eq(queue).to_numpy(dtype=bool)
    if f.team is not None or f.namespace is not None:
        teams = team_queues(pods, sched.workloads)
        mine = teams[filter_mask(teams, f, GANG_FILTERS)]
        mask &= in_scope(rows, mine, ["cluster", "queue"])
    return mask


@dataclass(frozen=True)
class QueuesView:
    """The page's rows: queues, their hours, stalled gangs, stranded capacity and its hours;
    ``has_queues``: whether the store holds any queue of the filters' cluster."""

    queues: pd.DataFrame
    queue_hours: pd.DataFrame
    gangs: pd.DataFrame
    capacity: pd.DataFrame
    capacity_hours: pd.DataFrame
    moves: pd.DataFrame
    has_queues: bool


def queues_view_of(
    sched: Scheduling, pods: pd.DataFrame, f: Filters, queue: str | None = None
) -> QueuesView:
    """The rows of the filters (and ``queue``, when one is asked for)."""
    queues = sched.queues[queue_mask(sched, pods, f, queue)].reset_index(drop=True)
    hours = sched.queue_hours
    hours = hours[in_scope(hours, queues, list(QUEUE_KEY))].reset_index(drop=True)
    gangs = sched.gangs[filter_mask(sched.gangs, f, GANG_FILTERS)]
    if queue is not None:
        gangs = gangs[gangs["queue"].astype(object).eq(queue).to_numpy(dtype=bool)]
    capacity = sched.capacity[filter_mask(sched.capacity, f, CLUSTER_MODEL)]
    capacity_hours = sched.capacity_hours[filter_mask(sched.capacity_hours, f, CLUSTER_MODEL)]
    moves = sched.moves[filter_mask(sched.moves, f, CLUSTER_MODEL)]
    known = sched.quotas[filter_mask(sched.quotas, f, CLUSTER)]
    return QueuesView(
        queues=queues,
        queue_hours=hours,
        gangs=gangs.reset_index(drop=True),
        capacity=capacity.reset_index(drop=True),
        capacity_hours=capacity_hours.reset_index(drop=True),
        moves=moves.reset_index(drop=True),
        has_queues=len(known) > 0 or len(sched.queues[filter_mask(sched.queues, f, CLUSTER)]) > 0,
    )


def queues_view(
    snap: Snapshot, f: Filters, policy: SchedulingPolicy, queue: str | None = None
) -> QueuesView:
    """The Queues page's rows for the filters' window and scope."""

    def compute() -> QueuesView:
        return queues_view_of(scheduling(snap, f.window, policy), snap.pods, f, queue)

    return snap.memo(("queues_view", f, policy, queue), compute)


@dataclass(frozen=True)
class SchedulingTotals:
    """The Overview's scheduling cards: the stalled gangs' GPU-hours and dollars, the stranded
    GPU-hours and dollars, and the gangs that stalled."""

    stalled_gpu_hours: float
    stalled_cost_usd: float
    stalled_gangs: int
    stranded_gpu_hours: float
    stranded_cost_usd: float


def totals_of(view: QueuesView) -> SchedulingTotals:
    """Sums of the analytics' rows in scope (each row a gang, or a cluster's GPU model)."""
    gangs, capacity = view.gangs, view.capacity
    return SchedulingTotals(
        stalled_gpu_hours=float(gangs["stalled_gpu_hours"].sum()),
        stalled_cost_usd=float(gangs["stalled_cost_usd"].sum()),
        stalled_gangs=int(gangs["stalled_gpu_hours"].gt(0).sum()),
        stranded_gpu_hours=float(capacity["stranded_gpu_hours"].sum()),
        stranded_cost_usd=float(capacity["stranded_cost_usd"].sum()),
    )


def scheduling_totals(snap: Snapshot, f: Filters, policy: SchedulingPolicy) -> SchedulingTotals:
    return totals_of(queues_view(snap, f, policy))
