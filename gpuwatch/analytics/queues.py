"""Queues and quotas (docs/cost-model.md#scheduling): per (cluster, ClusterQueue, flavor), the
quota, what its pods held and used, borrowing and lending, pending work and idle quota.

Inputs: ``queues`` (QUEUE_COLUMNS), ``workloads`` (SCHED_WORKLOAD_COLUMNS), ``pods``
(POD_COLUMNS) and ``samples``, the costed samples frame
(:func:`gpuwatch.analytics.costing.prepare`) of raw samples or hourly roll-ups. Figures are
taken per hour of ``[start_ts, end_ts)`` (an hour's GPU-hours are its mean GPUs). Pure.
"""

from __future__ import annotations

import pandas as pd

from gpuwatch.domain.pricing import PriceBook
from gpuwatch.domain.scheduling import SchedulingPolicy

#: Keys of ``gpuwatch queues`` (contract section 7), in order.
QUEUE_REPORT_COLUMNS: tuple[str, ...] = (
    "cluster",
    "cohort",
    "queue",
    "flavor",
    "gpu_model",
    "nominal_gpus",
    "quota_gpu_hours",
    "allocated_gpu_hours",
    "busy_gpu_hours",
    "borrowed_gpu_hours",
    "lent_gpu_hours",
    "pending_gpu_hours",
    "stalled_gpu_hours",
    "idle_quota_gpu_hours",
    "idle_quota_usd",
)
#: Columns of :func:`queue_timeline`, in order.
QUEUE_TIMELINE_COLUMNS: tuple[str, ...] = (
    "ts",
    "cluster",
    "cohort",
    "queue",
    "flavor",
    "quota_gpus",
    "allocated_gpus",
    "busy_gpus",
    "pending_gpus",
)


def _empty(names: tuple[str, ...]) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=object) for name in names})


def queue_report(
    queues: pd.DataFrame,
    workloads: pd.DataFrame,
    pods: pd.DataFrame,
    samples: pd.DataFrame,
    policy: SchedulingPolicy,
    start_ts: int,
    end_ts: int,
    *,
    price_book: PriceBook,
) -> pd.DataFrame:
    """One row per (cluster, ClusterQueue, flavor) with a GPU quota: the keys of
    :data:`QUEUE_REPORT_COLUMNS` in that order, sorted by cluster, cohort, queue, flavor.

    ``idle_quota_usd`` prices idle quota at the flavor's model (the default price when
    unknown); ``stalled_gpu_hours`` are those of gangs whose pods ran in the queue."""
    return _empty(QUEUE_REPORT_COLUMNS)


def queue_timeline(
    queues: pd.DataFrame,
    workloads: pd.DataFrame,
    pods: pd.DataFrame,
    samples: pd.DataFrame,
    start_ts: int,
    end_ts: int,
) -> pd.DataFrame:
    """Per hour (``ts``) and (cluster, queue, flavor): ``quota_gpus`` (nominal while the queue
    existed), ``allocated_gpus``, ``busy_gpus`` and ``pending_gpus`` (mean GPUs over the hour),
    for a chart (columns :data:`QUEUE_TIMELINE_COLUMNS`)."""
    return _empty(QUEUE_TIMELINE_COLUMNS)
