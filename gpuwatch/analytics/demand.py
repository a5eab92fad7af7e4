"""Pending GPU demand: pods waiting for GPUs, from the pods frame."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c

_KEYS = ["cluster", "namespace", "workload_kind", "workload", "team", "gpu_resource"]


def _waiting(pods: pd.DataFrame, at_ts: int) -> pd.Series:
    """Pods that exist at ``at_ts`` and have not started by then (never one known from DCGM
    only: its series show it holding GPUs, and the API never said when it was created)."""
    created = pods["created_ts"].astype("Float64").fillna(-np.inf)
    started = pods["started_ts"].astype("Float64").fillna(np.inf)
    finished = pods["finished_ts"].astype("Float64").fillna(np.inf)
    waiting = (created <= at_ts) & (started > at_ts) & (finished > at_ts)
    seen_holding = pods["dcgm_only"].fillna(False).astype(bool) if "dcgm_only" in pods else False
    return waiting.fillna(False).astype(bool) & pods["gpu_count"].gt(0) & ~seen_holding


def pending_gpu_demand(pods: pd.DataFrame, at_ts: int) -> pd.DataFrame:
    """GPUs requested by pods waiting (created, not started, not finished) at ``at_ts``.

    One row per (cluster, namespace, workload, team, GPU resource): ``pending_pods``,
    ``pending_gpus`` and ``oldest_pending_ts`` (creation of the longest-waiting pod); most
    pending GPUs first.
    """
    waiting = pods[_waiting(pods, at_ts)]
    if waiting.empty:
        frame = waiting[_KEYS].copy()
        for name, dtype in ((c.PENDING_PODS, "int64"), (c.PENDING_GPUS, "int64")):
            frame[name] = pd.Series(dtype=dtype)
        frame[c.OLDEST_PENDING_TS] = pd.Series(dtype="Int64")
        return frame.reset_index(drop=True)
    grouped = waiting.groupby(_KEYS, dropna=False, sort=True)
    out = grouped.agg(
        pending_pods=("pod_id", "size"),
        pending_gpus=("gpu_count", "sum"),
        oldest_pending_ts=("created_ts", "min"),
    ).reset_index()
    out = out.rename(
        columns={
            "pending_pods": c.PENDING_PODS,
            "pending_gpus": c.PENDING_GPUS,
            "oldest_pending_ts": c.OLDEST_PENDING_TS,
        }
    )
    return out.sort_values(c.PENDING_GPUS, ascending=False, kind="stable").reset_index(drop=True)


def pending_gpu_timeseries(
    pods: pd.DataFrame, start_ts: int, end_ts: int, bucket_s: int
) -> pd.DataFrame:
    """GPUs and pods waiting at the start of each bucket in ``[start_ts, end_ts)``, per cluster."""
    if bucket_s <= 0:
        raise ValueError(f"bucket must be a positive number of seconds, got {bucket_s}")
    rows = []
    for at_ts in range(start_ts - start_ts % bucket_s, end_ts, bucket_s):
        waiting = pods[_waiting(pods, at_ts)]
        for cluster, group in waiting.groupby("cluster", sort=True):
            rows.append((cluster, at_ts, len(group), int(group["gpu_count"].sum())))
    frame = pd.DataFrame(rows, columns=["cluster", c.BUCKET_TS, c.PENDING_PODS, c.PENDING_GPUS])
    return frame.astype({"cluster": "string", c.BUCKET_TS: "int64"})
