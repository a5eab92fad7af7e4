"""Reads from the store as the frames of :mod:`gpuwatch.domain.frames`.

SQL does the joins and the window filter; callers get plain DataFrames with the contract's
columns and dtypes. Strings repeated on every sample row (cluster, node, model, pod) are read
once per entity and joined in pandas, which is much faster than returning them per row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, func, select

from gpuwatch.domain.allocation import DEVICE_PLUGIN, DRA, unit_mode
from gpuwatch.domain.frames import (
    DCGM_ONLY_ATTRIBUTION,
    GPU_COLUMNS,
    HOURLY_SAMPLE_COLUMNS,
    NODE_COLUMNS,
    SAMPLE_COLUMNS,
    conform,
)
from gpuwatch.store import rollup
from gpuwatch.store.driver import driver_rows
from gpuwatch.store.models import (
    HOUR_S,
    NO_POD,
    SAMPLE_FIELDS,
    UTIL_SIGNALS,
    Cluster,
    CollectionState,
    Gpu,
    GpuSample,
    GpuSampleHourly,
    Node,
    Pod,
)
from gpuwatch.store.repository_pods import load_pods
from gpuwatch.store.unit_history import history_query

__all__ = ["load_pods"]  # re-exported: callers read every frame from this module


@dataclass(frozen=True)
class StoreSummary:
    clusters: int
    nodes: int
    gpu_units: int
    pods: int
    samples: int
    first_ts: int | None
    last_ts: int | None
    data_version: int


def _read(engine: Engine, stmt: object) -> pd.DataFrame:
    with engine.connect() as conn:
        frame: pd.DataFrame = pd.read_sql_query(stmt, conn)  # type: ignore[call-overload]
        return frame


def summary(engine: Engine) -> StoreSummary:
    """Counts and the time span of the stored samples (cheap: indexes only)."""
    with engine.connect() as conn:

        def count(model: type) -> int:
            return int(conn.execute(select(func.count()).select_from(model)).scalar_one())

        first, last = conn.execute(select(func.min(GpuSample.ts), func.max(GpuSample.ts))).one()
        version = conn.execute(select(func.max(CollectionState.updated_ts))).scalar()
        return StoreSummary(
            clusters=count(Cluster),
            nodes=count(Node),
            gpu_units=count(Gpu),
            pods=count(Pod),
            samples=count(GpuSample),
            first_ts=None if first is None else int(first),
            last_ts=None if last is None else int(last),
            data_version=int(version or 0),
        )


def load_nodes(engine: Engine) -> pd.DataFrame:
    stmt = select(
        Cluster.name.label("cluster"),
        Node.name.label("node"),
        Node.gpu_model,
        Node.gpu_count,
        Node.gpu_memory_mib,
        Node.capacity_type,
        Node.instance_type,
        Node.mig_capable,
        Node.mig_strategy,
        Node.timeslice_replicas,
        Node.provider,
        func.coalesce(Node.gpu_sharing, DEVICE_PLUGIN).label("gpu_sharing"),
    ).join(Cluster, Cluster.id == Node.cluster_id)
    frame = _read(engine, stmt)
    frame["mig_capable"] = frame["mig_capable"].astype(bool)
    return conform(frame, NODE_COLUMNS)


def _gpu_facts(engine: Engine) -> pd.DataFrame:
    stmt = (
        select(
            Cluster.name.label("cluster"),
            func.coalesce(Node.name, "").label("node"),
            Gpu.id.label("gpu_id"),
            Gpu.uuid.label("gpu_uuid"),
            Gpu.mig_gi_id,
            Gpu.mig_profile,
            Gpu.slot,
            Gpu.timeslice_replicas,
            func.coalesce(Gpu.model_name, Node.gpu_model, "unknown").label("gpu_model"),
            func.coalesce(Node.capacity_type, "on_demand").label("capacity_type"),
            Gpu.sharing,
            Gpu.memory_total_mib,
            Gpu.first_seen_ts,
            Gpu.last_seen_ts,
        )
        .join(Cluster, Cluster.id == Gpu.cluster_id)
        .outerjoin(Node, Node.id == Gpu.node_id)
    )
    frame = _read(engine, stmt)
    modes = [
        unit_mode(sharing, mig, replicas)
        for sharing, mig, replicas in frame[["sharing", "mig_profile", "timeslice_replicas"]]
        .astype(object)
        .itertuples(index=False)
    ]
    return frame.drop(columns=["sharing"]).assign(allocation=pd.Series(modes, dtype=object))


def load_gpus(engine: Engine) -> pd.DataFrame:
    return conform(_gpu_facts(engine), GPU_COLUMNS)


#: Health readings the cost model does not use; costing reads skip them (a third less to fetch).
HEALTH_FIELDS = ("power_w", "temp_c", "xid")


def _raw_samples(engine: Engine, start_ts: int, end_ts: int, health: bool) -> pd.DataFrame:
    """The window's sample rows, read through the driver into one float matrix (fast path)."""
    fields = [f for f in SAMPLE_FIELDS if health or f not in HEALTH_FIELDS]
    matrix = _fetch_window(engine, GpuSample.__tablename__, "ts", fields, start_ts, end_ts)
    frame = pd.DataFrame(matrix, columns=fields)
    if not health:
        frame = frame.assign(**dict.fromkeys(HEALTH_FIELDS, np.nan))
    for name in ("gpu_id", "ts", "step_s"):
        frame[name] = frame[name].astype(np.int64)
    for name in ("pod_id", "util_signal", "xid"):
        frame[name] = frame[name].astype("Int64")
    return frame


def _with_facts(
    engine: Engine, samples: pd.DataFrame, pods: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Sample rows joined with their GPU unit's and pod's facts (strings read once each);
    ``pods``: :func:`load_pods` when the caller has read it already (read again if it lacks a
    pod of the rows: one stored since)."""
    gpus = _gpu_facts(engine).drop(columns=["memory_total_mib", "first_seen_ts", "last_seen_ts"])
    if pods is None or not _has_every_pod(pods, samples):
        pods = load_pods(engine)
    pods = pods[
        ["pod_id", "namespace", "pod", "workload_kind", "workload", "team", "gpu_count",
         "dcgm_only", "allocation"]
    ].rename(columns={"gpu_count": "pod_gpu_count", "allocation": "pod_allocation"})  # fmt: skip
    frame = samples.merge(gpus, on="gpu_id", how="left").merge(pods, on="pod_id", how="left")
    held_by_claim = frame.pop("pod_allocation").astype(object).eq(DRA).to_numpy()
    frame["allocation"] = np.where(held_by_claim, DRA, frame["allocation"].astype(object))
    only_dcgm = frame.pop("dcgm_only").fillna(False).astype(bool).to_numpy()
    attribution = pd.Series(np.where(only_dcgm, DCGM_ONLY_ATTRIBUTION, "pod"), dtype=object)
    frame["attribution"] = attribution.where(frame["pod_id"].notna().to_numpy(), None)
    frame["util_signal"] = frame["util_signal"].map(UTIL_SIGNALS)
    frame["xid"] = frame["xid"].fillna(0)
    return frame


def _has_every_pod(pods: pd.DataFrame, samples: pd.DataFrame) -> bool:
    held = pd.unique(samples["pod_id"].dropna().to_numpy(dtype="int64"))
    return bool(np.isin(held, pods["pod_id"].to_numpy(dtype="int64")).all())


def load_samples(
    engine: Engine,
    start_ts: int,
    end_ts: int,
    *,
    health: bool = True,
    pods: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Every sample with ``start_ts <= ts < end_ts``, joined with its GPU unit and pod facts.

    ``health=False`` leaves power, temperature and XID unread (NaN/0): costing needs none of them.
    ``pods``: :func:`load_pods`, when the caller has read it already.
    """
    samples = _raw_samples(engine, start_ts, end_ts, health)
    return conform(_with_facts(engine, samples, pods), SAMPLE_COLUMNS)


def _fetch_window(
    engine: Engine,
    table: str,
    column: str,
    fields: list[str],
    start_ts: int,
    end_ts: int,
    gpu_ids: list[int] | None = None,
    condition: str = "",
) -> np.ndarray:
    """``fields`` of ``table``'s rows with ``start_ts <= column < end_ts`` (given ``gpu_ids``,
    of those units only; given ``condition``, an SQL condition on the table's columns, of the
    rows that meet it), as one float matrix read straight from the driver."""
    sql = (
        f"SELECT {', '.join(fields)} FROM {table} "  # noqa: S608
        f"WHERE {column} >= {{mark}} AND {column} < {{mark}}"
    )
    if gpu_ids is not None:
        sql += f" AND gpu_id IN ({', '.join(str(int(i)) for i in gpu_ids) or 'NULL'})"
    if condition:
        sql += f" AND ({condition})"
    with engine.connect() as conn:
        rows = driver_rows(conn, sql, start_ts, end_ts)
    return np.array(rows, dtype=float).reshape(-1, len(fields))


_HOURLY_SELECT = (
    "hour_ts",
    "gpu_id",
    "pod_id",
    "samples",
    "data_s",
    "used_s",
    "idle_s",
    "util_signal",
    "fb_used_max_mib",
    "fb_total_mib",
    "power_w_sum",
    "power_n",
    "temp_max_c",
    "xid",
)
_HOURLY_HEALTH = ("power_w_sum", "power_n", "temp_max_c", "xid")


def load_hourly_samples(
    engine: Engine,
    start_ts: int,
    end_ts: int,
    *,
    health: bool = True,
    gpu_ids: list[int] | None = None,
    pods: pd.DataFrame | None = None,
    condition: str = "",
) -> pd.DataFrame:
    """The hourly roll-ups of the hours starting in ``[start_ts, end_ts)``, as sample rows
    (given ``gpu_ids``, of those GPU units only; given ``condition``, an SQL condition on
    ``gpu_samples_hourly``'s columns, of the rows that meet it; ``pods``: :func:`load_pods`,
    if read).

    One row per (hour, GPU unit, pod): ``ts`` is the hour, ``step_s`` the seconds with a
    utilization reading, ``util_ratio`` their mean, ``idle_ratio`` their idle share,
    ``samples`` the raw samples behind the row; memory, temperature and XID are the hour's
    maxima, power its mean. Columns: :data:`HOURLY_SAMPLE_COLUMNS` (docs/storage.md).
    ``health=False`` leaves power, temperature and XID unread (NaN/0), as for raw samples.
    """
    fields = [f for f in _HOURLY_SELECT if health or f not in _HOURLY_HEALTH]
    table = GpuSampleHourly.__tablename__
    m = _fetch_window(engine, table, "hour_ts", fields, start_ts, end_ts, gpu_ids, condition)
    nan = np.full(len(m), np.nan)
    cols = {name: m[:, fields.index(name)] if name in fields else nan for name in _HOURLY_SELECT}
    return summed_samples(engine, cols, pods)


def summed_samples(
    engine: Engine, cols: dict[str, np.ndarray], pods: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Rows of summed samples (hourly roll-ups, or daily sums with ``hour_ts`` their day), column
    by column as :data:`_HOURLY_SELECT` names them, as sample rows with their facts."""
    data_s = cols["data_s"]
    with np.errstate(invalid="ignore", divide="ignore"):
        util = np.where(data_s > 0, cols["used_s"] / data_s, np.nan)
        idle = np.where(data_s > 0, cols["idle_s"] / data_s, np.nan)
        power = np.where(cols["power_n"] > 0, cols["power_w_sum"] / cols["power_n"], np.nan)
    pod = pd.Series(cols["pod_id"].astype(np.int64), dtype="Int64")
    samples = pd.DataFrame(
        {
            "gpu_id": cols["gpu_id"].astype(np.int64),
            "ts": cols["hour_ts"].astype(np.int64),
            "step_s": data_s.astype(np.int64),
            "pod_id": pod.mask(pod.eq(NO_POD)),
            "util_ratio": util,
            "util_signal": pd.array(cols["util_signal"], dtype="Float64").astype("Int64"),
            "fb_used_mib": cols["fb_used_max_mib"],
            "fb_total_mib": cols["fb_total_mib"],
            "power_w": power,
            "temp_c": cols["temp_max_c"],
            "xid": pd.array(cols["xid"], dtype="Float64").astype("Int64"),
            "idle_ratio": idle,
            "samples": cols["samples"].astype(np.int64),
        }
    )
    return conform(_with_facts(engine, samples, pods), HOURLY_SAMPLE_COLUMNS)


def rollup_idle_util_pct(engine: Engine) -> float | None:
    """The idle threshold the roll-ups were built at (None: no roll-up state recorded)."""
    with engine.connect() as conn:
        state = rollup.read_state(conn)
    return None if state is None else state.idle_util_pct


def _any_between(engine: Engine, column: Any, start_ts: int, end_ts: int) -> bool:
    """Whether ``column`` has a value in ``[start_ts, end_ts)`` (cheap: a key range probe)."""
    with engine.connect() as conn:
        stmt = select(column).where(column >= int(start_ts), column < int(end_ts)).limit(1)
        return conn.execute(stmt).first() is not None


def has_hourly(engine: Engine, start_ts: int, end_ts: int) -> bool:
    """Whether any roll-up falls in the window."""
    return _any_between(engine, GpuSampleHourly.hour_ts, start_ts, end_ts)


def has_samples(engine: Engine, start_ts: int, end_ts: int) -> bool:
    """Whether any raw sample falls in the window."""
    return _any_between(engine, GpuSample.ts, start_ts, end_ts)


@dataclass(frozen=True)
class DataMarker:
    """What identifies the stored data's state, cheaply (indexed lookups only)."""

    data_version: int
    first_ts: int | None
    last_ts: int | None
    #: First raw sample (later than ``first_ts`` once old raw samples were compacted away).
    raw_first_ts: int | None = None


def data_marker(engine: Engine) -> DataMarker:
    """The data version (last collection update) and the span of the stored samples, raw or
    rolled up (a store whose raw samples are all past the retention still has its hours)."""
    with engine.connect() as conn:
        first = raw_first = conn.execute(select(func.min(GpuSample.ts))).scalar()
        last = conn.execute(select(func.max(GpuSample.ts))).scalar()
        version = conn.execute(select(func.max(CollectionState.updated_ts))).scalar()
        # Hours whose raw samples were compacted away still count (their roll-ups stay).
        hour_first = conn.execute(select(func.min(GpuSampleHourly.hour_ts))).scalar()
        if hour_first is not None and (first is None or hour_first < first):
            first = hour_first
        if last is None:
            hour_last = conn.execute(select(func.max(GpuSampleHourly.hour_ts))).scalar()
            last = None if hour_last is None else int(hour_last) + HOUR_S - 1
    return DataMarker(
        data_version=int(version or 0),
        first_ts=None if first is None else int(first),
        last_ts=None if last is None else int(last),
        raw_first_ts=None if raw_first is None else int(raw_first),
    )


def load_gpu_samples(engine: Engine, gpu_id: int, start_ts: int, end_ts: int) -> pd.DataFrame:
    """One GPU unit's samples with ``start_ts <= ts < end_ts`` (the samples frame's columns),
    read through the primary key (:mod:`~gpuwatch.store.unit_history`)."""
    samples = _read(engine, history_query(gpu_id, start_ts, end_ts)).astype(
        {"gpu_id": "int64", "ts": "int64", "step_s": "int64", "pod_id": "Int64",
         "util_signal": "Int64", "xid": "Int64"}
    )  # fmt: skip
    frame = _with_facts(engine, samples)
    return conform(frame.sort_values("ts", kind="stable"), SAMPLE_COLUMNS).reset_index(drop=True)


def load_collection_state(engine: Engine) -> pd.DataFrame:
    """Per cluster and source: the collection watermark, its last update and its detail."""
    stmt = select(
        Cluster.name.label("cluster"),
        CollectionState.source,
        CollectionState.watermark_ts,
        CollectionState.updated_ts,
        CollectionState.detail,
    ).join(Cluster, Cluster.id == CollectionState.cluster_id)
    frame = _read(engine, stmt)
    return frame.astype(
        {"cluster": "string", "source": "string", "watermark_ts": "int64", "updated_ts": "int64"}
    )


from gpuwatch.store.repository_health import load_health_hourly as load_health_hourly  # noqa: E402, PLC0414
from gpuwatch.store.repository_health import load_health_sums as load_health_sums  # noqa: E402, PLC0414
from gpuwatch.store.repository_health import units_held_by as units_held_by  # noqa: E402, PLC0414
from gpuwatch.store.repository_health import units_with_health_events as units_with_health_events  # noqa: E402, PLC0414
from gpuwatch.store.repository_pods import load_dra_devices as load_dra_devices  # noqa: E402, PLC0414
