"""Daily sums of the health roll-up (``gpu_health_daily``) and a window's health sums from them.

The efficiency figures and the placement traffic need, per (GPU unit, pod), the terms of
:func:`gpuwatch.analytics.health_sums.row_terms` summed over a window's hourly rows. Each term is
a sum over hours, so a day's can be summed once (:data:`BUILD`, with the cost sums of
:mod:`gpuwatch.store.daily`) and a window read as its current days' sums plus the remaining
hours (:func:`read_sums`).

``fail_s`` is the one term that does not add up per day: it counts a row's seconds after its
physical GPU's first failing event *in the window*. The daily rows keep each day's first event
(``fail_since_ts``); the window's is their minimum, and the seconds after it are counted from
the hourly rows of those GPUs' units only (:func:`fail_seconds`), which are few.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from sqlalchemy import Connection, text

from gpuwatch.domain.durations import HOUR_S
from gpuwatch.domain.frames import HEALTH_SUM_PROFILING, HEALTH_SUM_READINGS, HEALTH_SUM_TERMS
from gpuwatch.store.models_daily import GpuHealthDaily
from gpuwatch.store.models_health import GpuHealthHourly

#: The summed terms kept per day: every term but ``fail_s``, in :data:`HEALTH_SUM_TERMS` order.
SUMMED: tuple[str, ...] = tuple(name for name in HEALTH_SUM_TERMS if name != "fail_s")
#: Columns of :func:`read_sums`, in order.
COLUMNS: tuple[str, ...] = ("gpu_id", "pod_id", *SUMMED, "fail_since_ts")

_HOURLY = GpuHealthHourly.__tablename__
_DAILY = GpuHealthDaily.__tablename__


def _ratio(num: str, den: str) -> str:
    """SQL for ``num / den`` as a float where ``den`` > 0, else 0 (both dialects)."""
    return f"CASE WHEN h.{den} > 0 THEN CAST(h.{num} AS DOUBLE PRECISION) / h.{den} ELSE 0 END"


def _activity(prefix: str, active: str, data: str, extra: str = "") -> dict[str, str]:
    has = f"h.{data} > 0{extra}"
    return {
        f"{prefix}_weighted_s": f"SUM(CASE WHEN {has} THEN h.data_s * CAST(h.{active} AS DOUBLE "
        f"PRECISION) / h.{data} ELSE 0 END)",
        f"{prefix}_weight_s": f"SUM(CASE WHEN {has} THEN h.data_s ELSE 0 END)",
        f"{prefix}_hours": f"SUM(CASE WHEN {has} THEN 1 ELSE 0 END)",
    }


#: A row's failing event: a failing instant, or a DBE, row-remap failure or failing XID (then
#: the row's first sample): :func:`gpuwatch.analytics.health_rows.failing_event_ts`.
_FLAGGED = "h.ecc_dbe > 0 OR h.row_remap_failure > 0 OR h.fail_xid IS NOT NULL"
_EVENT_TS = f"COALESCE(h.fail_first_ts, CASE WHEN {_FLAGGED} THEN h.first_ts END)"


def _term_sql() -> dict[str, str]:
    """SQL of each :data:`SUMMED` term over the hourly rows ``h`` of a group, and the group's
    first failing event."""
    profiled = " OR ".join(f"h.{name} > 0" for name in HEALTH_SUM_PROFILING)
    terms = {
        "data_s": "SUM(h.data_s)",
        "clock_data_s": "SUM(h.clock_data_s)",
        "throttled_data_s": f"SUM(h.data_s * {_ratio('throttled_s', 'clock_data_s')})",
        "low_sm_data_s": f"SUM(h.data_s * {_ratio('busy_low_sm_s', 'util_data_s')})",
        "inefficient_data_s": "SUM(h.data_s * CASE WHEN h.util_data_s > 0 THEN CAST(CASE WHEN "
        "h.busy_no_tensor_s > h.busy_low_sm_s THEN h.busy_no_tensor_s ELSE h.busy_low_sm_s END "
        "AS DOUBLE PRECISION) / h.util_data_s ELSE 0 END)",
    }
    for prefix, (active, data) in HEALTH_SUM_READINGS.items():
        extra = f" AND ({profiled})" if prefix == "engine" else ""
        terms |= _activity(prefix, active, data, extra)
    for name in ("pcie_bytes", "nvlink_bytes"):
        has = f"h.{name}_n > 0"
        mean = f"h.{name}_sum / h.{name}_n"
        terms[f"{name}_per_s_sum"] = f"SUM(CASE WHEN {has} THEN {mean} ELSE 0 END)"
        terms[f"{name}_per_s_hours"] = f"SUM(CASE WHEN {has} THEN 1 ELSE 0 END)"
    terms["fail_since_ts"] = f"MIN({_EVENT_TS})"
    assert tuple(terms) == COLUMNS[2:], "the terms follow HEALTH_SUM_TERMS"
    return terms


_TERMS = _term_sql()
# ``gpu_id + 0`` keeps SQLite from walking the (gpu_id, hour_ts) index over every hour instead
# of the primary key's range of hours (4x slower).
_NAMED = ", ".join(f"{sql} AS {name}" for name, sql in _TERMS.items())
_HOURLY_SUMS = (
    f"SELECT h.gpu_id + 0 AS gpu_id, h.pod_id, {_NAMED} FROM {_HOURLY} h "  # noqa: S608
    "WHERE h.hour_ts >= :{lo} AND h.hour_ts < :{hi} GROUP BY 1, 2"
)
#: One day's sums, into ``gpu_health_daily`` (parameters ``day_ts``, ``start_ts``, ``end_ts``).
BUILD = (
    f"INSERT INTO {_DAILY} (day_ts, {', '.join(COLUMNS)}) "  # noqa: S608
    f"SELECT :day_ts, s.* FROM ({_HOURLY_SUMS.format(lo='start_ts', hi='end_ts')}) s"
)
_DAILY_ROWS = (
    f"SELECT {', '.join(COLUMNS)} FROM {_DAILY} "  # noqa: S608
    "WHERE day_ts >= :{lo} AND day_ts < :{hi}"
)
_OUTER = ", ".join(
    [*("gpu_id", "pod_id"), *(f"SUM({name})" for name in SUMMED), "MIN(fail_since_ts)"]
)

#: ``[start, end)`` spans of epoch seconds.
Spans = list[tuple[int, int]]


def read_sums(
    conn: Connection, start_ts: int, end_ts: int, days: Spans, hours: Spans
) -> pd.DataFrame:
    """Per (GPU unit, pod) the health terms of the hours starting in ``[start_ts, end_ts)``:
    ``days`` (spans of whole days with current sums) from ``gpu_health_daily``, ``hours`` (the
    rest) from ``gpu_health_hourly``, summed in the database, ordered by unit and pod. Columns:
    :data:`COLUMNS` then ``fail_s``, all float64 (``pod_id`` raw: ``NO_POD`` for none)."""
    parts: list[str] = []
    params: dict[str, int] = {}
    for kind, spans in (("d", days), ("h", hours)):
        sql = _DAILY_ROWS if kind == "d" else _HOURLY_SUMS
        for n, (lo, hi) in enumerate(spans):
            params |= {f"{kind}{n}lo": int(lo), f"{kind}{n}hi": int(hi)}
            parts.append(sql.format(lo=f"{kind}{n}lo", hi=f"{kind}{n}hi"))
    if not parts:
        return _frame([])
    union = " UNION ALL ".join(parts)
    sql = f"SELECT {_OUTER} FROM ({union}) s GROUP BY gpu_id, pod_id ORDER BY gpu_id, pod_id"  # noqa: S608
    frame = _frame(conn.execute(text(sql), params).all())
    frame["fail_s"] = fail_seconds(conn, start_ts, end_ts, frame)
    return frame


def _frame(rows: Sequence[Sequence[object]]) -> pd.DataFrame:
    # Plain tuples first: numpy reads a result row item by item through its key lookup. A NULL
    # (no failing event) becomes NaN.
    matrix = np.array([tuple(r) for r in rows], dtype="float64").reshape(-1, len(COLUMNS))
    frame = pd.DataFrame(matrix, columns=list(COLUMNS))
    frame["fail_s"] = 0.0
    return frame


def fail_seconds(conn: Connection, start_ts: int, end_ts: int, sums: pd.DataFrame) -> np.ndarray:
    """``fail_s`` of each row of ``sums``: the seconds of its hourly rows in ``[start_ts,
    end_ts)`` after the first failing event of its physical GPU (any unit, any pod) in the
    window, an hour's ``data_s`` at most (none before the event's hour). Reads the hourly rows
    of the units of failing GPUs only."""
    out = np.zeros(len(sums))
    failing = sums[sums["fail_since_ts"].notna()]
    if failing.empty:
        return out
    units = pd.DataFrame(
        conn.execute(text("SELECT id, cluster_id, uuid FROM gpus")).all(),
        columns=["gpu_id", "cluster_id", "uuid"],
    )
    first = failing.groupby("gpu_id")["fail_since_ts"].min().rename("since")
    physical = units.merge(first, left_on="gpu_id", right_index=True)
    since = physical.groupby(["cluster_id", "uuid"])["since"].min()
    units = units.merge(since, left_on=["cluster_id", "uuid"], right_index=True)
    ids = ", ".join(str(int(u)) for u in units["gpu_id"])
    rows = pd.DataFrame(
        conn.execute(
            text(
                f"SELECT gpu_id, pod_id, hour_ts, data_s FROM {_HOURLY} "  # noqa: S608
                f"WHERE hour_ts >= :start AND hour_ts < :end AND gpu_id IN ({ids})"
            ),
            {"start": int(start_ts), "end": int(end_ts)},
        ).all(),
        columns=["gpu_id", "pod_id", "hour_ts", "data_s"],
    ).astype("float64")
    rows["since"] = rows["gpu_id"].map(units.set_index("gpu_id")["since"])
    left = rows["hour_ts"] + HOUR_S - rows["since"]
    rows["fail_s"] = np.clip(left, 0.0, rows["data_s"])
    summed = rows.groupby(["gpu_id", "pod_id"])["fail_s"].sum()
    index = pd.MultiIndex.from_frame(sums[["gpu_id", "pod_id"]])
    return summed.reindex(index, fill_value=0.0).to_numpy(dtype="float64")
