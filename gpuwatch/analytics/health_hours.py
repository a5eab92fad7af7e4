"""Each physical GPU's hours: its state and reasons hour by hour (docs/cost-model.md#health).

A GPU's hour joins the rows of all its units (MIG instances, slots) and pods: error counts are
summed over a unit's pods and taken from the unit reporting most (the counters are the GPU's,
repeated on its units), clock seconds are summed (their ratio is what counts), XIDs take the
highest code, and the hour's seconds with data are the most any unit had (≤ 3600).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuwatch.analytics.health_rows import FAIL_S, FAIL_SINCE_TS, GPU_KEY, divide
from gpuwatch.domain.durations import HOUR_S
from gpuwatch.domain.health import STATES, HealthPolicy

HOUR_KEY: list[str] = [*GPU_KEY, "ts"]
_PER_UNIT = ("data_s", FAIL_S, "ecc_sbe", "ecc_dbe", "pcie_replays", "nvlink_errors")
_SUMS = ("clock_data_s", "throttled_s", "thermal_s", "power_cap_s", "hw_slowdown_s")
_MAXES = ("row_remap_failure", "fail_xid", "app_xid", "other_xid", "last_ts", FAIL_SINCE_TS)
#: Rank of a state, worst first (:data:`gpuwatch.domain.health.STATES`).
STATE_RANK: dict[str, int] = {state: rank for rank, state in enumerate(STATES)}
#: Added by :func:`gpu_hours`: the GPU's throttled share of its clock data in the whole frame.
WINDOW_THROTTLED_PCT = "window_throttled_pct"


def _numeric(rows: pd.DataFrame, names: tuple[str, ...]) -> pd.DataFrame:
    out = pd.DataFrame(index=rows.index)
    for name in names:
        out[name] = rows[name].to_numpy(dtype="float64", na_value=np.nan)
    return out


def _aggregate(rows: pd.DataFrame) -> pd.DataFrame:
    gpus = rows.groupby(list(GPU_KEY), sort=False, dropna=False).ngroup().to_numpy()
    keys = pd.DataFrame({"gpu": gpus, "ts": rows["ts"].to_numpy(dtype="int64")})
    unit = pd.concat([keys, _numeric(rows, ("gpu_id", *_PER_UNIT))], axis=1)
    per_unit = unit.fillna(0.0).groupby(["gpu", "ts", "gpu_id"], sort=False).sum()
    per_unit["data_s"] = per_unit["data_s"].clip(upper=HOUR_S)
    per_unit[FAIL_S] = per_unit[FAIL_S].clip(upper=HOUR_S)
    hourly = per_unit.groupby(level=["gpu", "ts"], sort=False).max()
    other = pd.concat([keys, _numeric(rows, (*_SUMS, *_MAXES, "first_ts"))], axis=1)
    for name in (*GPU_KEY, "node", "gpu_model"):
        other[name] = rows[name].astype(object).to_numpy()
    grouped = other.groupby(["gpu", "ts"], sort=False)
    parts: list[pd.DataFrame | pd.Series] = [
        grouped[list(_SUMS)].sum(),
        grouped[list(_MAXES)].max(),
        grouped[["first_ts"]].min(),
        grouped[[*GPU_KEY, "node", "gpu_model"]].last(),
    ]
    out = hourly.join(parts).reset_index().drop(columns="gpu")
    for name in GPU_KEY:
        out[name] = out[name].astype(str)
    return out.sort_values(HOUR_KEY, ignore_index=True)


def _pct(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return divide(100.0 * num, den, np.nan)


def _throttle(hours: pd.DataFrame, policy: HealthPolicy) -> np.ndarray:
    """Hours throttled at least ``throttle_degraded_pct`` of their clock data, of GPUs that are
    throttled that much over the whole frame."""
    keys = [hours[k] for k in GPU_KEY]
    window = hours[["throttled_s", "clock_data_s"]].groupby(keys, sort=False).transform("sum")
    window_pct = _pct(window["throttled_s"].to_numpy(), window["clock_data_s"].to_numpy())
    hours[WINDOW_THROTTLED_PCT] = window_pct
    hour_pct = _pct(hours["throttled_s"].to_numpy(), hours["clock_data_s"].to_numpy())
    limit = policy.throttle_degraded_pct
    over_hour = np.nan_to_num(hour_pct, nan=-1.0) >= limit
    return np.asarray(over_hour & (np.nan_to_num(window_pct, nan=-1.0) >= limit), dtype=bool)


def _col(hours: pd.DataFrame, name: str) -> np.ndarray:
    return hours[name].to_numpy(dtype="float64")


def _reason_columns(
    hours: pd.DataFrame, policy: HealthPolicy, throttled: np.ndarray
) -> dict[str, np.ndarray]:
    """Boolean per hour for each fixed reason string (XID reasons are added apart)."""
    return {
        "ecc_dbe": _col(hours, "ecc_dbe") > 0,
        "row_remap_failure": _col(hours, "row_remap_failure") > 0,
        "ecc_sbe_burst": _col(hours, "ecc_sbe") >= policy.sbe_burst_per_hour,
        "pcie_replay": _col(hours, "pcie_replays") >= policy.pcie_replays_per_hour,
        "nvlink_errors": _col(hours, "nvlink_errors") >= policy.nvlink_errors_per_hour,
        "thermal_throttle": throttled & (_col(hours, "thermal_s") > 0),
        "power_throttle": throttled & (_col(hours, "power_cap_s") > 0),
        "hw_slowdown": throttled & (_col(hours, "hw_slowdown_s") > 0),
    }


_FAILING_REASONS = ("ecc_dbe", "row_remap_failure")
_XID_COLUMNS = ("fail_xid", "app_xid", "other_xid")


def _hour_reasons(
    hours: pd.DataFrame, flags: dict[str, np.ndarray], rows: np.ndarray
) -> list[frozenset[str]]:
    xids = [_col(hours, name) for name in _XID_COLUMNS]
    none: frozenset[str] = frozenset()
    out = [none] * len(hours)
    for i in rows:
        found = {name for name, flag in flags.items() if flag[i]}
        found.update(f"xid:{int(x[i])}" for x in xids if not np.isnan(x[i]))
        out[i] = frozenset(found)
    return out


def _carry_failing(hours: pd.DataFrame, reasons: list[frozenset[str]], failing: np.ndarray) -> None:
    """Failing hours without an event of their own name the reasons of the GPU's first hour
    with a failing event."""
    fail_xid = _col(hours, "fail_xid")
    first: dict[tuple[str, str], frozenset[str]] = {}
    cluster, uuid = hours["cluster"].to_numpy(), hours["gpu_uuid"].to_numpy()
    for i in np.flatnonzero(failing):
        key = (cluster[i], uuid[i])
        own = {r for r in reasons[i] if r in _FAILING_REASONS}
        if not np.isnan(fail_xid[i]):
            own.add(f"xid:{int(fail_xid[i])}")
        if own and key not in first:
            first[key] = frozenset(own)
        reasons[i] = reasons[i] | first.get(key, frozenset())


def gpu_hours(rows: pd.DataFrame, policy: HealthPolicy) -> pd.DataFrame:
    """One row per (cluster, gpu_uuid, hour ``ts``) of prepared rows with ``fail_s``
    (:func:`gpuwatch.analytics.health_rows.with_failing`): ``node``, ``gpu_model``, ``state``,
    ``reasons`` (a set), ``state_s`` (the hour's seconds with data, from the failing event on
    in a failing hour), ``first_ts``, ``last_ts``, ``fail_since_ts`` and the summed readings."""
    hours = _aggregate(rows)
    throttled = _throttle(hours, policy)
    flags = _reason_columns(hours, policy, throttled)
    since = _col(hours, FAIL_SINCE_TS)
    failing = ~np.isnan(since) & (hours["ts"].to_numpy(dtype="float64") + HOUR_S > since)
    app = ~np.isnan(_col(hours, "app_xid"))
    events = ("ecc_sbe_burst", "pcie_replay", "nvlink_errors")
    degraded = throttled | ~np.isnan(_col(hours, "other_xid"))
    for name in events:
        degraded = degraded | flags[name]
    state = np.select([failing, app, degraded], list(STATES[:3]), default=STATES[3])
    hours["state"] = state
    reasons = _hour_reasons(hours, flags, np.flatnonzero(state != STATES[3]))
    _carry_failing(hours, reasons, failing)
    hours["reasons"] = pd.Series(reasons, index=hours.index, dtype=object)
    hours["state_s"] = np.where(failing, _col(hours, FAIL_S), _col(hours, "data_s"))
    return hours
