"""Reads of the health and efficiency roll-up as the frame of :data:`HEALTH_COLUMNS`.

Re-exported by :mod:`gpuwatch.store.repository` (``repository.load_health_hourly``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import Connection, Engine, text

from gpuwatch.domain.durations import HOUR_S
from gpuwatch.domain.frames import HEALTH_COLUMNS, HEALTH_SUM_COLUMNS, HEALTH_SUM_TERMS, conform
from gpuwatch.store import daily, daily_health
from gpuwatch.store.daily_health import Spans
from gpuwatch.store.models import NO_POD
from gpuwatch.store.models_health import GpuHealthHourly
from gpuwatch.store.rollup_health import COLUMNS, FLOATS, MEANS, NULLABLE

#: Integer columns that may be NULL: read as nullable integers.
_NULLABLE_INTEGERS = tuple(name for name in NULLABLE if name not in FLOATS)


def load_health_hourly(
    engine: Engine,
    start_ts: int,
    end_ts: int,
    gpu_ids: list[int] | None = None,
    pods: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The health roll-up rows of the hours starting in ``[start_ts, end_ts)``, joined with
    their GPU unit's and pod's facts like :func:`~gpuwatch.store.repository.load_hourly_samples`.

    One row per (hour, GPU unit, pod) with an efficiency or health reading: ``ts`` is the hour,
    ``step_s`` the row's seconds with samples (``data_s``); the means (SM clock, PCIe and
    NVLink bytes per second) are NaN without readings, the counts <NA> where none was
    reported. Columns: :data:`HEALTH_COLUMNS` (docs/storage.md#health). Given ``gpu_ids``, the
    rows of those units only; ``pods``: the pods' frame, if read.
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
    return conform(repository._with_facts(engine, frame, pods), HEALTH_COLUMNS)


def load_health_sums(
    engine: Engine, start_ts: int, end_ts: int, pods: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The health roll-up of the hours starting in ``[start_ts, end_ts)`` summed per (GPU unit,
    pod) in the database, joined with the pair's facts: equal to
    :func:`gpuwatch.analytics.health_sums.health_sums` of :func:`load_health_hourly` over the
    same hours (a pair's rows ordered by unit and pod). Columns: :data:`HEALTH_SUM_COLUMNS`.

    The window's whole days whose daily sums are current are read from ``gpu_health_daily``,
    the other hours from ``gpu_health_hourly`` (:mod:`gpuwatch.store.daily_health`).
    ``pods``: :func:`~gpuwatch.store.repository.load_pods`, when the caller has read it."""
    from gpuwatch.store import repository  # it re-exports this module: imported when called

    first = -(-int(start_ts) // HOUR_S) * HOUR_S  # the first hour that starts in the window

    def read(conn: Connection, days: Spans, hours: Spans) -> pd.DataFrame:
        return daily_health.read_sums(conn, first, int(end_ts), days, hours)

    sums = daily.read_days(engine, first, int(end_ts), read).value
    pod = pd.Series(sums["pod_id"].to_numpy(dtype=np.int64), dtype="Int64")
    frame = pd.DataFrame(
        {"gpu_id": sums["gpu_id"].to_numpy(dtype=np.int64), "pod_id": pod.mask(pod.eq(NO_POD))}
    )
    for name in HEALTH_SUM_TERMS:
        frame[name] = sums[name].to_numpy(dtype="float64")
    frame["util_signal"] = pd.array([pd.NA] * len(frame), dtype="Int64")
    frame["xid"] = pd.array([pd.NA] * len(frame), dtype="Int64")
    return conform(repository._with_facts(engine, frame, pods), HEALTH_SUM_COLUMNS)


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
