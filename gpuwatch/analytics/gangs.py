"""Stalled gangs (docs/cost-model.md#scheduling).

A gang is the pods of one (cluster, namespace, gang_kind, gang_name). It is stalled while one of
its pods has been Pending longer than ``gang_stall_after``; the GPU-hours its running pods hold
meanwhile are stalled GPU-hours, priced as every other sample.

``samples`` is the costed samples frame (:func:`gpuwatch.analytics.costing.prepare`) of raw
samples or hourly roll-ups: a row stands for ``[ts, ts + step_s)`` and its stalled share is the
share of that interval the gang spent stalled (for raw samples on the step grid: the sample
instant). Pure: frames in, frames out.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.grouping import group_ids, joined_per_group
from gpuwatch.domain.durations import HOUR_S
from gpuwatch.domain.scheduling import SchedulingPolicy

GANG_KEYS: tuple[str, ...] = ("cluster", "namespace", "gang_kind", "gang_name")
#: Columns of :func:`gang_stalls`, in order.
GANG_STALL_COLUMNS: tuple[str, ...] = (
    *GANG_KEYS,
    "queue",
    "team",
    "workload_kind",
    "workload",
    "gang_size",
    "running_pods",
    "pending_pods",
    c.STALLED_GPU_HOURS,
    c.STALLED_COST_USD,
    "first_stalled_ts",
    "last_stalled_ts",
)
#: Columns of :func:`workload_stalls`, in order.
WORKLOAD_STALL_COLUMNS: tuple[str, ...] = (
    *c.WORKLOAD_KEYS,
    "queue",
    c.STALLED_GPU_HOURS,
    c.STALLED_COST_USD,
)


def pending_intervals(pods: pd.DataFrame, end_ts: int) -> pd.DataFrame:
    """Each pod's Pending interval ``[pending_from_ts, pending_to_ts)``: from its creation to
    its start, else its finish, else ``end_ts`` (pods the API never listed, known from DCGM
    only, have none). Columns: ``pod_id``, ``pending_from_ts``, ``pending_to_ts``."""
    listed = pods[~pods["dcgm_only"].fillna(False).astype(bool) & pods["created_ts"].notna()]
    start = listed["created_ts"].to_numpy(dtype="float64", na_value=np.nan)
    started = listed["started_ts"].to_numpy(dtype="float64", na_value=np.nan)
    finished = listed["finished_ts"].to_numpy(dtype="float64", na_value=np.nan)
    until = np.where(np.isnan(started), np.where(np.isnan(finished), end_ts, finished), started)
    return pd.DataFrame(
        {
            "pod_id": listed["pod_id"].to_numpy(dtype="int64"),
            "pending_from_ts": start,
            "pending_to_ts": until,
        },
        index=listed.index,
    )


def stall_intervals(
    pods: pd.DataFrame, policy: SchedulingPolicy, start_ts: int, end_ts: int
) -> dict[tuple[str, str, str, str], list[tuple[float, float]]]:
    """Per gang: the disjoint, sorted intervals within ``[start_ts, end_ts)`` during which one
    of its pods had been Pending longer than ``policy.gang_stall_after_s``."""
    ganged = pods[pods["gang_name"].notna() & pods["gang_kind"].notna()]
    if ganged.empty:
        return {}
    spans = pending_intervals(ganged, end_ts)
    begin = np.maximum(spans["pending_from_ts"].to_numpy() + policy.gang_stall_after_s, start_ts)
    finish = np.minimum(spans["pending_to_ts"].to_numpy(), end_ts)
    keep = finish > begin
    rows = ganged.loc[spans.index[keep], list(GANG_KEYS)].astype(object)
    out: dict[tuple[str, str, str, str], list[tuple[float, float]]] = {}
    for key, b, f in zip(
        rows.itertuples(index=False, name=None), begin[keep], finish[keep], strict=True
    ):
        out.setdefault(key, []).append((float(b), float(f)))
    return {key: _union(spans_) for key, spans_ in out.items()}


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for begin, finish in sorted(spans):
        if merged and begin <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], finish))
        else:
            merged.append((begin, finish))
    return merged


def stalled_share(
    ts: np.ndarray, step_s: np.ndarray, spans: list[tuple[float, float]]
) -> np.ndarray:
    """The share (0–1) of each row's interval ``[ts, ts + step_s)`` inside ``spans``."""
    ts = ts.astype("float64")
    ends = ts + step_s.astype("float64")
    inside = np.zeros(len(ts))
    for begin, finish in spans:
        inside += np.clip(np.minimum(ends, finish) - np.maximum(ts, begin), 0.0, None)
    width = np.where(ends > ts, ends - ts, 1.0)
    return np.where(ends > ts, inside / width, 0.0)


def _spans_s(rows: pd.DataFrame) -> np.ndarray:
    """Each row's span: a raw sample's step; an hourly roll-up row (it counts ``samples``) the
    whole hour, its samples taken as spread evenly over it (which minutes of a partly stalled
    hour held them, the roll-up does not say)."""
    if c.SAMPLES in rows.columns:
        return np.full(len(rows), HOUR_S, dtype="int64")
    return rows["step_s"].to_numpy(dtype="int64")


def stalled_samples(
    samples: pd.DataFrame,
    pods: pd.DataFrame,
    policy: SchedulingPolicy,
    start_ts: int,
    end_ts: int,
) -> pd.DataFrame:
    """The held samples of pods of stalled gangs, with the gang's keys and
    ``stalled_gpu_hours``/``stalled_cost_usd`` (the row's share held while stalled); rows with
    none left out."""
    columns = [*samples.columns, *GANG_KEYS[2:], c.STALLED_GPU_HOURS, c.STALLED_COST_USD]
    stalls = stall_intervals(pods, policy, start_ts, end_ts)
    if not stalls or samples.empty:
        return pd.DataFrame(columns=columns)
    gang_pods = pods[pods["gang_name"].notna() & pods["gang_kind"].notna()]
    # only the pods of gangs that stalled: most gangs never do, and their rows are most rows
    gang_keys = list(gang_pods[list(GANG_KEYS)].astype(object).itertuples(index=False, name=None))
    stalled_gang = [tuple(str(part) for part in key) in stalls for key in gang_keys]
    gang_pods = gang_pods[np.array(stalled_gang, dtype=bool)]
    mask = samples[c.ALLOCATED].to_numpy(dtype=bool) & samples["pod_id"].notna().to_numpy()
    mask &= samples["pod_id"].isin(gang_pods["pod_id"]).to_numpy(dtype=bool)
    held = samples[mask]  # one copy of the few rows, never of the whole window
    if held.empty:
        return pd.DataFrame(columns=columns)
    facts = gang_pods.set_index("pod_id")[list(GANG_KEYS)].astype(object)
    ids = held["pod_id"].to_numpy(dtype="int64")
    keys = facts.loc[ids]
    ts, spans_s = held["ts"].to_numpy(), _spans_s(held)
    share = np.zeros(len(held))
    kinds = np.empty(len(held), dtype=object)
    names = np.empty(len(held), dtype=object)
    for group, index in keys.groupby(list(GANG_KEYS), sort=False).indices.items():
        key = tuple(str(part) for part in cast(tuple[object, ...], group))
        spans = stalls.get((key[0], key[1], key[2], key[3]))
        if spans:
            share[index] = stalled_share(ts[index], spans_s[index], spans)
            kinds[index], names[index] = key[2], key[3]
    stalled = share > 0
    if not stalled.any():
        return pd.DataFrame(columns=columns)
    rows = held[stalled].reset_index(drop=True)
    rows["gang_kind"], rows["gang_name"] = kinds[stalled], names[stalled]
    hours = rows[c.GPU_HOURS].to_numpy(dtype="float64") * share[stalled]
    rows[c.STALLED_GPU_HOURS] = hours
    rows[c.STALLED_COST_USD] = hours * rows[c.USD_PER_HOUR].to_numpy(dtype="float64")
    return rows


def _most_common(values: pd.Series) -> object:
    counts = values.dropna().astype(str).value_counts()
    if counts.empty:
        return pd.NA
    return sorted(counts[counts == counts.max()].index)[0]


Spans = dict[tuple[str, str, str, str], list[tuple[float, float]]]
_SEP = "\x1f"


def _gang_facts(pods: pd.DataFrame, stalls: Spans) -> pd.DataFrame:
    ganged = pods[pods["gang_name"].notna() & pods["gang_kind"].notna()].copy()
    ganged["_key"] = list(ganged[list(GANG_KEYS)].astype(object).itertuples(index=False, name=None))
    ganged = ganged[ganged["_key"].isin(list(stalls))]
    # the owner is picked as one (kind, name) pair, never a kind of one pod and a name of another
    ganged["_owner"] = ganged["workload_kind"].astype(str) + _SEP + ganged["workload"].astype(str)
    grouped = ganged.groupby(list(GANG_KEYS), sort=True)
    facts = pd.DataFrame(
        {
            "team": grouped["team"].agg(_most_common),
            "owner": grouped["_owner"].agg(_most_common),
            "gang_size": grouped["gang_size"].max(),
        }
    ).reset_index()
    owner = facts.pop("owner").astype(object)
    split = [str(o).split(_SEP, 1) if isinstance(o, str) else [pd.NA, pd.NA] for o in owner]
    facts["workload_kind"] = [kind for kind, _ in split]
    facts["workload"] = [name for _, name in split]
    queues = _joined_per_group(ganged, list(GANG_KEYS), "queue")
    return facts.merge(queues, on=list(GANG_KEYS), how="left")


def gang_stalls(
    samples: pd.DataFrame,
    pods: pd.DataFrame,
    policy: SchedulingPolicy,
    start_ts: int,
    end_ts: int,
) -> pd.DataFrame:
    """One row per gang whose running pods held GPUs while it was stalled in
    ``[start_ts, end_ts)``, most dollars first (columns :data:`GANG_STALL_COLUMNS`).

    ``running_pods``: its pods with stalled GPU-hours; ``pending_pods``: its pods Pending longer
    than the threshold within the window; ``queue``: its pods' queues, ``+``-joined; ``team``,
    ``workload_kind``, ``workload``: the most common among its pods; ``first_stalled_ts`` and
    ``last_stalled_ts``: the first and last instant it was stalled within the window.
    """
    rows = stalled_samples(samples, pods, policy, start_ts, end_ts)
    if rows.empty:
        return pd.DataFrame({name: pd.Series(dtype=object) for name in GANG_STALL_COLUMNS})
    stalls = stall_intervals(pods, policy, start_ts, end_ts)
    keys = pd.DataFrame({k: rows[k].astype(object) for k in GANG_KEYS})
    keys["pod_id"] = rows["pod_id"].to_numpy(dtype="int64")
    keys[c.STALLED_GPU_HOURS] = rows[c.STALLED_GPU_HOURS].to_numpy(dtype="float64")
    keys[c.STALLED_COST_USD] = rows[c.STALLED_COST_USD].to_numpy(dtype="float64")
    out = keys.groupby(list(GANG_KEYS), sort=True).agg(
        running_pods=("pod_id", "nunique"),
        stalled_gpu_hours=(c.STALLED_GPU_HOURS, "sum"),
        stalled_cost_usd=(c.STALLED_COST_USD, "sum"),
    )
    out = out.reset_index().merge(_gang_facts(pods, stalls), on=list(GANG_KEYS), how="left")
    spans = [stalls[key] for key in out[list(GANG_KEYS)].itertuples(index=False, name=None)]
    out["first_stalled_ts"] = [int(s[0][0]) for s in spans]
    out["last_stalled_ts"] = [int(s[-1][1]) for s in spans]
    out["pending_pods"] = _pending_counts(pods, policy, start_ts, end_ts, out)
    out = out.sort_values(c.STALLED_COST_USD, ascending=False, kind="stable")
    return out[list(GANG_STALL_COLUMNS)].reset_index(drop=True)


def _pending_counts(
    pods: pd.DataFrame, policy: SchedulingPolicy, start_ts: int, end_ts: int, gangs: pd.DataFrame
) -> list[int]:
    ganged = pods[pods["gang_name"].notna() & pods["gang_kind"].notna()]
    spans = pending_intervals(ganged, end_ts)
    begin = np.maximum(spans["pending_from_ts"] + policy.gang_stall_after_s, start_ts)
    late = ganged.loc[spans.index[(np.minimum(spans["pending_to_ts"], end_ts) > begin)]]
    counts = late.groupby(list(GANG_KEYS)).size()
    keys = gangs[list(GANG_KEYS)].itertuples(index=False, name=None)
    return [int(counts.get(key, 0)) for key in keys]


def pod_queues(samples: pd.DataFrame, pods: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per group of ``keys`` of the held samples: the queues their pods ran in, sorted and
    ``+``-joined, empty where none (column ``queue``)."""
    held = samples[samples[c.ALLOCATED].to_numpy(dtype=bool) & samples["pod_id"].notna()]
    pod = held["pod_id"].to_numpy(dtype="int64")
    if len(held):  # one row per (group, pod): the first
        group, _ = group_ids(held[keys])
        pair = group * (int(pod.max()) - int(pod.min()) + 1) + (pod - int(pod.min()))
        held = held.iloc[np.sort(np.unique(pair, return_index=True)[1])]
    pairs = pd.DataFrame({k: held[k].astype(object).to_numpy() for k in keys})
    pairs["pod_id"] = held["pod_id"].to_numpy(dtype="int64")
    queues = pods.drop_duplicates("pod_id").set_index("pod_id")["queue"]
    pairs["queue"] = pairs["pod_id"].map(queues).to_numpy(dtype=object)
    return _joined_per_group(pairs, keys, "queue")


def _joined_per_group(frame: pd.DataFrame, keys: list[str], column: str) -> pd.DataFrame:
    """Per group of ``keys``, every group of ``frame`` in ``groupby(keys, sort=True,
    dropna=False)`` order: the keys, then ``column``'s distinct values ``+``-joined
    (:func:`~gpuwatch.analytics.grouping.joined_per_group`)."""
    grouped = frame.groupby(keys, sort=True, dropna=False)
    out = grouped.size().reset_index()[keys]
    groups = grouped.ngroup().to_numpy(dtype="int64")
    out[column] = joined_per_group(groups, frame[column], len(out))
    return out


def workload_stalls(
    samples: pd.DataFrame,
    pods: pd.DataFrame,
    policy: SchedulingPolicy,
    start_ts: int,
    end_ts: int,
) -> pd.DataFrame:
    """Per workload and GPU model with held samples (:data:`~columns.WORKLOAD_KEYS`): its
    ``queue`` (its pods' queues ``+``-joined, empty where none) and ``stalled_gpu_hours`` /
    ``stalled_cost_usd`` (0 where it never stalled): the weekly CSV's columns."""
    keys = list(c.WORKLOAD_KEYS)
    held = samples[[*keys, "pod_id", c.ALLOCATED]]
    held = held[held[c.ALLOCATED].to_numpy(dtype=bool) & held["pod_id"].notna().to_numpy()]
    if held.empty:
        return pd.DataFrame({name: pd.Series(dtype=object) for name in WORKLOAD_STALL_COLUMNS})
    out = pod_queues(held, pods, keys)
    rows = stalled_samples(samples, pods, policy, start_ts, end_ts)
    if rows.empty:
        out[c.STALLED_GPU_HOURS] = 0.0
        out[c.STALLED_COST_USD] = 0.0
        return out[list(WORKLOAD_STALL_COLUMNS)]
    frame = pd.DataFrame({k: rows[k].astype(object).to_numpy() for k in keys})
    for name in (c.STALLED_GPU_HOURS, c.STALLED_COST_USD):
        frame[name] = rows[name].to_numpy(dtype="float64")
    sums = frame.groupby(keys, sort=True, dropna=False).sum().reset_index()
    out = out.merge(sums, on=keys, how="left")
    for name in (c.STALLED_GPU_HOURS, c.STALLED_COST_USD):
        out[name] = out[name].astype("float64").fillna(0.0)
    return out[list(WORKLOAD_STALL_COLUMNS)]
