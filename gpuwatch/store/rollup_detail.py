"""The per-hour detail behind recommendations: pod and workload histograms (docs/storage.md).

Rolled up with the hourly sums, in the same transaction, by :mod:`gpuwatch.store.rollup`:
:func:`roll_up_range` from the raw samples of whole hours, :func:`detail_of` from the samples
a page writes to hours that held none before (:mod:`gpuwatch.store.rollup_fresh`). The arithmetic is
:mod:`gpuwatch.domain.series`, the same the analytics run on raw samples.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection, delete, select, tuple_

from gpuwatch.domain import series, sketch
from gpuwatch.domain.durations import HOUR_S
from gpuwatch.store.detail_rows import blobs
from gpuwatch.store.driver import driver_rows, insert_tuples
from gpuwatch.store.models import Base, Gpu, Pod, PodSampleHourly, WorkloadSampleHourly

_CHUNK = 500  # ids per IN (...) list
_RAW_SQL = (
    "SELECT gpu_id, ts, step_s, pod_id, util_ratio, fb_used_mib FROM gpu_samples "
    "WHERE ts >= {mark} AND ts < {mark} AND pod_id IS NOT NULL AND util_ratio IS NOT NULL"
)
_WORKLOAD_KEY = ("cluster_id", "namespace", "workload_kind", "workload_name", "gpu_model")


@dataclass(frozen=True)
class HeldSamples:
    """Samples with a utilization reading that a pod holds, column by column."""

    gpu_id: np.ndarray
    ts: np.ndarray
    step_s: np.ndarray
    pod_id: np.ndarray
    util_ratio: np.ndarray
    fb_used_mib: np.ndarray

    def where(self, mask: np.ndarray) -> HeldSamples:
        return HeldSamples(*(getattr(self, f)[mask] for f in self.__dataclass_fields__))


def held_samples(
    gpu_id: np.ndarray,
    ts: np.ndarray,
    step_s: np.ndarray,
    pod_id: np.ndarray,
    util_ratio: np.ndarray,
    fb_used_mib: np.ndarray,
) -> HeldSamples:
    """The entries of sample columns (NaN: missing) that a pod holds with a reading."""
    pod = np.asarray(pod_id, np.float64)
    util = np.asarray(util_ratio, np.float64)
    keep = ~np.isnan(pod) & ~np.isnan(util)
    return HeldSamples(
        np.asarray(gpu_id, np.int64)[keep],
        np.asarray(ts, np.int64)[keep],
        np.asarray(step_s, np.int64)[keep],
        pod[keep].astype(np.int64),
        util[keep],
        np.asarray(fb_used_mib, np.float64)[keep],
    )


def _chunks(ids: Sequence[int]) -> Iterable[list[int]]:
    for at in range(0, len(ids), _CHUNK):
        yield list(ids[at : at + _CHUNK])


def _pod_facts(conn: Connection, pod_ids: np.ndarray) -> dict[int, tuple[Any, ...]]:
    """Per pod id: (cluster_id, namespace, workload kind, workload name, gpu_count, uid)."""
    cols = (Pod.id, Pod.cluster_id, Pod.namespace, Pod.workload_kind, Pod.workload_name,
            Pod.gpu_count, Pod.uid)  # fmt: skip
    facts: dict[int, tuple[Any, ...]] = {}
    for chunk in _chunks(np.unique(pod_ids).tolist()):
        for row in conn.execute(select(*cols).where(Pod.id.in_(chunk))):
            facts[int(row[0])] = tuple(row[1:])
    return facts


def _models(conn: Connection, gpu_ids: np.ndarray) -> dict[int, str]:
    models: dict[int, str] = {}
    for chunk in _chunks(np.unique(gpu_ids).tolist()):
        for gid, model in conn.execute(select(Gpu.id, Gpu.model_name).where(Gpu.id.in_(chunk))):
            models[int(gid)] = model or ""
    return models


def holds_gpus(gpu_count: int, uid: str) -> bool:
    """Whether a pod row can hold GPUs: not one the API shows requesting none."""
    return not (int(gpu_count) == 0 and uid != "")


@dataclass(frozen=True)
class Detail:
    """The detail rows of some samples, ready to insert."""

    pods: list[dict[str, Any]]
    workloads: list[dict[str, Any]]


@dataclass(frozen=True)
class Facts:
    """What the detail of some samples reads of the store."""

    #: Per pod id: (cluster_id, namespace, workload kind, workload name, gpu_count, uid).
    pods: dict[int, tuple[Any, ...]]
    #: Per GPU unit id: its model ("" unknown).
    models: dict[int, str]


def read_facts(conn: Connection, samples: HeldSamples) -> Facts:
    """The facts of the pods and GPU units ``samples`` name."""
    return Facts(_pod_facts(conn, samples.pod_id), _models(conn, samples.gpu_id))


def compute(conn: Connection, samples: HeldSamples, idle_ratio: float) -> Detail:
    """The pod-hour and workload-hour rows of ``samples`` (whole hours of their pods)."""
    return detail_of(samples, read_facts(conn, samples), idle_ratio)


def detail_of(samples: HeldSamples, facts: Facts, idle_ratio: float) -> Detail:
    """The pod-hour and workload-hour rows of ``samples`` (whole hours of their pods), given
    their pods' and GPU units' ``facts`` (pure)."""
    known = facts.pods
    pod_ids, pod_codes = np.unique(samples.pod_id, return_inverse=True)
    holding = np.array(
        [p in known and holds_gpus(known[p][4], known[p][5]) for p in pod_ids.tolist()], bool
    )
    samples = samples.where(holding[pod_codes])
    if not len(samples.ts):
        return Detail([], [])
    pod_ids, pod_codes = np.unique(samples.pod_id, return_inverse=True)
    gpu_ids, gpu_codes = np.unique(samples.gpu_id, return_inverse=True)
    models = facts.models
    model_names, model_of_gpu = np.unique(
        np.array([models.get(g, "") for g in gpu_ids.tolist()], dtype=object).astype(str),
        return_inverse=True,
    )
    model_codes = model_of_gpu[gpu_codes]
    pairs, pair_codes = np.unique(pod_codes * len(model_names) + model_codes, return_inverse=True)
    index: dict[tuple[Any, ...], int] = {}
    pair_workload = [
        index.setdefault(
            (*known[int(pod_ids[pair // len(model_names)])][:4],
             str(model_names[pair % len(model_names)])),
            len(index),
        )
        for pair in pairs.tolist()
    ]  # fmt: skip
    workload_codes = np.asarray(pair_workload, np.int64)[pair_codes]
    pods = series.pod_hours(pod_codes, samples.ts, samples.step_s, samples.util_ratio,
                            samples.fb_used_mib, idle_ratio)  # fmt: skip
    requested = np.array([float(known[int(p)][4]) for p in pod_ids.tolist()])
    loads = series.workload_hours(workload_codes, pod_codes, samples.ts, samples.step_s,
                                  samples.util_ratio, requested)  # fmt: skip
    first = np.unique(pod_codes, return_index=True)[1]
    pod_model = [str(model_names[model_codes[i]]) for i in first.tolist()]
    return Detail(_pod_rows(pods, pod_ids, pod_model), _workload_rows(loads, list(index)))


def _pod_rows(
    pods: series.PodHours, pod_ids: np.ndarray, pod_model: list[str]
) -> list[dict[str, Any]]:
    n = len(pods.pod)
    busy, util, fb = (blobs(h, n) for h in (pods.busy, pods.util, pods.fb_used))
    return [
        {
            "hour_ts": int(pods.hour_ts[i]),
            "pod_id": int(pod_ids[int(pods.pod[i])]),
            "gpu_model": pod_model[int(pods.pod[i])] or None,
            "data_s": int(pods.data_s[i]),
            "held_max": int(pods.held_max[i]),
            "busy_hist": busy[i],
            "util_hist": util[i],
            "fb_used_hist": fb[i],
        }
        for i in range(n)
    ]


def _workload_rows(loads: series.WorkloadHours, keys: list[Any]) -> list[dict[str, Any]]:
    n = len(loads.workload)
    held, util_sum = blobs(loads.held, n), blobs(loads.util_sum, n)
    return [
        {
            "hour_ts": int(loads.hour_ts[i]),
            **dict(zip(_WORKLOAD_KEY, keys[int(loads.workload[i])], strict=True)),
            "data_s": int(loads.data_s[i]),
            "util_sum_bin_s": int(loads.util_sum_bin_s[i]),
            "held_hist": held[i],
            "util_sum_hist": util_sum[i],
        }
        for i in range(n)
    ]


def _insert(conn: Connection, detail: Detail) -> int:
    _insert_rows(conn, PodSampleHourly, detail.pods)
    _insert_rows(conn, WorkloadSampleHourly, detail.workloads)
    return len(detail.pods) + len(detail.workloads)


def _insert_rows(conn: Connection, model: type[Base], rows: list[dict[str, Any]]) -> None:
    """The rows' values in the table's column order, one ``executemany`` of plain tuples."""
    if rows:
        names = [column.name for column in model.__table__.columns]
        values = [tuple(row[name] for name in names) for row in rows]
        insert_tuples(conn, model.__tablename__, names, values)


def read_held(conn: Connection, start_ts: int, end_ts: int) -> HeldSamples:
    """The held samples with a reading in ``[start_ts, end_ts)``, from ``gpu_samples``."""
    rows = driver_rows(conn, _RAW_SQL, start_ts, end_ts)
    m = np.array(rows, dtype=np.float64).reshape(-1, 6)
    return held_samples(m[:, 0], m[:, 1], m[:, 2], m[:, 3], m[:, 4], m[:, 5])


def roll_up_range(conn: Connection, first_hour: int, end_hour: int, idle_ratio: float) -> int:
    """Rebuild the detail of the whole hours in ``[first_hour, end_hour)``; returns rows."""
    for table in (PodSampleHourly, WorkloadSampleHourly):
        hours = table.__table__.c.hour_ts
        conn.execute(delete(table).where(hours >= first_hour, hours < end_hour))
    rows = 0
    for start in range(first_hour, end_hour, 24 * HOUR_S):
        held = read_held(conn, start, min(start + 24 * HOUR_S, end_hour))
        rows += _insert(conn, compute(conn, held, idle_ratio))
    return rows


def write_detail(conn: Connection, detail: Detail) -> int:
    """Replace the stored rows of ``detail``'s keys by its rows (rolled up from every raw sample
    of its pods in its hours); returns rows written. Hours that hold no detail yet (a backfill)
    are only inserted into."""
    hours = sorted({r["hour_ts"] for r in detail.pods} | {r["hour_ts"] for r in detail.workloads})
    if _any_stored(conn, hours):
        pod_keys = sorted({(r["hour_ts"], r["pod_id"]) for r in detail.pods})
        loads = sorted({(r["hour_ts"], *(r[k] for k in _WORKLOAD_KEY)) for r in detail.workloads})
        _delete_keys(conn, pod_keys, loads)
    return _insert(conn, detail)


def _any_stored(conn: Connection, hours: list[int]) -> bool:
    """Whether either detail table holds a row in one of ``hours``."""
    for table in (PodSampleHourly, WorkloadSampleHourly):
        column = table.__table__.c.hour_ts
        if hours and conn.execute(select(column).where(column.in_(hours)).limit(1)).first():
            return True
    return False


_POD_HISTS = ("busy_hist", "util_hist", "fb_used_hist")
_WORKLOAD_HISTS = ("held_hist", "util_sum_hist")


def _added_blobs(old: list[bytes | None], new: list[bytes]) -> list[bytes]:
    """Histogram blobs added bin by bin, row by row (``old[i]`` None: ``new[i]`` alone)."""
    rows_a, bins_a, counts_a = sketch.decode_many(old)
    rows_b, bins_b, counts_b = sketch.decode_many(new)
    rows, bins, counts = sketch.histogram(
        np.concatenate([rows_a, rows_b]),
        np.concatenate([bins_a, bins_b]),
        np.concatenate([counts_a, counts_b]),
    )
    return sketch.encode_rows(len(new), rows, bins, counts)


def _merged(
    new: list[dict[str, Any]],
    old: dict[tuple[Any, ...], Any],
    keys: tuple[str, ...],
    hists: tuple[str, ...],
    sums: tuple[str, ...],
    peaks: tuple[str, ...],
) -> list[dict[str, Any]]:
    """``new`` rows with the stored rows ``old`` (by key) added in."""
    before = [old.get(tuple(row[k] for k in keys)) for row in new]
    out = [dict(row) for row in new]
    for name in hists:
        stored_blobs = [None if b is None else b[name] for b in before]
        added = _added_blobs(stored_blobs, [r[name] for r in new])
        for row, blob in zip(out, added, strict=True):
            row[name] = blob
    for row, stored in zip(out, before, strict=True):
        if stored is None:
            continue
        for name in sums:
            row[name] += int(stored[name])
        for name in peaks:
            row[name] = max(row[name], int(stored[name]))
    return out


def _hour_chunks(keys: Iterable[tuple[Any, ...]]) -> Iterator[tuple[int, list[int]]]:
    """(hour, id) keys as (hour, up to :data:`_CHUNK` of its ids): one id list per hour, which
    every database matches by index (a list of row values it may not)."""
    by_hour: dict[int, list[int]] = {}
    for hour, member in keys:
        by_hour.setdefault(int(hour), []).append(int(member))
    for hour, ids in by_hour.items():
        for at in range(0, len(ids), _CHUNK):
            yield hour, ids[at : at + _CHUNK]


def _stored_pods(conn: Connection, wanted: list[tuple[int, int]]) -> dict[tuple[Any, ...], Any]:
    """The stored pod rows with the keys ``wanted`` ((hour, pod)), by key."""
    p = PodSampleHourly
    found: dict[tuple[Any, ...], Any] = {}
    for hour, pods in _hour_chunks(wanted):
        rows = conn.execute(select(p.__table__).where(p.hour_ts == hour, p.pod_id.in_(pods)))
        found.update({(row["hour_ts"], row["pod_id"]): row for row in rows.mappings()})
    return found


def _stored_workloads(
    conn: Connection, scopes: Iterable[tuple[int, int]]
) -> dict[tuple[Any, ...], Any]:
    """Every stored workload row of each (hour, cluster) of ``scopes``, by key."""
    w = WorkloadSampleHourly
    found: dict[tuple[Any, ...], Any] = {}
    for hour, cluster in scopes:
        rows = conn.execute(select(w.__table__).where(w.hour_ts == hour, w.cluster_id == cluster))
        found.update({tuple(row[k] for k in _LOAD_KEYS): row for row in rows.mappings()})
    return found


_POD_KEYS = ("hour_ts", "pod_id")
_LOAD_KEYS = ("hour_ts", *_WORKLOAD_KEY)


def merge_samples(conn: Connection, samples: HeldSamples, idle_ratio: float) -> int:
    """Merge the detail of ``samples`` (appended to their hours: no stored sample of their
    pods at or after their first instant) into the stored detail; returns rows written.

    The workload rows of each (hour, cluster) the samples touch are written again whole (those
    the samples leave alone as they were): a workload's key is five columns."""
    detail = compute(conn, samples, idle_ratio)
    wanted_pods = [(r["hour_ts"], r["pod_id"]) for r in detail.pods]
    old_pods = _stored_pods(conn, wanted_pods)
    scopes = sorted({(r["hour_ts"], r["cluster_id"]) for r in detail.workloads})
    old_loads = _stored_workloads(conn, scopes)
    pods = _merged(detail.pods, old_pods, _POD_KEYS, _POD_HISTS, ("data_s",), ("held_max",))
    loads = _merged(detail.workloads, old_loads, _LOAD_KEYS, _WORKLOAD_HISTS,
                    ("data_s", "util_sum_bin_s"), ())  # fmt: skip
    touched = {tuple(r[k] for k in _LOAD_KEYS) for r in loads}
    loads += [dict(row) for key, row in old_loads.items() if key not in touched]
    _delete_keys(conn, [k for k in wanted_pods if k in old_pods], [])
    _delete_scopes(conn, scopes)
    return _insert(conn, Detail(pods, loads))


def _delete_keys(
    conn: Connection, pod_keys: Iterable[tuple[Any, ...]], loads: Sequence[tuple[Any, ...]]
) -> None:
    """Delete the pod rows of ``pod_keys`` ((hour, pod)) and the workload rows of ``loads``."""
    p, w = PodSampleHourly, WorkloadSampleHourly
    for hour, pods in _hour_chunks(pod_keys):
        conn.execute(delete(p).where(p.hour_ts == hour, p.pod_id.in_(pods)))
    w_cols = (w.hour_ts, w.cluster_id, w.namespace, w.workload_kind, w.workload_name, w.gpu_model)
    for at in range(0, len(loads), _CHUNK):
        conn.execute(delete(w).where(tuple_(*w_cols).in_(loads[at : at + _CHUNK])))


def _delete_scopes(conn: Connection, scopes: Iterable[tuple[int, int]]) -> None:
    """Delete every workload row of the (hour, cluster) ``scopes``."""
    w = WorkloadSampleHourly
    for hour, cluster in scopes:
        conn.execute(delete(w).where(w.hour_ts == hour, w.cluster_id == cluster))
