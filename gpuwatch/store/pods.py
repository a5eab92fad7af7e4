"""Pods known from DCGM before (or without) the Kubernetes API (docs/cost-model.md#dcgm-only-pods).

A pod that DCGM names but the API does not list (a finished Job, a replaced ReplicaSet pod, a
backfill with `--no-kubernetes`) is stored with an empty ``uid``: it holds the GPUs its series
name (:func:`raise_gpu_counts`). When the API lists it later, the same row takes the pod's uid,
owner and limits (:func:`adopt_dcgm_only`), so it never becomes a second row; hours already
rolled up under its old workload are rolled up again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import Connection, delete, func, select, update

from gpuwatch.store import daily, rollup
from gpuwatch.store.models import HOUR_S, GpuSample, GpuSampleHourly, Pod
from gpuwatch.store.writer import table_of

#: Pod ids per IN (...) list.
_CHUNK = 500


def raise_gpu_counts(conn: Connection, counts: Mapping[int, int]) -> set[int]:
    """Raise the ``gpu_count`` of DCGM-only pods (uid '') to ``counts`` (pod id → the most
    distinct GPU units its series named at one sample time), never lowering it; returns the
    ids of the pods raised. One read per 500 pods, and an update only where one is due."""
    table = table_of(Pod)
    ids = sorted(int(p) for p in counts)
    due: dict[int, int] = {}
    for at in range(0, len(ids), _CHUNK):
        low = select(table.c.id, table.c.gpu_count).where(
            table.c.id.in_(ids[at : at + _CHUNK]), table.c.uid == ""
        )
        for pod_id, stored in conn.execute(low):
            if int(stored) < int(counts[pod_id]):
                due[int(pod_id)] = int(counts[pod_id])
    for pod_id, count in due.items():
        conn.execute(
            update(table)
            .where(table.c.id == pod_id, table.c.uid == "", table.c.gpu_count < count)
            .values(gpu_count=count)
        )
    return set(due)


def _dcgm_only_ids(conn: Connection, cluster_id: int) -> dict[tuple[str, str], int]:
    table = table_of(Pod)
    stmt = select(table.c.namespace, table.c.name, table.c.id).where(
        table.c.cluster_id == cluster_id, table.c.uid == ""
    )
    return {(str(r[0]), str(r[1])): int(r[2]) for r in conn.execute(stmt)}


def _api_ids(conn: Connection, cluster_id: int) -> dict[tuple[str, str, str], int]:
    table = table_of(Pod)
    stmt = select(table.c.namespace, table.c.name, table.c.uid, table.c.id).where(
        table.c.cluster_id == cluster_id, table.c.uid != ""
    )
    return {(str(r[0]), str(r[1]), str(r[2])): int(r[3]) for r in conn.execute(stmt)}


def _sample_span(conn: Connection, pod_id: int) -> tuple[int | None, int | None]:
    row = conn.execute(
        select(func.min(GpuSample.ts), func.max(GpuSample.ts)).where(GpuSample.pod_id == pod_id)
    ).one()
    return (None, None) if row[0] is None else (int(row[0]), int(row[1]))


def _move(conn: Connection, old_id: int, new_id: int) -> None:
    """Samples and roll-ups of pod ``old_id`` become ``new_id``'s; the old row goes."""
    conn.execute(update(GpuSample).where(GpuSample.pod_id == old_id).values(pod_id=new_id))
    span = conn.execute(
        select(func.min(GpuSampleHourly.hour_ts), func.max(GpuSampleHourly.hour_ts)).where(
            GpuSampleHourly.pod_id == old_id
        )
    ).one()
    if span[0] is not None:  # hours past the raw retention too: their daily sums name old_id
        daily.invalidate_range(conn, int(span[0]), int(span[1]) + HOUR_S)
    conn.execute(
        update(GpuSampleHourly).where(GpuSampleHourly.pod_id == old_id).values(pod_id=new_id)
    )
    conn.execute(delete(table_of(Pod)).where(table_of(Pod).c.id == old_id))


def adopt_dcgm_only(
    conn: Connection, cluster_id: int, api_pods: Iterable[tuple[str, str, str]]
) -> int:
    """Give DCGM-only rows the uid of the API pod of the same namespace and name (merging
    into the API's row where both exist); returns the pods adopted. Call before upserting the
    API's pods, in the same transaction."""
    waiting = _dcgm_only_ids(conn, cluster_id)
    if not waiting:
        return 0
    known = _api_ids(conn, cluster_id)
    table = table_of(Pod)
    spans: list[tuple[int, int]] = []
    adopted = 0
    for namespace, name, uid in api_pods:
        old_id = waiting.pop((namespace, name), None)
        if old_id is None or not uid:
            continue
        first, last = _sample_span(conn, old_id)
        new_id = known.get((namespace, name, uid))
        if new_id is None:
            conn.execute(update(table).where(table.c.id == old_id).values(uid=uid))
        else:
            _move(conn, old_id, new_id)
        if first is not None and last is not None:
            spans.append((first, last + 1))
        adopted += 1
    for start, end in _merged(spans):  # their hours were grouped under the old workloads
        rollup.roll_up(conn, start, end)
    return adopted


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or hour-adjacent spans as one."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= rollup.hour_ceil(out[-1][1]):
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out
