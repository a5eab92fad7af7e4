"""Queues and quotas (docs/cost-model.md#scheduling): per (cluster, ClusterQueue, flavor), the
quota, what its pods held and used, borrowing and lending, pending work and idle quota.

Inputs: ``queues`` (QUEUE_COLUMNS), ``workloads`` (SCHED_WORKLOAD_COLUMNS), ``pods``
(POD_COLUMNS) and ``samples``, the costed samples frame
(:func:`gpuwatch.analytics.costing.prepare`) of raw samples or hourly roll-ups. Figures are
taken per hour of ``[start_ts, end_ts)`` (an hour's GPU-hours are its mean GPUs). Pure.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.gangs import pending_intervals, stalled_samples
from gpuwatch.analytics.grouping import group_sum
from gpuwatch.domain.allocation import gpu_share
from gpuwatch.domain.durations import HOUR_S
from gpuwatch.domain.pricing import PriceBook, normalize_model_name
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


FLAVOR_KEYS = ["cluster", "queue", "flavor"]
_MIG_PREFIX = "nvidia.com/mig-"


def _empty(names: tuple[str, ...]) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=object) for name in names})


def resource_share(resource: object, model: object = None) -> float:
    """GPU-equivalents of one device of a resource: 1 for a whole GPU, g/7 for a MIG one."""
    if isinstance(resource, str) and resource.startswith(_MIG_PREFIX):
        return gpu_share(resource[len(_MIG_PREFIX) :], model, 1)
    return 1.0


def _model_key(model: object) -> str:
    return normalize_model_name(model) if isinstance(model, str) and model else ""


def flavors(queues: pd.DataFrame) -> pd.DataFrame:
    """Per (cluster, queue, flavor): cohort, gpu_model, ``nominal_gpus`` (GPU-equivalents
    summed over its GPU resources), first and last seen, and ``single`` (its queue's only
    flavor)."""
    frame = queues.copy()
    shares = [
        resource_share(r, m) for r, m in zip(frame["gpu_resource"], frame["gpu_model"], strict=True)
    ]
    frame["nominal_gpus"] = frame["nominal_gpus"].astype("float64") * np.array(shares)
    for name in FLAVOR_KEYS:
        frame[name] = frame[name].astype(object).where(frame[name].notna(), "")
    grouped = frame.groupby(FLAVOR_KEYS, sort=True)
    out = grouped.agg(
        cohort=("cohort", "first"),
        gpu_model=("gpu_model", "first"),
        nominal_gpus=("nominal_gpus", "sum"),
        first_seen_ts=("first_seen_ts", "min"),
        last_seen_ts=("last_seen_ts", "max"),
    ).reset_index()
    out["single"] = out.groupby(["cluster", "queue"])["flavor"].transform("size").eq(1)
    out["model_key"] = [_model_key(m) for m in out["gpu_model"]]
    return out


def hours_of(start_ts: int, end_ts: int) -> np.ndarray:
    """Starts of the hours that overlap ``[start_ts, end_ts)``."""
    return np.arange(start_ts - start_ts % HOUR_S, end_ts, HOUR_S, dtype="int64")


def _assign(rows: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Rows with (cluster, queue, gpu_model) given their flavor: the queue's only flavor, else
    the flavor whose model matches (rows matching none are left out)."""
    rows = rows.assign(model_key=[_model_key(m) for m in rows["gpu_model"]])
    facts = table[[*FLAVOR_KEYS, "single", "model_key"]]
    pairs = rows.drop(columns="gpu_model").merge(
        facts, on=["cluster", "queue"], suffixes=("", "_flavor")
    )
    keep = pairs["single"] | pairs["model_key"].eq(pairs["model_key_flavor"])
    return pairs[keep.to_numpy(dtype=bool)]


def _held(samples: pd.DataFrame, pods: pd.DataFrame, values: dict[str, np.ndarray]) -> pd.DataFrame:
    """Held samples of pods with a queue, summed per (cluster, queue, gpu_model, hour)."""
    queue_of = pods.drop_duplicates("pod_id").set_index("pod_id")["queue"].dropna()
    mask = samples[c.ALLOCATED].to_numpy(dtype=bool) & samples["pod_id"].isin(
        queue_of.index
    ).to_numpy(dtype=bool)
    rows = samples[mask]
    ts = rows["ts"].to_numpy(dtype="int64")
    keys = pd.DataFrame(
        {
            "cluster": rows["cluster"].astype(object).to_numpy(),
            "queue": rows["pod_id"].map(queue_of).astype(object).to_numpy(),
            "gpu_model": rows["gpu_model"].astype(object).to_numpy(),
            "ts": ts - ts % HOUR_S,
        }
    )
    return group_sum(keys, {name: v[mask] for name, v in values.items()})


def _overlaps(begin: float, finish: float, hours: np.ndarray) -> np.ndarray:
    """Hours of each hour of ``hours`` inside ``[begin, finish)``."""
    inside = np.minimum(hours + HOUR_S, finish) - np.maximum(hours, begin)
    out: np.ndarray = np.clip(inside, 0.0, None) / HOUR_S
    return out


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict("records")]


def _admissions(workloads: pd.DataFrame) -> dict[tuple[str, str, str], float]:
    """Admission instant (inf: never) of each Workload or PodGroup, by (cluster, namespace,
    gang name): its own name and its owner's ``kind/name``."""
    out: dict[tuple[str, str, str], float] = {}
    for row in _records(workloads):
        admitted = float("inf") if pd.isna(row["admitted_ts"]) else float(row["admitted_ts"])
        where = (str(row["cluster"]), str(row["namespace"]))
        out[(*where, str(row["name"]))] = admitted
        kind, name = row["owner_kind"], row["owner_name"]
        if isinstance(kind, str) and isinstance(name, str):
            out[(*where, f"{kind.lower()}/{name}")] = admitted
    return out


def pending_items(workloads: pd.DataFrame, pods: pd.DataFrame, end_ts: int) -> pd.DataFrame:
    """What waited, per queue: columns cluster, queue, flavor (<NA>: none), gpus, begin,
    finish. Workloads not yet admitted ask for their requests from creation to admission (else
    finish, else last seen); Pending pods of queues count from their creation, or from their
    Workload's admission when their gang is one (never before it)."""
    rows: list[tuple[object, ...]] = []
    for w in _records(workloads):
        if pd.isna(w["created_ts"]) or pd.isna(w["queue"]):
            continue
        ends = (w["admitted_ts"], w["finished_ts"], w["last_seen_ts"])
        stop = next((float(v) for v in ends if not pd.isna(v)), float(end_ts))
        gpus = float(w["gpus_requested"]) * resource_share(w["gpu_resource"])
        rows.append((w["cluster"], w["queue"], w["flavor"], gpus, float(w["created_ts"]), stop))
    admitted = _admissions(workloads)
    queued = pods[pods["queue"].notna() & pods["gpu_count"].gt(0)]
    spans = pending_intervals(queued, end_ts)
    facts = _records(queued.loc[spans.index])
    begins = spans["pending_from_ts"].to_numpy(dtype="float64")
    finishes = spans["pending_to_ts"].to_numpy(dtype="float64")
    for pod, created, finish in zip(facts, begins, finishes, strict=True):
        gang = (str(pod["cluster"]), str(pod["namespace"]), str(pod["gang_name"]))
        begin = max(created, admitted.get(gang, created))
        gpus = float(pod["gpu_count"]) * resource_share(pod["gpu_resource"])
        rows.append((pod["cluster"], pod["queue"], pd.NA, gpus, float(begin), float(finish)))
    return pd.DataFrame(rows, columns=["cluster", "queue", "flavor", "gpus", "begin", "finish"])


def _pending(items: pd.DataFrame, table: pd.DataFrame, hours: np.ndarray) -> pd.DataFrame:
    """Pending GPUs per (cluster, queue, flavor, hour): a workload's own flavor when it is
    one of its queue's, else the queue's first flavor in name order."""
    first = table.groupby(["cluster", "queue"], sort=True)["flavor"].first()
    known = set(table[FLAVOR_KEYS].itertuples(index=False, name=None))
    rows = []
    for item in _records(items):
        key = (str(item["cluster"]), str(item["queue"]), str(item["flavor"]))
        if key not in known:
            if (key[0], key[1]) not in first.index:
                continue
            key = (key[0], key[1], str(first[(key[0], key[1])]))
        share = _overlaps(item["begin"], item["finish"], hours) * float(item["gpus"])
        rows += [(*key, int(h), float(v)) for h, v in zip(hours, share, strict=True) if v > 0]
    frame = pd.DataFrame(rows, columns=[*FLAVOR_KEYS, "ts", "pending_gpus"])
    return frame.groupby([*FLAVOR_KEYS, "ts"], as_index=False)[["pending_gpus"]].sum()


def _sum_flavors(rows: pd.DataFrame, table: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    if rows.empty:
        return pd.DataFrame(columns=[*FLAVOR_KEYS, "ts", *names])
    rows = rows.astype({"cluster": object, "queue": object, "gpu_model": object})
    return _assign(rows, table).groupby([*FLAVOR_KEYS, "ts"], as_index=False)[names].sum()


def queue_hours(
    queues: pd.DataFrame,
    workloads: pd.DataFrame,
    pods: pd.DataFrame,
    samples: pd.DataFrame,
    policy: SchedulingPolicy,
    start_ts: int,
    end_ts: int,
) -> pd.DataFrame:
    """Per (cluster, queue, flavor) and hour ``ts``: ``quota_gpus``, ``allocated_gpus``,
    ``busy_gpus``, ``pending_gpus``, ``stalled_gpus``, ``borrowed_gpus``, ``lent_gpus`` and
    ``idle_quota_gpus`` (GPU-hours in the hour), with the flavor's cohort, model and nominal."""
    table = flavors(queues)
    hours = hours_of(start_ts, end_ts)
    grid = table.merge(pd.DataFrame({"ts": hours}), how="cross")
    ts = grid["ts"].to_numpy()
    # the share of the hour the queue existed: from its creation (or first sighting) to its
    # last sighting, never an hour past it
    since = np.maximum(grid["first_seen_ts"].to_numpy(dtype="float64"), ts)
    until = np.minimum(grid["last_seen_ts"].to_numpy(dtype="float64"), ts + HOUR_S)
    existed = np.clip(until - since, 0.0, HOUR_S) / HOUR_S
    grid["quota_gpus"] = existed * grid["nominal_gpus"].to_numpy(dtype="float64")
    window = samples[(samples["ts"] >= start_ts).to_numpy() & (samples["ts"] < end_ts).to_numpy()]
    hours_ = window[c.GPU_HOURS].to_numpy(dtype="float64")
    held = _held(
        window,
        pods,
        {"allocated_gpus": hours_, "busy_gpus": hours_ * window[c.UTIL].to_numpy(dtype="float64")},
    )
    stalled = stalled_samples(window, pods, policy, start_ts, end_ts)
    stalled_by = (
        _held(
            stalled, pods, {"stalled_gpus": stalled[c.STALLED_GPU_HOURS].to_numpy(dtype="float64")}
        )
        if len(stalled)
        else pd.DataFrame()
    )
    parts = [
        _sum_flavors(held, table, ["allocated_gpus", "busy_gpus"]),
        _sum_flavors(stalled_by, table, ["stalled_gpus"]),
        _pending(pending_items(workloads, pods, end_ts), table, hours),
    ]
    for part in parts:
        grid = grid.merge(part, on=[*FLAVOR_KEYS, "ts"], how="left")
    for name in ("allocated_gpus", "busy_gpus", "stalled_gpus", "pending_gpus"):
        grid[name] = grid[name].astype("float64").fillna(0.0)
    return _cohort_figures(grid)


def _cohort_figures(grid: pd.DataFrame) -> pd.DataFrame:
    """Borrowed, lent and idle quota per row, from the cohort's rows of the same hour (a queue
    without a cohort is a cohort of its own)."""
    own = grid["cluster"].astype(str) + "\0" + grid["queue"].astype(str)
    grid["_cohort"] = (
        grid["cluster"].astype(str)
        + "\0"
        + grid["cohort"].astype(object).where(grid["cohort"].notna(), own).astype(str)
    )
    spare = np.maximum(grid["quota_gpus"] - grid["allocated_gpus"], 0.0)
    grid["borrowed_gpus"] = np.maximum(grid["allocated_gpus"] - grid["quota_gpus"], 0.0)
    by_hour = grid.groupby(["_cohort", "ts"])
    others = by_hour["borrowed_gpus"].transform("sum") - grid["borrowed_gpus"]
    grid["lent_gpus"] = np.minimum(spare, others)
    waiting = by_hour["pending_gpus"].transform("sum") > 0
    grid["idle_quota_gpus"] = np.where(waiting, spare, 0.0)
    return grid.drop(columns="_cohort")


_SUMS = {
    "quota_gpu_hours": "quota_gpus",
    "allocated_gpu_hours": "allocated_gpus",
    "busy_gpu_hours": "busy_gpus",
    "borrowed_gpu_hours": "borrowed_gpus",
    "lent_gpu_hours": "lent_gpus",
    "pending_gpu_hours": "pending_gpus",
    "stalled_gpu_hours": "stalled_gpus",
    "idle_quota_gpu_hours": "idle_quota_gpus",
}


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

    Sums over the hours of :func:`queue_hours`; ``idle_quota_usd`` prices idle quota at the
    flavor's model on demand (the default price when unknown)."""
    if queues.empty:
        return _empty(QUEUE_REPORT_COLUMNS)
    grid = queue_hours(queues, workloads, pods, samples, policy, start_ts, end_ts)
    keys = [*FLAVOR_KEYS, "cohort", "gpu_model", "nominal_gpus"]
    grouped = grid.groupby(FLAVOR_KEYS, sort=True)
    out = (
        grouped[keys[3:]]
        .first()
        .join(grouped[list(_SUMS.values())].sum().rename(columns={v: k for k, v in _SUMS.items()}))
    )
    out = out.reset_index()
    prices = [
        price_book.usd_per_gpu_hour(m if isinstance(m, str) and m else None, "on_demand")
        for m in out["gpu_model"]
    ]
    out["idle_quota_usd"] = out["idle_quota_gpu_hours"].to_numpy() * np.array(prices)
    out = out.sort_values(
        ["cluster", "cohort", "queue", "flavor"], kind="stable", na_position="last"
    )
    return out[list(QUEUE_REPORT_COLUMNS)].reset_index(drop=True)


def queue_timeline(
    queues: pd.DataFrame,
    workloads: pd.DataFrame,
    pods: pd.DataFrame,
    samples: pd.DataFrame,
    policy: SchedulingPolicy,
    start_ts: int,
    end_ts: int,
) -> pd.DataFrame:
    """Per hour (``ts``) and (cluster, queue, flavor): ``quota_gpus`` (nominal while the queue
    existed), ``allocated_gpus``, ``busy_gpus`` and ``pending_gpus`` (mean GPUs over the hour),
    for a chart (columns :data:`QUEUE_TIMELINE_COLUMNS`)."""
    if queues.empty:
        return _empty(QUEUE_TIMELINE_COLUMNS)
    grid = queue_hours(queues, workloads, pods, samples, policy, start_ts, end_ts)
    grid = grid.sort_values(["ts", *FLAVOR_KEYS], kind="stable")
    return grid[list(QUEUE_TIMELINE_COLUMNS)].reset_index(drop=True)
