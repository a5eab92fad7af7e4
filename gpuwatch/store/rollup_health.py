"""The hourly health and efficiency roll-up, ``gpu_health_hourly`` (docs/storage.md#health).

Rebuilt with ``gpu_samples_hourly``, for the same hours and in the same transaction, by
:mod:`gpuwatch.store.rollup`: :func:`roll_up_range` from the raw samples of whole hours (one SQL
statement, the same on SQLite and PostgreSQL), :func:`fresh_rows` from the samples a page
writes to hours that held none before (in memory, the same arithmetic:
:mod:`gpuwatch.store.rollup_fresh`). A (hour, GPU unit,
pod) gets a row only where one of its samples has an efficiency or health reading or an XID.

The busy, low-SM, no-tensor and throttle seconds count against the fixed limits and bit masks of
:mod:`gpuwatch.domain.health`; the XID classes are its catalogue's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from sqlalchemy import Connection, delete, text

from gpuwatch.domain.health import (
    APP_XIDS,
    BUSY_UTIL_RATIO,
    FAILING_XIDS,
    HW_SLOWDOWN_MASK,
    LOW_SM_ACTIVE_RATIO,
    NO_TENSOR_RATIO,
    POWER_CAP_MASK,
    THERMAL_MASK,
    THROTTLE_MASK,
)
from gpuwatch.store import rollup_append
from gpuwatch.store.driver import insert_tuples
from gpuwatch.store.models import HEALTH_SAMPLE_FIELDS, HOUR_S, NO_POD
from gpuwatch.store.models_health import GpuHealthHourly
from gpuwatch.store.sample_columns import SampleColumns

#: Largest value of an INTEGER column: an hour's error count is capped there.
INT32_MAX = 2**31 - 1
#: (column, ratio sample field) of the profiling ratios: Σ ratio × step and Σ step read.
RATIOS = (
    ("sm_active_s", "sm_data_s", "sm_active_ratio"),
    ("sm_occupancy_s", "sm_occupancy_data_s", "sm_occupancy_ratio"),
    ("tensor_active_s", "tensor_data_s", "tensor_active_ratio"),
    ("dram_active_s", "dram_data_s", "dram_active_ratio"),
)
#: (column, mask) of the clock-event seconds.
CLOCK_CLASSES = (
    ("throttled_s", THROTTLE_MASK),
    ("thermal_s", THERMAL_MASK),
    ("power_cap_s", POWER_CAP_MASK),
    ("hw_slowdown_s", HW_SLOWDOWN_MASK),
)
#: (sum column, count column, sample field) of the means.
MEANS = (
    ("sm_clock_mhz_sum", "sm_clock_n", "sm_clock_mhz"),
    ("pcie_bytes_sum", "pcie_bytes_n", "pcie_bytes_per_s"),
    ("nvlink_bytes_sum", "nvlink_bytes_n", "nvlink_bytes_per_s"),
)
#: (column, sample field) of the error counts summed over the hour (NULL: none reported).
COUNTS = (
    ("ecc_sbe", "ecc_sbe_count"),
    ("ecc_dbe", "ecc_dbe_count"),
    ("pcie_replays", "pcie_replay_count"),
    ("nvlink_errors", "nvlink_error_count"),
)
COLUMNS = (
    "hour_ts", "gpu_id", "pod_id", "data_s", "first_ts", "last_ts", "util_s", "util_data_s",
    *(name for triple in RATIOS for name in triple[:2]),
    "busy_sm_data_s", "busy_low_sm_s", "busy_tensor_data_s", "busy_no_tensor_s", "clock_data_s",
    *(name for name, _ in CLOCK_CLASSES),
    *(name for triple in MEANS for name in triple[:2]),
    *(name for name, _ in COUNTS),
    "row_remap_failure", "fail_first_ts", "fail_xid", "app_xid", "other_xid",
)  # fmt: skip
#: Columns that may be NULL (everything else is a sum of seconds, a count or a key).
NULLABLE = (
    *(triple[0] for triple in MEANS),
    *(name for name, _ in COUNTS),
    "row_remap_failure", "fail_first_ts", "fail_xid", "app_xid", "other_xid",
)  # fmt: skip
#: Columns holding floats; every other column is an integer.
FLOATS = ("util_s", *(triple[0] for triple in RATIOS), *(triple[0] for triple in MEANS))


def _in(codes: Sequence[int]) -> str:
    return f"xid IN ({', '.join(str(code) for code in codes)})"


_BUSY = f"util_ratio >= {BUSY_UTIL_RATIO!r}"
_FAILING = f"(ecc_dbe_count > 0 OR row_remap_failure > 0 OR {_in(FAILING_XIDS)})"
_OTHER_XID = f"xid > 0 AND NOT {_in(FAILING_XIDS)} AND NOT {_in(APP_XIDS)}"


def _seconds(condition: str) -> str:
    return f"SUM(CASE WHEN {condition} THEN step_s ELSE 0 END)"


def _capped(expression: str) -> str:
    return f"CASE WHEN {expression} > {INT32_MAX} THEN {INT32_MAX} ELSE {expression} END"


def _select() -> list[str]:
    """The SELECT list, in :data:`COLUMNS` order."""
    out = [
        f"(ts / {HOUR_S}) * {HOUR_S}", "gpu_id", f"COALESCE(pod_id, {NO_POD})",
        "SUM(step_s)", "MIN(ts)", "MAX(ts)",
        "SUM(CASE WHEN util_ratio IS NULL OR util_ratio <= 0 THEN 0.0 "
        "WHEN util_ratio >= 1 THEN step_s * 1.0 ELSE util_ratio * step_s END)",
        _seconds("util_ratio IS NOT NULL"),
    ]  # fmt: skip
    for _, _, field in RATIOS:
        out += [f"COALESCE(SUM({field} * step_s), 0.0)", _seconds(f"{field} IS NOT NULL")]
    out += [
        _seconds(f"{_BUSY} AND sm_active_ratio IS NOT NULL"),
        _seconds(f"{_BUSY} AND sm_active_ratio < {LOW_SM_ACTIVE_RATIO!r}"),
        _seconds(f"{_BUSY} AND tensor_active_ratio IS NOT NULL"),
        _seconds(f"{_BUSY} AND tensor_active_ratio < {NO_TENSOR_RATIO!r}"),
        _seconds("clock_events IS NOT NULL"),
    ]
    out += [_seconds(f"(clock_events & {mask}) <> 0") for _, mask in CLOCK_CLASSES]
    for _, _, field in MEANS:
        out += [f"SUM({field})", f"COUNT({field})"]
    out += [_capped(f"SUM({field})") for _, field in COUNTS]
    out += [
        "MAX(row_remap_failure)",
        f"MIN(CASE WHEN {_FAILING} THEN ts END)",
        f"MAX(CASE WHEN {_in(FAILING_XIDS)} THEN xid END)",
        f"MAX(CASE WHEN {_in(APP_XIDS)} THEN xid END)",
        f"MAX(CASE WHEN {_OTHER_XID} THEN xid END)",
    ]
    return out


#: Any efficiency or health reading, or an XID: a group without one has no row.
_ANY_READING = f"COUNT(COALESCE({', '.join(HEALTH_SAMPLE_FIELDS)}, xid)) > 0"
_ROLL_UP = f"""
INSERT INTO {GpuHealthHourly.__tablename__} ({", ".join(COLUMNS)})
SELECT {", ".join(_select())}
FROM gpu_samples
WHERE ts >= :start_ts AND ts < :end_ts{{units}}
GROUP BY (ts / {HOUR_S}) * {HOUR_S}, gpu_id, COALESCE(pod_id, {NO_POD})
HAVING {_ANY_READING}
"""  # noqa: S608 - constants only
ROLL_UP_SQL = _ROLL_UP.format(units="")


def roll_up_range(conn: Connection, first_hour: int, end_hour: int) -> int:
    """Rebuild the rows of the whole hours in ``[first_hour, end_hour)`` from the raw samples
    (every GPU unit); returns rows written."""
    hours = (GpuHealthHourly.hour_ts >= first_hour) & (GpuHealthHourly.hour_ts < end_hour)
    conn.execute(delete(GpuHealthHourly).where(hours))
    result = conn.execute(text(ROLL_UP_SQL), {"start_ts": first_hour, "end_ts": end_hour})
    return max(int(result.rowcount or 0), 0)


def roll_up_units(conn: Connection, hours: Sequence[int], units: np.ndarray) -> int:
    """Rebuild the rows of ``hours`` of the GPU units ``units`` only, from the raw samples;
    returns rows written."""
    ids = np.unique(np.asarray(units, dtype=np.int64)).tolist()
    if not ids:
        return 0
    delete_rows(conn, hours, np.asarray(ids))
    sql = text(_ROLL_UP.format(units=f" AND gpu_id IN ({', '.join(map(str, ids))})"))
    rows = 0
    for hour in sorted({int(h) for h in hours}):
        result = conn.execute(sql, {"start_ts": hour, "end_ts": hour + HOUR_S})
        rows += max(int(result.rowcount or 0), 0)
    return rows


def delete_before(conn: Connection, hour_ts: int) -> int:
    """Delete the rows of hours before ``hour_ts`` (the hourly retention); returns rows."""
    done = conn.execute(delete(GpuHealthHourly).where(GpuHealthHourly.hour_ts < hour_ts))
    return int(done.rowcount or 0)


class _Groups:
    """Sample columns grouped by (hour, GPU unit, pod), rows in instant order within a group:
    the reductions :data:`ROLL_UP_SQL` runs, over arrays."""

    def __init__(self, samples: SampleColumns) -> None:
        ts = samples.ts.astype(np.int64)
        hour = ts - ts % HOUR_S
        pod = np.where(np.isnan(samples.pod_id), NO_POD, samples.pod_id).astype(np.int64)
        gpu = samples.gpu_id.astype(np.int64)
        self.order = np.lexsort((ts, pod, gpu, hour))
        keys = (hour[self.order], gpu[self.order], pod[self.order])
        self.starts = rollup_append.group_starts(*keys)
        self.keys = tuple(key[self.starts] for key in keys)
        self.ts = ts[self.order]
        self.step = samples.step_s.astype(np.int64)[self.order]

    def sorted(self, column: np.ndarray) -> np.ndarray:
        result: np.ndarray = np.asarray(column, dtype=np.float64)[self.order]
        return result

    def total(self, values: np.ndarray) -> np.ndarray:
        result: np.ndarray = np.add.reduceat(values, self.starts)
        return result

    def seconds(self, condition: np.ndarray) -> np.ndarray:
        return self.total(np.where(condition, self.step, 0))

    def peak(self, values: np.ndarray) -> np.ndarray:
        result: np.ndarray = np.fmax.reduceat(values, self.starts)
        return result

    def sum_or_null(self, values: np.ndarray) -> np.ndarray:
        """SQL's SUM: NaN (NULL) where the group has no reading."""
        read = self.total((~np.isnan(values)).astype(np.int64))
        return np.where(read > 0, self.total(np.nan_to_num(values)), np.nan)


def _efficiency(g: _Groups, field: dict[str, np.ndarray], util: np.ndarray) -> dict[str, Any]:
    """Engine busy, the profiling ratios and the busy-but-inefficient seconds."""
    out: dict[str, np.ndarray] = {
        "util_s": g.total(np.nan_to_num(np.clip(util, 0.0, 1.0)) * g.step),
        "util_data_s": g.seconds(~np.isnan(util)),
    }
    for active, read, name in RATIOS:
        out[active] = g.total(np.nan_to_num(field[name] * g.step))
        out[read] = g.seconds(~np.isnan(field[name]))
    busy = util >= BUSY_UTIL_RATIO
    sm, tensor = field["sm_active_ratio"], field["tensor_active_ratio"]
    out["busy_sm_data_s"] = g.seconds(busy & ~np.isnan(sm))
    out["busy_low_sm_s"] = g.seconds(busy & (sm < LOW_SM_ACTIVE_RATIO))
    out["busy_tensor_data_s"] = g.seconds(busy & ~np.isnan(tensor))
    out["busy_no_tensor_s"] = g.seconds(busy & (tensor < NO_TENSOR_RATIO))
    return out


def _clocks_and_means(g: _Groups, field: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Clock-event seconds by class, and the sums and counts of the means."""
    out = {"clock_data_s": g.seconds(~np.isnan(field["clock_events"]))}
    bits = np.nan_to_num(field["clock_events"]).astype(np.int64)
    for name, mask in CLOCK_CLASSES:
        out[name] = g.seconds((bits & mask) != 0)
    for total, count, name in MEANS:
        out[total] = g.sum_or_null(field[name])
        out[count] = g.total((~np.isnan(field[name])).astype(np.int64))
    return out


def _errors(g: _Groups, field: dict[str, np.ndarray], xid: np.ndarray) -> dict[str, np.ndarray]:
    """Error counts, the row-remap flag, the first failing instant and the XID classes."""
    out = {name: np.minimum(g.sum_or_null(field[f]), INT32_MAX) for name, f in COUNTS}
    failing_xid, app_xid = np.isin(xid, FAILING_XIDS), np.isin(xid, APP_XIDS)
    failing = (field["ecc_dbe_count"] > 0) | (field["row_remap_failure"] > 0) | failing_xid
    first = np.fmin.reduceat(np.where(failing, g.ts.astype(np.float64), np.nan), g.starts)
    out["row_remap_failure"] = g.peak(field["row_remap_failure"])
    out["fail_first_ts"] = first
    out["fail_xid"] = g.peak(np.where(failing_xid, xid, np.nan))
    out["app_xid"] = g.peak(np.where(app_xid, xid, np.nan))
    out["other_xid"] = g.peak(np.where((xid > 0) & ~failing_xid & ~app_xid, xid, np.nan))
    return out


def health_rows(samples: SampleColumns) -> dict[str, np.ndarray]:
    """The ``gpu_health_hourly`` rows of ``samples`` (unique per GPU unit and instant), column
    by column (:data:`COLUMNS`): what :data:`ROLL_UP_SQL` computes from the same rows (pure)."""
    if not len(samples):
        return {name: np.zeros(0) for name in COLUMNS}
    g = _Groups(samples)
    field = {name: g.sorted(samples.health_column(name)) for name in HEALTH_SAMPLE_FIELDS}
    util, xid = g.sorted(samples.util_ratio), g.sorted(samples.xid)
    out: dict[str, np.ndarray] = dict(zip(("hour_ts", "gpu_id", "pod_id"), g.keys, strict=True))
    out["data_s"] = g.total(g.step)
    out["first_ts"] = g.ts[g.starts]
    out["last_ts"] = np.maximum.reduceat(g.ts, g.starts)
    out |= _efficiency(g, field, util) | _clocks_and_means(g, field) | _errors(g, field, xid)
    read = ~np.isnan(xid)
    for name in HEALTH_SAMPLE_FIELDS:
        read |= ~np.isnan(field[name])
    kept = np.flatnonzero(g.total(read.astype(np.int64)) > 0)
    return {name: out[name][kept] for name in COLUMNS}


def _values(name: str, column: np.ndarray) -> list[Any]:
    """One column as Python values: floats or integers as the column holds, NaN as None."""
    missing = np.isnan(column) if column.dtype.kind == "f" else np.zeros(len(column), bool)
    values = column if name in FLOATS else np.where(missing, 0, column).astype(np.int64)
    listed: list[Any] = values.tolist()
    if name not in NULLABLE:
        return listed
    return [None if gone else v for gone, v in zip(missing.tolist(), listed, strict=True)]


def insert_rows(conn: Connection, columns: dict[str, np.ndarray]) -> int:
    """Insert rows given column by column (:data:`COLUMNS`); returns rows written."""
    count = len(columns["hour_ts"])
    if count:
        lists = [_values(name, columns[name]) for name in COLUMNS]
        insert_tuples(conn, GpuHealthHourly.__tablename__, COLUMNS, list(zip(*lists, strict=True)))
    return count


def delete_rows(conn: Connection, hours: Sequence[int], units: np.ndarray) -> None:
    """Delete the rows of ``hours`` of the GPU units ``units``."""
    stale = GpuHealthHourly.hour_ts.in_(sorted(int(h) for h in hours))
    in_units = GpuHealthHourly.gpu_id.in_(np.unique(units).astype(np.int64).tolist())
    conn.execute(delete(GpuHealthHourly).where(stale, in_units))


def fresh_rows(samples: SampleColumns) -> dict[str, np.ndarray] | None:
    """The rows of ``samples`` (every sample their GPU units have in their hours), as
    :func:`health_rows`; None where the samples hold no health reading (no row to write)."""
    if not len(samples) or (not samples.health_read() and np.isnan(samples.xid).all()):
        return None
    return health_rows(samples)


#: How two rows of one (hour, GPU unit, pod) merge (:mod:`~gpuwatch.store.rollup_append`).
MERGE_RULES: dict[str, str] = {
    "data_s": "sum", "first_ts": "min", "last_ts": "max", "util_s": "sum", "util_data_s": "sum",
    **{name: "sum" for triple in RATIOS for name in triple[:2]},
    "busy_sm_data_s": "sum", "busy_low_sm_s": "sum", "busy_tensor_data_s": "sum",
    "busy_no_tensor_s": "sum", "clock_data_s": "sum",
    **{name: "sum" for name, _ in CLOCK_CLASSES},
    **{name: rule for total, count, _ in MEANS
       for name, rule in ((total, "sum_or_null"), (count, "sum"))},
    **{name: "capped" for name, _ in COUNTS},
    "row_remap_failure": "max", "fail_first_ts": "min", "fail_xid": "max", "app_xid": "max",
    "other_xid": "max",
}  # fmt: skip
KEYS = rollup_append.KEYS


def stored_rows(conn: Connection, hours: Sequence[int], units: np.ndarray) -> dict[str, np.ndarray]:
    """The stored rows of ``hours`` of the GPU units ``units``, column by column."""
    stored = rollup_append.read_columns(conn, GpuHealthHourly.__tablename__, COLUMNS, hours)
    return rollup_append.rows_where(stored, np.isin(stored["gpu_id"], units))


def write_merged(
    conn: Connection,
    old: dict[str, np.ndarray],
    new: dict[str, np.ndarray],
    hours: Sequence[int],
    units: np.ndarray,
) -> int:
    """Replace the rows of ``hours`` of ``units`` (``old``, as :func:`stored_rows` read them) by
    ``old`` merged with ``new`` (:func:`health_rows` of samples appended to those hours)."""
    if not len(new["hour_ts"]):
        return 0
    delete_rows(conn, hours, units)
    return insert_rows(conn, rollup_append.merge_columns(old, new, KEYS, MERGE_RULES))


def merge_appended(
    conn: Connection,
    hourly: Mapping[str, np.ndarray],
    samples: SampleColumns,
    hours: Sequence[int],
    units: np.ndarray,
) -> int:
    """Merge the rows of ``samples`` (appended to ``hours``; their GPU units are ``units``, whose
    stored hourly rows are ``hourly``) into the stored rows; returns rows written.

    A unit of :func:`~gpuwatch.store.rollup_append.gained_health` is rolled up from the table
    instead, the page's samples being written already."""
    old = stored_rows(conn, hours, units)
    new = health_rows(samples)
    gained = rollup_append.gained_health(hourly, old, new)
    rows = write_merged(
        conn,
        rollup_append.rows_where(old, ~np.isin(old["gpu_id"], gained)),
        rollup_append.rows_where(new, ~np.isin(new["gpu_id"], gained)),
        hours,
        units[~np.isin(units, gained)],
    )
    return rows + roll_up_units(conn, hours, gained)
