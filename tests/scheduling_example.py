"""The worked example of docs/cost-model.md#scheduling: two nodes, four GPUs, three hours.

n1 holds GPUs 1 and 2, n2 GPUs 3 and 4 (``NVIDIA Test GPU``, $1 per GPU-hour). The Job
``train`` (a Kueue gang of 3 pods in ClusterQueue ``cq-a``) runs p1 on GPU 1 and p2 on GPU 3 at
50 % the whole window; its third pod p3 is created at T0 and never starts. GPUs 2 and 4 are
free. The bare pod ``big`` asks for 2 GPUs from T0 + 1 h on and never starts. ClusterQueues
``cq-a`` (nominal 4) and ``cq-b`` (nominal 1) share the cohort ``co``; ``cq-b`` has a Workload
asking for 2 GPUs from T0 + 30 min, never admitted.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from gpuwatch.analytics.build import pods_frame, samples_frame
from gpuwatch.analytics.costing import prepare
from gpuwatch.domain.frames import QUEUE_COLUMNS, SCHED_WORKLOAD_COLUMNS, conform
from gpuwatch.domain.pricing import build_price_book

T0 = 1_794_182_400  # Monday 2026-11-09 00:00 UTC
HOUR = 3600
END = T0 + 3 * HOUR
MODEL = "NVIDIA Test GPU"  # not in the price table: the default $1 applies
BOOK = build_price_book(1.0, 0.6, {}, {})

_GANG = {"queue": "cq-a", "gang_kind": "kueue", "gang_name": "job/train", "gang_size": 3,
         "workload_kind": "Job", "workload": "train", "team": "ml",
         "namespace": "research"}  # fmt: skip


def pods() -> pd.DataFrame:
    return pods_frame(
        [
            {"pod_id": 1, "pod": "train-0", "node": "n1", "created_ts": T0 - 600,
             "started_ts": T0 - 600, **_GANG},
            {"pod_id": 2, "pod": "train-1", "node": "n2", "created_ts": T0 - 600,
             "started_ts": T0 - 600, **_GANG},
            {"pod_id": 3, "pod": "train-2", "node": pd.NA, "phase": "Pending",
             "created_ts": T0, **_GANG},
            {"pod_id": 4, "pod": "big", "node": pd.NA, "phase": "Pending", "gpu_count": 2,
             "created_ts": T0 + HOUR, "namespace": "web", "team": "web"},
        ]
    )  # fmt: skip


def _row(gpu_id: int, node: str, hour: int, pod_id: int | None) -> dict[str, Any]:
    row: dict[str, Any] = {"gpu_id": gpu_id, "node": node, "gpu_model": MODEL,
                           "ts": T0 + hour * HOUR, "step_s": HOUR, "util_ratio": 0.0}  # fmt: skip
    if pod_id is not None:
        row.update(pod_id=pod_id, pod=f"train-{pod_id - 1}", namespace="research",
                   workload_kind="Job", workload="train", team="ml", pod_gpu_count=1,
                   util_ratio=0.5)  # fmt: skip
    return row


def samples() -> pd.DataFrame:
    """Hourly rows (``step_s`` = 3600) of the four GPUs."""
    rows = []
    for hour in range(3):
        rows += [_row(1, "n1", hour, 1), _row(2, "n1", hour, None)]
        rows += [_row(3, "n2", hour, 2), _row(4, "n2", hour, None)]
    return samples_frame(rows)


def costed() -> pd.DataFrame:
    return prepare(samples(), pods(), BOOK)


def queues() -> pd.DataFrame:
    base = {"cluster": "c1", "kind": "kueue", "cohort": "co", "flavor": "a100",
            "gpu_resource": "nvidia.com/gpu", "gpu_model": MODEL,
            "borrowing_limit_gpus": float("nan"), "lending_limit_gpus": float("nan"),
            "first_seen_ts": T0 - 86400, "last_seen_ts": END}  # fmt: skip
    rows = [{**base, "queue": "cq-a", "nominal_gpus": 4.0},
            {**base, "queue": "cq-b", "nominal_gpus": 1.0}]  # fmt: skip
    return conform(pd.DataFrame(rows), QUEUE_COLUMNS)


def workloads() -> pd.DataFrame:
    base = {"cluster": "c1", "kind": "kueue", "flavor": pd.NA, "owner_kind": "Job",
            "gpu_resource": "nvidia.com/gpu", "finished_ts": pd.NA, "evictions": 0,
            "last_seen_ts": END}  # fmt: skip
    rows = [
        {**base, "namespace": "research", "name": "job-train-1a2b", "queue": "cq-a",
         "flavor": "a100", "owner_name": "train", "gpus_requested": 3.0, "pod_count": 3,
         "state": "admitted", "created_ts": T0 - 700, "admitted_ts": T0 - 650},
        {**base, "namespace": "eval", "name": "job-wait-3c4d", "queue": "cq-b",
         "owner_name": "wait", "gpus_requested": 2.0, "pod_count": 2, "state": "pending",
         "created_ts": T0 + 1800, "admitted_ts": pd.NA},
    ]  # fmt: skip
    return conform(pd.DataFrame(rows), SCHED_WORKLOAD_COLUMNS)
