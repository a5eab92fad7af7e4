"""Stranded capacity (docs/cost-model.md#scheduling): free GPUs that a pending pod cannot use
because they are scattered over nodes.

Per hour and (cluster, GPU model): each node's free GPUs are the GPU-equivalent hours of its
units that no pod held in the hour (the mean free GPUs). A pod Pending during the hour that
asks for ``r`` devices of ``nvidia.com/gpu`` is unplaceable there when ``r`` ≤ the free GPUs of
the model's nodes together but ``r`` > the whole free GPUs of every single node. The free
GPU-hours of the model in such hours are stranded.

``samples`` is the costed samples frame (:func:`gpuwatch.analytics.costing.prepare`) of raw
samples or hourly roll-ups; ``pods`` is POD_COLUMNS. Pure.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.gangs import pending_intervals
from gpuwatch.analytics.grouping import group_sum
from gpuwatch.analytics.summary import as_text
from gpuwatch.domain.durations import HOUR_S

#: The resource of whole GPUs (the requests stranded capacity is judged by).
WHOLE_GPU = "nvidia.com/gpu"

#: Keys of ``gpuwatch capacity`` (contract section 7), in order.
CAPACITY_REPORT_COLUMNS: tuple[str, ...] = (
    "cluster",
    "gpu_model",
    "free_gpu_hours",
    "stranded_gpu_hours",
    "stranded_cost_usd",
    "largest_unplaceable_request",
)
#: Columns of :func:`capacity_timeline`, in order.
CAPACITY_TIMELINE_COLUMNS: tuple[str, ...] = (
    "ts",
    "cluster",
    "gpu_model",
    "free_gpus",
    "stranded_gpus",
    "largest_unplaceable_request",
)
#: Columns of :func:`consolidate_hint`, in order.
CONSOLIDATE_COLUMNS: tuple[str, ...] = (
    "cluster",
    "gpu_model",
    "ts",
    "request_gpus",
    "node",
    "move_gpus",
)


#: A request fits free GPUs within this slack (sums of float shares).
_EPS = 1e-9


def _empty(names: tuple[str, ...]) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=object) for name in names})


def node_hours(samples: pd.DataFrame, start_ts: int, end_ts: int) -> pd.DataFrame:
    """Per hour (``ts``) and (cluster, gpu_model, node): ``free_gpus`` (GPU-equivalent hours no
    pod held), ``free_cost_usd`` (their cost) and ``gpus`` (GPU-equivalent hours of all units)."""
    ts = samples["ts"].to_numpy(dtype="int64")
    rows = samples[(ts >= start_ts) & (ts < end_ts)]
    keys = pd.DataFrame(
        {k: rows[k].reset_index(drop=True) for k in ("cluster", "gpu_model", "node")}
    )
    hour = rows["ts"].to_numpy(dtype="int64")
    keys.insert(0, "ts", hour - hour % HOUR_S)
    hours = rows[c.GPU_HOURS].to_numpy(dtype="float64")
    free = np.where(rows[c.ALLOCATED].to_numpy(dtype=bool), 0.0, hours)
    cost = free * rows[c.USD_PER_HOUR].to_numpy(dtype="float64")
    out = group_sum(keys, {"free_gpus": free, "free_cost_usd": cost, "gpus": hours})
    return as_text(out, ["cluster", "gpu_model", "node"])


def pending_requests(pods: pd.DataFrame, start_ts: int, end_ts: int) -> pd.DataFrame:
    """Per hour (``ts``) of ``[start_ts, end_ts)``: the cluster and request ``request_gpus`` of
    each pod Pending during the hour that asks for whole ``nvidia.com/gpu`` devices."""
    whole = pods[pods["gpu_resource"].eq(WHOLE_GPU).fillna(False).astype(bool)]
    whole = whole[whole["gpu_count"].gt(0)]
    spans = pending_intervals(whole, end_ts)
    rows: list[tuple[int, str, int]] = []
    first = start_ts - start_ts % HOUR_S
    clusters = whole.loc[spans.index, "cluster"].astype(object).to_numpy()
    counts = whole.loc[spans.index, "gpu_count"].to_numpy(dtype="int64")
    begins = spans["pending_from_ts"].to_numpy(dtype="float64")
    finishes = spans["pending_to_ts"].to_numpy(dtype="float64")
    for cluster, count, begin, finish in zip(clusters, counts, begins, finishes, strict=True):
        if not finish > begin:  # started as soon as it was created: it never waited
            continue
        low = max(first, int(begin) - int(begin) % HOUR_S)
        for hour in range(low, min(int(np.ceil(finish)), end_ts), HOUR_S):
            if hour + HOUR_S > begin and hour < finish:
                rows.append((hour, str(cluster), int(count)))
    return pd.DataFrame(rows, columns=["ts", "cluster", "request_gpus"]).astype(
        {"ts": "int64", "cluster": "string", "request_gpus": "int64"}
    )


def model_hours(
    samples: pd.DataFrame, pods: pd.DataFrame, start_ts: int, end_ts: int
) -> pd.DataFrame:
    """Per hour and (cluster, gpu_model): ``free_gpus``, ``free_cost_usd``, ``max_node_free``
    (the most whole free GPUs of one node), ``largest_unplaceable_request`` (0: none),
    ``stranded_gpus`` and ``stranded_cost_usd``."""
    nodes = node_hours(samples, start_ts, end_ts)
    nodes["whole_free"] = np.floor(nodes["free_gpus"].to_numpy(dtype="float64") + _EPS)
    keys = ["ts", "cluster", "gpu_model"]
    out = (
        nodes.groupby(keys, sort=True)
        .agg(
            free_gpus=("free_gpus", "sum"),
            free_cost_usd=("free_cost_usd", "sum"),
            max_node_free=("whole_free", "max"),
        )
        .reset_index()
    )
    asks = pending_requests(pods, start_ts, end_ts)
    pairs = out[[*keys, "free_gpus", "max_node_free"]].merge(asks, on=["ts", "cluster"])
    request = pairs["request_gpus"].to_numpy(dtype="float64")
    stuck = (request <= pairs["free_gpus"].to_numpy() + _EPS) & (
        request > pairs["max_node_free"].to_numpy()
    )
    largest = pairs[stuck].groupby(keys)["request_gpus"].max().rename("largest_unplaceable_request")
    out = out.merge(largest.reset_index(), on=keys, how="left")
    out["largest_unplaceable_request"] = (
        out["largest_unplaceable_request"].fillna(0).astype("int64")
    )
    stranded = out["largest_unplaceable_request"].to_numpy() > 0
    out["stranded_gpus"] = np.where(stranded, out["free_gpus"], 0.0)
    out["stranded_cost_usd"] = np.where(stranded, out["free_cost_usd"], 0.0)
    return out


def capacity_report(
    samples: pd.DataFrame, pods: pd.DataFrame, start_ts: int, end_ts: int
) -> pd.DataFrame:
    """One row per (cluster, GPU model) with GPUs in the window (columns
    :data:`CAPACITY_REPORT_COLUMNS`), most stranded dollars first.

    ``free_gpu_hours``: GPU-equivalent hours no pod held; ``stranded_gpu_hours`` and
    ``stranded_cost_usd``: those of the hours with an unplaceable pod;
    ``largest_unplaceable_request``: the largest request unplaceable in any hour (0: none)."""
    if samples.empty:
        return _empty(CAPACITY_REPORT_COLUMNS)
    hours = model_hours(samples, pods, start_ts, end_ts)
    if hours.empty:
        return _empty(CAPACITY_REPORT_COLUMNS)
    out = (
        hours.groupby(["cluster", "gpu_model"], sort=True)
        .agg(
            free_gpu_hours=("free_gpus", "sum"),
            stranded_gpu_hours=("stranded_gpus", "sum"),
            stranded_cost_usd=("stranded_cost_usd", "sum"),
            largest_unplaceable_request=("largest_unplaceable_request", "max"),
        )
        .reset_index()
    )
    out = out.sort_values("stranded_cost_usd", ascending=False, kind="stable")
    return out[list(CAPACITY_REPORT_COLUMNS)].reset_index(drop=True)


def capacity_timeline(
    samples: pd.DataFrame, pods: pd.DataFrame, start_ts: int, end_ts: int
) -> pd.DataFrame:
    """Per hour (``ts``) and (cluster, GPU model): ``free_gpus`` and ``stranded_gpus`` (mean
    GPUs over the hour) and the ``largest_unplaceable_request`` of the hour (0: none), for a
    chart (columns :data:`CAPACITY_TIMELINE_COLUMNS`)."""
    if samples.empty:
        return _empty(CAPACITY_TIMELINE_COLUMNS)
    hours = model_hours(samples, pods, start_ts, end_ts)
    return hours[list(CAPACITY_TIMELINE_COLUMNS)].reset_index(drop=True)


def consolidate_hint(
    samples: pd.DataFrame, pods: pd.DataFrame, start_ts: int, end_ts: int
) -> pd.DataFrame:
    """Where to make room for the largest unplaceable request (columns
    :data:`CONSOLIDATE_COLUMNS`): per (cluster, GPU model), at the last hour the largest
    request ``r`` was unplaceable, each node with at least ``r`` GPUs where moving
    ``move_gpus = r − ⌊free⌋`` GPUs' pods to the whole free GPUs of the model's other nodes
    would let ``r`` fit. Fewest GPUs to move first."""
    if samples.empty:
        return _empty(CONSOLIDATE_COLUMNS)
    hours = model_hours(samples, pods, start_ts, end_ts)
    nodes = node_hours(samples, start_ts, end_ts)
    rows = []
    for group_key, group in hours.groupby(["cluster", "gpu_model"], sort=True):
        cluster, model = (str(part) for part in cast(tuple[object, object], group_key))
        largest = int(group["largest_unplaceable_request"].max())
        if largest <= 0:
            continue
        at = int(group.loc[group["largest_unplaceable_request"].eq(largest), "ts"].max())
        here = nodes[
            nodes["ts"].eq(at) & nodes["cluster"].eq(cluster) & nodes["gpu_model"].eq(model)
        ]
        rows += _movable(here, largest, cluster, model, at)
    frame = pd.DataFrame(rows, columns=list(CONSOLIDATE_COLUMNS))
    return frame.sort_values(
        ["cluster", "gpu_model", "move_gpus", "node"], kind="stable"
    ).reset_index(drop=True)


def _movable(
    nodes: pd.DataFrame, request: int, cluster: str, model: str, at: int
) -> list[tuple[object, ...]]:
    whole = np.floor(nodes["free_gpus"].to_numpy(dtype="float64") + _EPS)
    size = np.floor(nodes["gpus"].to_numpy(dtype="float64") + _EPS)
    total = float(whole.sum())
    rows: list[tuple[object, ...]] = []
    for name, free, units in zip(nodes["node"], whole, size, strict=True):
        move = request - int(free)
        if units >= request and move <= total - free:
            rows.append((cluster, model, at, request, str(name), move))
    return rows
