"""GPU health: each physical GPU's state over a window, its timeline, and the GPUs to drain
(docs/cost-model.md#health-and-efficiency, contract section 7).

Pure: the input is the hourly health roll-up (:data:`gpuwatch.domain.frames.HEALTH_COLUMNS`).
A GPU is ``failing`` from its first failing event (a DBE, a row-remap failure, an XID the
catalogue marks hardware or driver) to its last hour in the window; ``app_error`` in hours with
an application XID; ``degraded`` in hours with an error burst or an unlisted XID, or throttled
≥ ``throttle_degraded_pct`` of the hour when the GPU is throttled that much over the window.
The worst state wins.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.health_hours import STATE_RANK, WINDOW_THROTTLED_PCT, gpu_hours
from gpuwatch.analytics.health_rows import (
    FAIL_S,
    FAIL_SINCE_TS,
    GPU_KEY,
    failing_since,
    prepare,
    with_failing,
)
from gpuwatch.domain.durations import HOUR_S
from gpuwatch.domain.health import STATES, HealthPolicy
from gpuwatch.domain.pricing import PriceBook

__all__ = [
    "DRAIN_KEYS",
    "HEALTH_ENTRY_KEYS",
    "TIMELINE_KEYS",
    "drain_candidates",
    "failing_since",
    "gpu_health",
    "health_timeline",
]

#: Keys of a ``gpuwatch health`` entry (contract section 7), in output order.
HEALTH_ENTRY_KEYS: tuple[str, ...] = (
    "cluster",
    "node",
    "gpu_uuid",
    "gpu_model",
    "state",
    "reasons",
    "first_seen",
    "last_seen",
    "state_hours",
    "allocated_cost_while_failing_usd",
    "pods",
)
#: Columns of :func:`gpu_health` beyond the entry keys.
_EXTRA = ("failing_gpu_hours", "throttled_pct", "allocated")
TIMELINE_KEYS: tuple[str, ...] = (
    "ts",
    "cluster",
    "node",
    "gpu_uuid",
    "gpu_model",
    "state",
    "reasons",
)
DRAIN_KEYS: tuple[str, ...] = (
    "cluster",
    "node",
    "gpu_uuid",
    "gpu_model",
    "reasons",
    "first_seen",
    "pods",
    "allocated_cost_while_failing_usd",
)
_FAILING = STATES[0]
_HEALTHY = STATES[3]


def _empty(names: tuple[str, ...]) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=object) for name in names})


def _in_window(health: pd.DataFrame, end_ts: int | None) -> pd.DataFrame:
    if end_ts is None:
        return health
    return health[health["ts"].to_numpy(dtype="int64") < int(end_ts)]


def _rows_and_hours(
    health: pd.DataFrame, policy: HealthPolicy, price_book: PriceBook | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = with_failing(prepare(health, price_book))
    return rows, gpu_hours(rows, policy)


def health_timeline(health: pd.DataFrame, policy: HealthPolicy) -> pd.DataFrame:
    """One row per (hour ``ts``, cluster, node, gpu_uuid) of the GPUs in the frame: ``ts,
    cluster, node, gpu_uuid, gpu_model, state, reasons`` (comma-joined, "" when healthy).
    Failing stays failing from the hour of the first failing event to the GPU's last hour."""
    if health.empty:
        return _empty(TIMELINE_KEYS)
    _, hours = _rows_and_hours(health, policy, None)
    out = hours[["ts", "cluster", "node", "gpu_uuid", "gpu_model", "state"]].copy()
    out["reasons"] = [",".join(sorted(r)) for r in hours["reasons"]]
    out["ts"] = out["ts"].astype("int64")
    return out.sort_values(["ts", "cluster", "node", "gpu_uuid"], ignore_index=True)


def _state_of_gpus(hours: pd.DataFrame) -> pd.Series:
    rank = hours["state"].map(STATE_RANK)
    worst = rank.groupby([hours[k] for k in GPU_KEY], sort=False).transform("min")
    return worst.map(dict(enumerate(STATES)))


def _entry(gpu: pd.DataFrame, state: str) -> dict[str, object]:
    """The entry fields of one GPU's hours (sorted by ts) in its window ``state``."""
    in_state = gpu[gpu["state"].eq(state)]
    last = gpu.iloc[-1]
    reasons: set[str] = set().union(*gpu["reasons"])
    first_seen = in_state["first_ts"].min()
    if state == _FAILING:
        first_seen = in_state[FAIL_SINCE_TS].iloc[0]
    throttled = gpu[WINDOW_THROTTLED_PCT].iloc[0]
    return {
        "cluster": last["cluster"],
        "node": last["node"],
        "gpu_uuid": last["gpu_uuid"],
        "gpu_model": last["gpu_model"],
        "state": state,
        "reasons": sorted(reasons),
        "first_seen": int(first_seen),
        "last_seen": int(in_state["last_ts"].max()),
        "state_hours": float(in_state["state_s"].sum()) / HOUR_S,
        "throttled_pct": float(throttled),
    }


def _row_figures(rows: pd.DataFrame, states: pd.DataFrame) -> pd.DataFrame:
    """Per GPU: allocated GPU-hours and cost while failing, pods in the GPU's state, whether a
    pod held it at its last sample."""
    keyed = rows.assign(**{k: rows[k].astype(str) for k in GPU_KEY})
    keyed = keyed.merge(states, on=["cluster", "gpu_uuid", "ts"], how="left")
    alloc = keyed[c.ALLOCATED].to_numpy(dtype=bool)
    fail_h = np.where(alloc, keyed[FAIL_S].to_numpy(dtype="float64"), 0.0) / HOUR_S
    keyed["failing_gpu_hours"] = fail_h * keyed["share"].to_numpy(dtype="float64")
    keyed["failing_cost"] = keyed["failing_gpu_hours"] * keyed[c.USD_PER_HOUR]
    in_state = keyed["state"].eq(keyed["gpu_state"]) & ~(
        keyed["gpu_state"].eq(_FAILING) & keyed[FAIL_S].le(0)
    )
    held = keyed[alloc & in_state.to_numpy(dtype=bool)]
    pods = held.groupby(list(GPU_KEY))["pod"].agg(lambda p: sorted({str(x) for x in p}))
    last_ts = keyed.groupby(list(GPU_KEY))["last_ts"].transform("max")
    at_last = keyed[keyed["last_ts"].eq(last_ts)]
    out = keyed.groupby(list(GPU_KEY))[["failing_gpu_hours", "failing_cost"]].sum()
    out["pods"] = pods
    out["allocated"] = at_last.groupby(list(GPU_KEY))[c.ALLOCATED].any()
    return out


def gpu_health(
    health: pd.DataFrame, price_book: PriceBook, policy: HealthPolicy, end_ts: int
) -> pd.DataFrame:
    """One row per physical GPU (cluster, gpu_uuid) that was not healthy in the frame's window
    (rows at or after ``end_ts`` are left out), worst state first, then by the allocated cost
    while failing, descending. Columns: :data:`HEALTH_ENTRY_KEYS` plus ``failing_gpu_hours``
    (allocated), ``throttled_pct`` (NaN without clock data) and ``allocated`` (held by a pod at
    its last sample)."""
    names = (*HEALTH_ENTRY_KEYS, *_EXTRA)
    health = _in_window(health, end_ts)
    if health.empty:
        return _empty(names)
    rows, hours = _rows_and_hours(health, policy, price_book)
    hours["gpu_state"] = _state_of_gpus(hours)
    sick = hours[hours["gpu_state"].ne(_HEALTHY)]
    if sick.empty:
        return _empty(names)
    entries = pd.DataFrame(
        [_entry(gpu, str(gpu["gpu_state"].iloc[0])) for _, gpu in sick.groupby(list(GPU_KEY))]
    ).set_index(list(GPU_KEY))
    figures = _row_figures(rows, sick[["cluster", "gpu_uuid", "ts", "state", "gpu_state"]])
    entries = entries.join(figures, how="left")
    entries["allocated_cost_while_failing_usd"] = entries.pop("failing_cost").fillna(0.0)
    entries["failing_gpu_hours"] = entries["failing_gpu_hours"].fillna(0.0)
    entries["pods"] = [p if isinstance(p, list) else [] for p in entries["pods"]]
    entries["allocated"] = entries["allocated"].fillna(False).astype(bool)
    entries = entries.reset_index()
    entries["_rank"] = entries["state"].map(STATE_RANK)
    entries = entries.sort_values(
        ["_rank", "allocated_cost_while_failing_usd", "cluster", "node", "gpu_uuid"],
        ascending=[True, False, True, True, True],
        ignore_index=True,
    )
    return entries[list(names)]


def drain_candidates(entries: pd.DataFrame) -> pd.DataFrame:
    """The ``failing`` GPUs of :func:`gpu_health`'s frame (``first_seen``: failing since), by
    allocated cost while failing, descending."""
    failing = entries[entries["state"].eq(_FAILING)] if len(entries) else entries
    if failing.empty:
        return _empty(DRAIN_KEYS)
    out = failing.sort_values(
        ["allocated_cost_while_failing_usd", "cluster", "node", "gpu_uuid"],
        ascending=[False, True, True, True],
        ignore_index=True,
    )
    return out[list(DRAIN_KEYS)]
