"""Reads of the health and efficiency roll-up as the frame of :data:`HEALTH_COLUMNS`.

Re-exported by :mod:`gpuwatch.store.repository` (``repository.load_health_hourly``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import Engine, text

from gpuwatch.domain.frames import (
    HEALTH_COLUMNS,
    HEALTH_SUM_COLUMNS,
    HEALTH_SUM_PROFILING,
    HEALTH_SUM_READINGS,
    HEALTH_SUM_TERMS,
    conform,
)
from gpuwatch.store.models import NO_POD
from gpuwatch.store.models_health import GpuHealthHourly
from gpuwatch.store.rollup_health import COLUMNS, FLOATS, MEANS, NULLABLE

#: Integer columns that may be NULL: read as nullable integers.
_NULLABLE_INTEGERS = tuple(name for name in NULLABLE if name not in FLOATS)


def load_health_hourly(
    engine: Engine, start_ts: int, end_ts: int, gpu_ids: list[int] | None = None
) -> pd.DataFrame:
    """The health roll-up rows of the hours starting in ``[start_ts, end_ts)``, joined with
    their GPU unit's and pod's facts like :func:`~gpuwatch.store.repository.load_hourly_samples`.

    One row per (hour, GPU unit, pod) with an efficiency or health reading: ``ts`` is the hour,
    ``step_s`` the row's seconds with samples (``data_s``); the means (SM clock, PCIe and
    NVLink bytes per second) are NaN without readings, the counts <NA> where none was
    reported. Columns: :data:`HEALTH_COLUMNS` (docs/storage.md#health). Given ``gpu_ids``, the
    rows of those units only.
    """
    from gpuwatch.store import repository  # it re-exports this module: imported when called

    table = GpuHealthHourly.__tablename__
    names = list(COLUMNS)
    m = repository._fetch_window(engine, table, "hour_ts", names, start_ts, end_ts, gpu_ids)
    col = {name: m[:, n] for n, name in enumerate(COLUMNS)}
    pod = pd.Series(col["pod_id"].astype(np.int64), dtype="Int64")
    frame = pd.DataFrame(
        {
            "gpu_id": col["gpu_id"].astype(np.int64),
            "ts": col["hour_ts"].astype(np.int64),
            "step_s": col["data_s"].astype(np.int64),
            "pod_id": pod.mask(pod.eq(NO_POD)),
            # read by the join, not part of the frame
            "util_signal": pd.array([pd.NA] * len(m), dtype="Int64"),
            "xid": pd.array([pd.NA] * len(m), dtype="Int64"),
        }
    )
    skip = {"hour_ts", "gpu_id", "pod_id", *(t[0] for t in MEANS), *(t[1] for t in MEANS)}
    for name in COLUMNS:
        if name in _NULLABLE_INTEGERS:
            frame[name] = pd.array(col[name], dtype="Float64").astype("Int64")
        elif name not in skip:
            frame[name] = col[name]
    with np.errstate(invalid="ignore", divide="ignore"):
        for total, count, name in MEANS:
            frame[name] = np.where(col[count] > 0, col[total] / col[count], np.nan)
    return conform(repository._with_facts(engine, frame), HEALTH_COLUMNS)


def _ratio(num: str, den: str) -> str:
    """SQL for ``num / den`` as a float where ``den`` > 0, else 0 (both dialects)."""
    return f"CASE WHEN h.{den} > 0 THEN CAST(h.{num} AS DOUBLE PRECISION) / h.{den} ELSE 0 END"


def _activity_sql(prefix: str, active: str, data: str, extra: str = "") -> list[str]:
    has = f"h.{data} > 0{extra}"
    return [
        f"SUM(CASE WHEN {has} THEN h.data_s * CAST(h.{active} AS DOUBLE PRECISION) / h.{data} "
        f"ELSE 0 END) AS {prefix}_weighted_s",
        f"SUM(CASE WHEN {has} THEN h.data_s ELSE 0 END) AS {prefix}_weight_s",
        f"SUM(CASE WHEN {has} THEN 1 ELSE 0 END) AS {prefix}_hours",
    ]


#: A row's failing event: a failing instant, or a DBE, row-remap failure or failing XID (then
#: the row's first sample): :func:`gpuwatch.analytics.health_rows.failing_event_ts`.
_FLAGGED = "h.ecc_dbe > 0 OR h.row_remap_failure > 0 OR h.fail_xid IS NOT NULL"
_FAILING = f"h.fail_first_ts IS NOT NULL OR {_FLAGGED}"
_EVENT_TS = f"COALESCE(h.fail_first_ts, CASE WHEN {_FLAGGED} THEN h.first_ts END)"


def _sums_sql() -> str:
    """The GROUP BY (gpu_id, pod_id) of :func:`gpuwatch.analytics.health_sums.row_terms`.

    The rows are found by their hour (the primary key's range); ``gpu_id + 0`` keeps SQLite
    from walking the (gpu_id, hour_ts) index over every hour instead (4x slower)."""
    profiled = " OR ".join(f"h.{name} > 0" for name in HEALTH_SUM_PROFILING)
    left = "(h.hour_ts + 3600 - o.since_ts)"
    terms = [
        "SUM(h.data_s) AS data_s",
        "SUM(h.clock_data_s) AS clock_data_s",
        f"SUM(h.data_s * {_ratio('throttled_s', 'clock_data_s')}) AS throttled_data_s",
        f"SUM(h.data_s * {_ratio('busy_low_sm_s', 'util_data_s')}) AS low_sm_data_s",
        "SUM(h.data_s * CASE WHEN h.util_data_s > 0 THEN CAST(CASE WHEN h.busy_no_tensor_s > "
        "h.busy_low_sm_s THEN h.busy_no_tensor_s ELSE h.busy_low_sm_s END AS DOUBLE PRECISION) "
        "/ h.util_data_s ELSE 0 END) AS inefficient_data_s",
        f"SUM(CASE WHEN o.since_ts IS NULL OR {left} <= 0 THEN 0 WHEN {left} < h.data_s "
        f"THEN {left} ELSE h.data_s END) AS fail_s",
    ]
    for prefix, (active, data) in HEALTH_SUM_READINGS.items():
        extra = f" AND ({profiled})" if prefix == "engine" else ""
        terms += _activity_sql(prefix, active, data, extra)
    for name in ("pcie_bytes", "nvlink_bytes"):
        has = f"h.{name}_n > 0"
        terms += [
            f"SUM(CASE WHEN {has} THEN h.{name}_sum / h.{name}_n ELSE 0 END) AS {name}_per_s_sum",
            f"SUM(CASE WHEN {has} THEN 1 ELSE 0 END) AS {name}_per_s_hours",
        ]
    table = GpuHealthHourly.__tablename__
    window = "h.hour_ts >= :start AND h.hour_ts < :end"
    return (
        f"SELECT h.gpu_id + 0 AS gpu_id, h.pod_id, {', '.join(terms)} FROM {table} h "  # noqa: S608
        "JOIN gpus g ON g.id = h.gpu_id LEFT JOIN ("
        f"SELECT g.cluster_id, g.uuid, MIN({_EVENT_TS}) AS since_ts FROM {table} h "
        f"JOIN gpus g ON g.id = h.gpu_id WHERE {window} AND ({_FAILING}) "
        "GROUP BY g.cluster_id, g.uuid"
        ") o ON o.cluster_id = g.cluster_id AND o.uuid = g.uuid "
        f"WHERE {window} GROUP BY 1, 2 ORDER BY 1, 2"
    )


def load_health_sums(engine: Engine, start_ts: int, end_ts: int) -> pd.DataFrame:
    """The health roll-up of the hours starting in ``[start_ts, end_ts)`` summed per (GPU unit,
    pod) in the database, joined with the pair's facts: equal to
    :func:`gpuwatch.analytics.health_sums.health_sums` of :func:`load_health_hourly` over the
    same hours (a pair's rows ordered by unit and pod). Columns: :data:`HEALTH_SUM_COLUMNS`."""
    from gpuwatch.store import repository  # it re-exports this module: imported when called

    with engine.connect() as conn:
        result = conn.execute(text(_sums_sql()), {"start": int(start_ts), "end": int(end_ts)})
        names = list(result.keys())
        rows = result.fetchall()
    m = np.array(rows, dtype=float).reshape(-1, len(names))
    col = {name: m[:, n] for n, name in enumerate(names)}
    pod = pd.Series(col["pod_id"].astype(np.int64), dtype="Int64")
    frame = pd.DataFrame(
        {"gpu_id": col["gpu_id"].astype(np.int64), "pod_id": pod.mask(pod.eq(NO_POD))}
    )
    for name in HEALTH_SUM_TERMS:
        frame[name] = col[name]
    frame["util_signal"] = pd.array([pd.NA] * len(frame), dtype="Int64")
    frame["xid"] = pd.array([pd.NA] * len(frame), dtype="Int64")
    return conform(repository._with_facts(engine, frame), HEALTH_SUM_COLUMNS)


def _units_of_gpus_with(engine: Engine, start_ts: int, end_ts: int, where: str) -> list[int]:
    """Every unit of the physical GPUs with a health row in ``[start_ts, end_ts)`` that meets
    ``where`` (SQL on the row ``h``), in id order."""
    table = GpuHealthHourly.__tablename__
    sql = text(
        "SELECT DISTINCT g2.id FROM gpus g2 JOIN gpus g1 ON g1.cluster_id = g2.cluster_id "  # noqa: S608
        f"AND g1.uuid = g2.uuid WHERE g1.id IN (SELECT DISTINCT h.gpu_id FROM {table} h "
        f"WHERE h.hour_ts >= :start AND h.hour_ts < :end AND ({where})) ORDER BY 1"
    )
    with engine.connect() as conn:
        rows = conn.execute(sql, {"start": int(start_ts), "end": int(end_ts)}).fetchall()
    return [int(r[0]) for r in rows]


def units_held_by(engine: Engine, start_ts: int, end_ts: int, pod_ids: list[int]) -> list[int]:
    """The GPU units that any of ``pod_ids`` held in the health roll-up's hours starting in
    ``[start_ts, end_ts)``, with every other unit of the same physical GPUs (an event on a MIG
    instance or a slot is its GPU's), in id order."""
    if not pod_ids:
        return []
    pods = ", ".join(str(int(p)) for p in pod_ids)
    return _units_of_gpus_with(engine, start_ts, end_ts, f"h.pod_id IN ({pods})")


#: A health row with any evidence of a state other than healthy: an error count (stored only
#: where the counter rose), an XID, a failing instant, or a throttled second. Every limit of
#: :class:`~gpuwatch.domain.health.HealthPolicy` is above zero, so a GPU without such a row in a
#: window is healthy in it.
_COUNTED = (
    "ecc_sbe",
    "ecc_dbe",
    "pcie_replays",
    "nvlink_errors",
    "row_remap_failure",
    "fail_first_ts",
    "fail_xid",
    "app_xid",
    "other_xid",
)
_EVIDENCE = " OR ".join([*(f"h.{name} IS NOT NULL" for name in _COUNTED), "h.throttled_s > 0"])


def units_with_health_events(engine: Engine, start_ts: int, end_ts: int) -> list[int]:
    """Every unit of the physical GPUs with any evidence of not being healthy (an error count,
    an XID, a failing event, a throttled second) in the hours starting in ``[start_ts,
    end_ts)``: the only GPUs whose health can be other than healthy there."""
    return _units_of_gpus_with(engine, start_ts, end_ts, _EVIDENCE)
