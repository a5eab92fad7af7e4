"""The simulated fleet's queues and queued work over a window, as the store's rows.

``queue_flavors_frame`` has one row per (ClusterQueue, flavor) GPU quota
(``gpuwatch.domain.frames.QUEUE_COLUMNS``) and one per Volcano Queue with GPUs (kind
``volcano``, flavor ``""``); ``sched_workloads_frame`` one row per Kueue Workload and Volcano
PodGroup that existed in the window (``SCHED_WORKLOAD_COLUMNS`` and its ``uid``), in its state
at the window's end, as ``gpuwatch collect`` would store them from :mod:`kube_queues`' and
:mod:`kube_volcano`'s objects.
"""

from __future__ import annotations

import pandas as pd

from gpuwatch.domain.frames import QUEUE_COLUMNS, SCHED_WORKLOAD_COLUMNS
from gpuwatch.simulate.fleet import Fleet
from gpuwatch.simulate.kube_queues import queued_runs
from gpuwatch.simulate.kueue_decl import CLUSTER_QUEUES, GPU, KUEUE_CLUSTER, flavor
from gpuwatch.simulate.volcano_frames import volcano_quota_rows, volcano_workload_rows

QUEUE_FRAME_COLUMNS = [c.name for c in QUEUE_COLUMNS]
SCHED_FRAME_COLUMNS = [*(c.name for c in SCHED_WORKLOAD_COLUMNS), "uid"]


def queue_frames(
    fleet: Fleet | None = None, start_ts: int = 0, end_ts: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(queue_flavors, sched_workloads)`` of the window; empty frames without a fleet."""
    if fleet is None:
        empty = pd.DataFrame(columns=QUEUE_FRAME_COLUMNS), pd.DataFrame(columns=SCHED_FRAME_COLUMNS)
        return empty
    return (
        queue_flavors_frame(fleet, start_ts, end_ts),
        sched_workloads_frame(fleet, start_ts, end_ts),
    )


def queue_flavors_frame(fleet: Fleet, start_ts: int, end_ts: int) -> pd.DataFrame:
    """The cohort's GPU quotas and Volcano's, seen over the whole window."""
    rows = [
        {
            "cluster": KUEUE_CLUSTER,
            "kind": "kueue",
            "queue": queue.name,
            "cohort": queue.cohort,
            "flavor": quota.flavor,
            "gpu_resource": GPU,
            "gpu_model": flavor(quota.flavor).gpu_model,
            "nominal_gpus": float(quota.nominal_gpus),
            "borrowing_limit_gpus": quota.borrowing_limit_gpus,
            "lending_limit_gpus": quota.lending_limit_gpus,
            "first_seen_ts": start_ts,
            "last_seen_ts": end_ts,
        }
        for queue in CLUSTER_QUEUES
        for quota in queue.quotas
        if KUEUE_CLUSTER in fleet.clusters
    ]
    rows.extend(volcano_quota_rows(fleet, start_ts, end_ts))
    frame = pd.DataFrame(rows, columns=QUEUE_FRAME_COLUMNS)
    return frame.astype({"borrowing_limit_gpus": "float64", "lending_limit_gpus": "float64"})


def sched_workloads_frame(fleet: Fleet, start_ts: int, end_ts: int) -> pd.DataFrame:
    """Every Workload (and PodGroup) created before ``end_ts`` that had not finished by
    ``start_ts``, as seen at ``end_ts`` (times after it are not known yet); a Workload last seen
    when it finished, else at the window's end."""
    rows = []
    for run in queued_runs(fleet, start_ts, end_ts):
        state = run.state_at(end_ts - 1)
        admitted = run.admitted_ts if run.admitted_ts < end_ts else None
        finished = run.finished_ts if run.finished_ts < end_ts else None
        rows.append(
            {
                "cluster": run.spec.cluster,
                "kind": "kueue",
                "namespace": run.spec.namespace,
                "name": run.name,
                "queue": run.cluster_queue,
                "flavor": run.flavor if admitted is not None else None,
                "owner_kind": run.owner_kind,
                "owner_name": run.owner_name if run.owner_kind else None,
                "gpu_resource": GPU,
                "gpus_requested": float(run.gpus),
                "pod_count": len(run.spec.pods),
                "state": state,
                "created_ts": run.created_ts,
                "admitted_ts": admitted,
                "finished_ts": finished,
                "evictions": 0,
                "last_seen_ts": finished if finished is not None else end_ts,
                "uid": run.uid,
            }
        )
    rows.extend(volcano_workload_rows(fleet, start_ts, end_ts))
    frame = pd.DataFrame(rows, columns=SCHED_FRAME_COLUMNS)
    types = {"created_ts": "Int64", "admitted_ts": "Int64", "finished_ts": "Int64"}
    return frame.astype(types | {"pod_count": "int64", "evictions": "int64"})
