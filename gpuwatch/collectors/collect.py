"""One collection: Kubernetes snapshot, then DCGM samples page by page, each page one transaction.

The watermark (``collection_state``) moves in the same transaction that writes a page, to the
page's end or, where the samples stop before it, to the end of the last sample stored (never past
it, nor past now), so an interrupted run loses nothing and the next run resumes at the first
instant not yet stored. Every write is an upsert, so collecting a window again changes nothing.

A stop request (:class:`~gpuwatch.collectors.stop.Stop`) ends the collection between pages, or
while a page is being fetched (that page is dropped): what was written stays.

While a page is written, the next one is fetched and parsed in a background thread (one page
ahead, no more): Prometheus answers, and the answer is decoded, while the store writes. A failed
fetch surfaces when its page's turn comes, after the pages before it were written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from sqlalchemy import Connection, Engine

from gpuwatch.collectors import claims, rows
from gpuwatch.collectors.answers import PartialAnswer, PartialPage
from gpuwatch.collectors.dcgm import page_samples
from gpuwatch.collectors.growth import NewUnitLimit, check_new_units
from gpuwatch.collectors.kube_parse import KubeSnapshot
from gpuwatch.collectors.page import PageSamples
from gpuwatch.collectors.promql import Catalogue
from gpuwatch.collectors.screen import SeriesIssues
from gpuwatch.collectors.slots import fill_free_slots
from gpuwatch.collectors.stop import NEVER, Interrupted, Stop, Worker
from gpuwatch.domain.durations import HOUR_S
from gpuwatch.domain.labels import LabelVariants
from gpuwatch.store import daily, partitions, rollup, rollup_append, writer
from gpuwatch.store import pods as store_pods
from gpuwatch.store import repository_scheduling as sched_store
from gpuwatch.store.models import DraDevice

SOURCE_PROMETHEUS = "prometheus"
SOURCE_KUBERNETES = "kubernetes"

Progress = Callable[[int, int, int], None]


class SampleSource(Protocol):
    """Per field, a :class:`~gpuwatch.collectors.promjson.Matrix` or decoded JSON series; the
    capacity fields on the grid of :meth:`~gpuwatch.collectors.promql.Catalogue.capacity_step_s`
    (as :class:`~gpuwatch.collectors.prometheus.PrometheusSource` fetches them)."""

    def fetch_page(self, start_ts: int, end_ts: int, step_s: int) -> Mapping[str, Any]: ...


class SnapshotSource(Protocol):
    def snapshot(self, now_ts: int) -> KubeSnapshot: ...


@dataclass(frozen=True)
class Window:
    start_ts: int
    end_ts: int
    step_s: int
    page_s: int

    def pages(self) -> list[tuple[int, int]]:
        page = max(self.step_s, self.page_s - self.page_s % self.step_s)
        return [(s, min(s + page, self.end_ts)) for s in range(self.start_ts, self.end_ts, page)]


@dataclass(frozen=True)
class CollectStats:
    """What one collection wrote: samples, and the distinct GPU units and pods (holding a GPU
    in some sample) over the whole window; and the series it skipped or changed (``issues``)."""

    start_ts: int
    end_ts: int
    pages: int
    samples: int
    gpu_units: int
    pods: int
    issues: SeriesIssues = field(default_factory=SeriesIssues)
    #: Whether GPUs held through ResourceClaims were attributed, and if not why (None: the
    #: Kubernetes API was not read).
    dra: str | None = None
    #: Whether Kueue's and Volcano's queues were read, and if not why (None: not read).
    queues: str | None = None
    #: The page whose answer stayed partial: neither it nor those after it were written.
    partial: PartialPage | None = None


def plan_window(
    *,
    start_ts: int | None,
    end_ts: int | None,
    watermark_ts: int | None,
    lookback_s: int,
    now_ts: int,
    step_s: int,
    page_s: int,
) -> Window:
    """The window to collect: explicit bounds, else resume from the watermark, else lookback.

    Both ends are floored to the ``step`` grid; the end is exclusive.
    """
    end = now_ts if end_ts is None else end_ts
    if start_ts is not None:
        start = start_ts
    elif watermark_ts is not None:
        start = watermark_ts
    else:
        start = end - lookback_s
    start, end = start - start % step_s, end - end % step_s
    return Window(start_ts=start, end_ts=max(start, end), step_s=step_s, page_s=page_s)


def _write_snapshot(conn: Connection, cluster_id: int, snap: KubeSnapshot) -> None:
    node_ids = writer.write_nodes(conn, cluster_id, rows.node_rows(snap))
    writer.write_namespaces(conn, cluster_id, rows.namespace_rows(snap))
    pods = rows.pod_rows(snap, node_ids)
    known = [(str(p["namespace"]), str(p["name"]), str(p.get("uid") or "")) for p in pods]
    store_pods.adopt_dcgm_only(conn, cluster_id, known)
    writer.write_pods(conn, cluster_id, pods)
    writer.upsert(
        conn,
        DraDevice,
        [{**row, "cluster_id": cluster_id} for row in claims.dra_device_rows(snap)],
        ("cluster_id", "claim_uid", "driver", "pool", "device"),
    )
    sched_store.write_queue_flavors(conn, cluster_id, rows.queue_flavor_rows(snap))
    sched_store.write_sched_workloads(conn, cluster_id, rows.sched_workload_rows(snap))


def units_at_once(samples: writer.SampleColumns) -> dict[int, int]:
    """Per pod id: the most distinct GPU units its samples name at one sample time."""
    held = ~np.isnan(samples.pod_id)
    if not held.any():
        return {}
    pod = samples.pod_id[held].astype(np.int64)
    since = samples.ts[held].astype(np.int64)
    since -= since.min()
    span = int(since.max()) + 1
    # One integer per (pod, instant), sorted by pod then instant: a 1-D sort, not a 2-D one.
    pairs, counts = np.unique(pod * span + since, return_counts=True)
    pods = pairs // span
    starts = np.flatnonzero(np.append(True, pods[1:] != pods[:-1]))
    most = np.maximum.reduceat(counts, starts)
    return dict(zip(pods[starts].tolist(), most.tolist(), strict=True))


@dataclass(frozen=True)
class _Guard:
    limit: NewUnitLimit
    cluster: str


def _write_page(
    conn: Connection,
    cluster_id: int,
    frame: PageSamples,
    snap: KubeSnapshot | None,
    step_s: int,
    guard: _Guard | None = None,
) -> tuple[int, set[int], set[int], int]:
    """Write one page's samples (and the GPU units, nodes and pods they name); returns the
    samples written, the store ids of the GPU units and pods the page names, and the end of the
    last sample's step (0 when nothing was written)."""
    if frame.empty:
        return 0, set(), set(), 0
    frame = rows.resolve_nodes(frame, snap)
    frame = fill_free_slots(frame, rows.slot_replicas(conn, cluster_id))
    pairs = frame.pairs()
    claimed = claims.attribute_claims(frame, pairs, snap)
    if claimed is not frame:  # series joined to claims' pods: their pairs name the pods
        frame, pairs = claimed, claimed.pairs()
    node_ids = writer.write_nodes(conn, cluster_id, rows.dcgm_node_rows(conn, cluster_id, pairs))
    facts = rows.node_facts(conn, cluster_id)
    units = rows.gpu_rows(frame, pairs, node_ids, facts)
    if guard is not None:
        known = writer.gpu_keys(conn, cluster_id)
        page_keys = {tuple(unit[name] for name in writer.GPU_KEY) for unit in units}
        check_new_units(known, page_keys, guard.limit, guard.cluster, int(frame.ts.min()))
    gpu_ids = writer.write_gpus(conn, cluster_id, units)
    # Samples without a framebuffer reading of their own get the nominal size, never a total
    # another sample of the page read: what is stored must not depend on the page.
    nominal = rows.nominal_memory(units, facts)
    memory = {gpu_ids[key]: value for key, value in nominal.items()}
    pod_map = rows.pod_ids(conn, cluster_id, frame, pairs, snap)
    empty = rows.empty_mig_gpus(units, facts)
    idle = frozenset(gpu_ids[tuple(units[n][k] for k in writer.GPU_KEY)] for n in empty)
    columns = rows.sample_columns(frame, gpu_ids, pod_map, step_s, memory, idle)
    samples = writer.unique_samples(columns)
    # Before anything reads gpu_samples in this transaction (PostgreSQL: day partitions).
    partitions.ensure_partitions(conn, int(samples.ts.min()), int(samples.ts.max()))
    # Hours first written by this page are rolled up from the page itself, in memory (while
    # its samples are written); hours it only appends to merge the page's rows into the
    # stored ones.
    first_ts, last_ts = int(samples.ts.min()), int(samples.ts.max())
    fresh = rollup.unstored_hours(conn, first_ts, last_ts)
    appended = rollup_append.appended_hours(conn, cluster_id, first_ts, last_ts, fresh)
    # Before the write: the fresh hours' roll-up reads the pods' GPU counts while it runs.
    raised = store_pods.raise_gpu_counts(conn, units_at_once(samples))
    written = rollup.write_and_roll_up(conn, samples, fresh, appended, raised)
    held = np.unique(samples.pod_id[~np.isnan(samples.pod_id)]).astype(np.int64).tolist()
    stored_end = int(samples.ts.max()) + step_s if written else 0
    return written, set(gpu_ids.values()), set(held), stored_end


class _Pages:
    """Fetches and parses pages in a background thread, one page ahead of the writes."""

    def __init__(
        self, source: SampleSource, window: Window, variants: LabelVariants, stop: Stop
    ) -> None:
        self.source, self.window, self.variants = source, window, variants
        self.pages = window.pages()
        self.stop = stop
        self._pool = Worker("gpuwatch-fetch")
        self._next: Future[PageSamples] | None = None

    def _load(self, index: int) -> PageSamples:
        start, end = self.pages[index]
        results = self.source.fetch_page(start, end, self.window.step_s)
        step_s = self.window.step_s
        coarse_s = Catalogue.capacity_step_s(step_s)
        page = page_samples(results, self.variants, step_s, coarse_s, keep_device_slots=True)
        return page.between(start, end)

    def _submit(self, index: int) -> None:
        if index < len(self.pages):
            self._next = self._pool.submit(lambda: self._load(index))

    def get(self, index: int) -> PageSamples:
        """Page ``index`` (pages are asked for in order); starts fetching the next one."""
        if self._next is None:
            self._submit(index)
        assert self._next is not None
        current, self._next = self._next, None
        try:
            page = self.stop.wait_for(current)
        finally:
            self._submit(index + 1)
        return page

    def close(self) -> None:
        """Drop a page fetched ahead (a fetch under way ends on its own)."""
        if self._next is not None:
            self._next.cancel()
        self._pool.close()


def collect(
    engine: Engine,
    cluster: str,
    window: Window,
    prometheus: SampleSource,
    kube: SnapshotSource | None,
    variants: LabelVariants,
    now_ts: int,
    progress: Progress | None = None,
    stop: Stop = NEVER,
    new_units: NewUnitLimit | None = None,
) -> CollectStats:
    """Collect ``window``; returns what was written. Raises the sources' errors untouched, and
    :class:`~gpuwatch.collectors.stop.Interrupted` when stopped before anything was written
    (while the Kubernetes API was read); stopped later, returns what was written until then.
    With ``new_units``, a page naming too many unseen GPU units raises
    :class:`~gpuwatch.collectors.growth.UnitGrowthError`, nothing of it written."""
    snap = kube.snapshot(now_ts) if kube is not None else None
    with engine.begin() as conn:
        cluster_id = writer.ensure_cluster(conn, cluster)
        if snap is not None:
            _write_snapshot(conn, cluster_id, snap)
            writer.advance_watermark(
                conn, cluster_id, SOURCE_KUBERNETES, snap.taken_ts, now_ts,
                {"dra": snap.dra.summary(), "queues": snap.sched.summary()},
            )  # fmt: skip
    guard = _Guard(new_units, cluster) if new_units is not None else None
    fetcher = _Pages(prometheus, window, variants, stop)
    pages = fetcher.pages
    total = done = 0
    units, pods = set[int](), set[int]()
    issues = SeriesIssues()
    stored_end: int | None = None
    partial: PartialPage | None = None
    last_partial = _last_partial(engine, cluster_id)
    try:
        for index, (page_start, page_end) in enumerate(pages):
            if stop.is_set():
                break
            try:
                frame = fetcher.get(index)
            except Interrupted:
                break
            except PartialAnswer as answer:
                partial = _keep_partial(engine, cluster_id, page_start, answer, now_ts)
                break
            issues = issues.merge(frame.issues)
            with engine.begin() as conn:
                written, page_units, page_pods, page_stored_end = _write_page(
                    conn, cluster_id, frame, snap, window.step_s, guard
                )
                if page_stored_end:
                    stored_end = max(stored_end or 0, page_stored_end)
                if stored_end is not None:
                    detail: dict[str, Any] = {"samples": written, "page_start_ts": page_start}
                    detail["series_skipped"] = issues.counts()
                    detail |= {"partial": last_partial} if last_partial else {}
                    mark = min(page_end, stored_end)
                    writer.advance_watermark(
                        conn, cluster_id, SOURCE_PROMETHEUS, mark, now_ts, detail
                    )
            total += written
            units |= page_units
            pods |= page_pods
            done = index + 1
            if progress is not None:
                progress(index + 1, len(pages), total)
    finally:
        fetcher.close()
    end = _finished(engine, pages[done - 1][1] if done else window.start_ts, total)
    dra = snap.dra.summary() if snap is not None else None
    queues = snap.sched.summary() if snap is not None else None
    return CollectStats(
        window.start_ts, end, done, total, len(units), len(pods), issues, dra, queues, partial
    )


def _finished(engine: Engine, end_ts: int, written: int) -> int:
    """After writing up to ``end_ts``: the days finished by then get their daily sums (the
    dashboard reads them, and never writes); returns ``end_ts``."""
    if written:
        daily.build_pending(engine, end_ts - end_ts % HOUR_S)
    return end_ts


def _last_partial(engine: Engine, cluster_id: int) -> dict[str, Any] | None:
    """The last partial answer recorded (kept in the detail until another one replaces it)."""
    with engine.connect() as conn:
        partial = writer.read_state_detail(conn, cluster_id, SOURCE_PROMETHEUS).get("partial")
    return partial if isinstance(partial, dict) else None


def _keep_partial(
    engine: Engine, cluster_id: int, page_start: int, answer: PartialAnswer, now_ts: int
) -> PartialPage:
    """Record a page's partial answer in the Prometheus source's detail, the watermark where it
    is (at the page's start where there is none yet: nothing before it is left to collect)."""
    partial = PartialPage(page_start, answer.warnings, now_ts, answer.server, answer.attempts)
    with engine.begin() as conn:
        detail = {
            **writer.read_state_detail(conn, cluster_id, SOURCE_PROMETHEUS),
            "partial": partial.detail(),
        }
        mark = writer.read_watermark(conn, cluster_id, SOURCE_PROMETHEUS)
        mark = partial.page_start_ts if mark is None else mark
        writer.advance_watermark(conn, cluster_id, SOURCE_PROMETHEUS, mark, now_ts, detail)
    return partial
