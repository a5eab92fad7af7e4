"""The dashboard's data: a snapshot of hourly roll-ups per data version, and its cache.

A :class:`Snapshot` is built from the store once per data version (the last collection update
and the last sample instant): the samples are read one day at a time, costed with the
analytics (:func:`gpuwatch.analytics.costing.prepare`) and rolled up per hour. Pages aggregate
those small frames, never raw sample tables, and memoize their results inside the snapshot,
so a cached result can never outlive the data it came from. When the store changes, the next
snapshot is built in a background thread while pages keep serving the current one.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar
from urllib.parse import urlencode

import pandas as pd
from sqlalchemy import Engine

from gpuwatch.analytics.costing import prepare, unit_prices
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.app import rollup
from gpuwatch.config import Settings
from gpuwatch.domain.pricing import PriceBook
from gpuwatch.report.inputs import policy_from, price_book_from
from gpuwatch.store import repository

T = TypeVar("T")
DAY_S = 86400
#: Time windows offered by the filter bar, in days (the default first after "24h").
WINDOWS: dict[str, float] = {"24h": 1, "3d": 3, "7d": 7, "14d": 14, "30d": 30}
DEFAULT_WINDOW = "7d"
FILTER_NAMES = ("cluster", "team", "namespace", "model", "window")
MEMO_SIZE = 256


def _first(value: object) -> str | None:
    """One query value: the first of a repeated parameter, ``None`` for empty."""
    if isinstance(value, list | tuple):
        value = value[0] if value else None
    if value is None:
        return None
    text = str(value).strip()
    return text or None


@dataclass(frozen=True)
class Filters:
    """The filter bar's state; ``None`` means all."""

    cluster: str | None = None
    team: str | None = None
    namespace: str | None = None
    model: str | None = None
    window: str = DEFAULT_WINDOW

    @classmethod
    def from_query(cls, query: Mapping[str, object]) -> Filters:
        window = _first(query.get("window")) or DEFAULT_WINDOW
        return cls(
            cluster=_first(query.get("cluster")),
            team=_first(query.get("team")),
            namespace=_first(query.get("namespace")),
            model=_first(query.get("model")),
            window=window if window in WINDOWS else DEFAULT_WINDOW,
        )

    def query(self) -> dict[str, str]:
        """The non-default filters as query parameters."""
        values = {name: getattr(self, name) for name in FILTER_NAMES}
        if values["window"] == DEFAULT_WINDOW:
            values["window"] = None
        return {k: v for k, v in values.items() if v}

    def href(self, path: str, **extra: object) -> str:
        """A link to ``path`` keeping these filters, with ``extra`` parameters added."""
        params = {k: str(v) for k, v in extra.items() if v is not None} | self.query()
        return f"{path}?{urlencode(params)}" if params else path

    def with_(self, **changes: Any) -> Filters:
        return replace(self, **changes)


@dataclass
class Snapshot:
    """The roll-ups of one data version. Frames are shared: never modify them."""

    marker: repository.DataMarker
    end_ts: int
    span_start_ts: int
    step_s: int
    units: pd.DataFrame
    pods: pd.DataFrame
    nodes: pd.DataFrame
    collection: pd.DataFrame
    cost: pd.DataFrame
    gpu: pd.DataFrame
    held: pd.DataFrame
    gaps: pd.DataFrame
    price_book: PriceBook
    policy: AnalyticsPolicy
    built_s: float = 0.0
    _memo: OrderedDict[Hashable, Any] = field(default_factory=OrderedDict, repr=False)
    _pinned: dict[Hashable, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def empty(self) -> bool:
        return self.marker.last_ts is None

    def memo(self, key: Hashable, compute: Callable[[], T], *, pin: bool = False) -> T:
        """``compute()`` once per key for this snapshot.

        The most recent :data:`MEMO_SIZE` results are kept; ``pin`` keeps a result for the
        snapshot's life (the few expensive ones: recommendations per window, weekly reports).
        """
        with self._lock:
            if key in self._pinned:
                pinned: T = self._pinned[key]
                return pinned
            if key in self._memo:
                self._memo.move_to_end(key)
                found: T = self._memo[key]
                return found
        value = compute()
        with self._lock:
            if pin:
                self._pinned[key] = value
                return value
            self._memo[key] = value
            while len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)
        return value

    def forget(self) -> None:
        """Drop every memoized result (benchmarks time cold views with it)."""
        with self._lock:
            self._memo.clear()
            self._pinned.clear()


def _hour_ceil(ts: int) -> int:
    return -(-ts // rollup.HOUR_S) * rollup.HOUR_S


def _labelled_units(engine: Engine, price_book: PriceBook) -> pd.DataFrame:
    units = repository.load_gpus(engine)
    prices = unit_prices(units, price_book) if len(units) else pd.Series(dtype="float64")
    units["usd_per_hour"] = units["gpu_id"].map(prices).astype("float64")
    return units


def _label(frame: pd.DataFrame, units: pd.DataFrame, pods: pd.DataFrame) -> pd.DataFrame:
    """Unit (and pod, where the frame has ``pod_id``) text columns, as categoricals."""
    unit_facts = units.set_index("gpu_id")
    for name in ("cluster", "node", "gpu_model"):
        frame[name] = pd.Categorical(frame["gpu_id"].map(unit_facts[name]).astype(object))
    if "pod_id" in frame.columns:
        pod_facts = pods.set_index("pod_id")
        for name in ("namespace", "team", "workload_kind", "workload", "pod"):
            frame[name] = pd.Categorical(frame["pod_id"].map(pod_facts[name]).astype(object))
    return frame


def _empty_snapshot(
    marker: repository.DataMarker, engine: Engine, price_book: PriceBook, policy: AnalyticsPolicy
) -> Snapshot:
    def frame(columns: tuple[str, ...]) -> pd.DataFrame:
        return pd.DataFrame({name: pd.Series(dtype="float64") for name in columns})

    return Snapshot(
        marker=marker,
        end_ts=0,
        span_start_ts=0,
        step_s=0,
        units=repository.load_gpus(engine).assign(usd_per_hour=0.0),
        pods=repository.load_pods(engine),
        nodes=repository.load_nodes(engine),
        collection=repository.load_collection_state(engine),
        cost=frame(("bucket_ts", "gpu_id", "pod_id", *rollup.COST_SUMS)),
        gpu=frame(("bucket_ts", "gpu_id", "samples")),
        held=rollup.concat_held([]),
        gaps=frame(("gpu_id", "gap_start_ts", "gap_end_ts")),
        price_book=price_book,
        policy=policy,
    )


def build_snapshot(
    engine: Engine, price_book: PriceBook, policy: AnalyticsPolicy, span_days: int
) -> Snapshot:
    """Read, cost and roll up the last ``span_days`` days of samples, one day at a time."""
    began = time.monotonic()
    marker = repository.data_marker(engine)
    if marker.last_ts is None or marker.first_ts is None:
        return _empty_snapshot(marker, engine, price_book, policy)
    end_ts = _hour_ceil(marker.last_ts + 1)
    start_ts = max(marker.first_ts // rollup.HOUR_S * rollup.HOUR_S, end_ts - span_days * DAY_S)
    pods = repository.load_pods(engine)
    cost, gpu, held, gaps, steps = [], [], [], [], [0]
    previous: dict[int, int] = {}
    for chunk_start in range(start_ts, end_ts, DAY_S):
        samples = repository.load_samples(engine, chunk_start, min(chunk_start + DAY_S, end_ts))
        if samples.empty:
            continue
        costed = prepare(samples, pods, price_book)
        cost.append(rollup.cost_hourly(costed, policy.idle_threshold_ratio))
        gpu.append(rollup.gpu_hourly(costed))
        held.append(rollup.held_rows(costed))
        gaps.append(rollup.sample_gaps(costed, previous))
        steps.append(int(costed["step_s"].max()))
    units = _labelled_units(engine, price_book)
    return Snapshot(
        marker=marker,
        end_ts=end_ts,
        span_start_ts=start_ts,
        step_s=max(steps),
        units=units,
        pods=pods,
        nodes=repository.load_nodes(engine),
        collection=repository.load_collection_state(engine),
        cost=_label(pd.concat(cost, ignore_index=True), units, pods),
        gpu=_label(pd.concat(gpu, ignore_index=True), units, pods),
        held=rollup.concat_held(held),
        gaps=pd.concat(gaps, ignore_index=True),
        price_book=price_book,
        policy=policy,
        built_s=time.monotonic() - began,
    )


class DashboardData:
    """The current snapshot of one store, rebuilt when the store's data changes.

    The store is checked at most every ``refresh_s`` seconds. With ``background`` a changed
    store is rebuilt in a thread while the previous snapshot keeps serving; without it the
    caller waits for the new snapshot (tests).
    """

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        *,
        span_days: int = 31,
        refresh_s: float = 60.0,
        background: bool = True,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.price_book = price_book_from(settings)
        self.policy = policy_from(settings)
        self.span_days = span_days
        self.refresh_s = refresh_s
        self.background = background
        self._snapshot: Snapshot | None = None
        self._checked = 0.0
        self._build_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._building = False
        self.warmers: list[Callable[[Snapshot], object]] = []

    def _build(self) -> Snapshot:
        snapshot = build_snapshot(self.engine, self.price_book, self.policy, self.span_days)
        self._snapshot = snapshot
        self._checked = time.monotonic()
        return snapshot

    def _rebuild_in_background(self) -> None:
        def run() -> None:
            try:
                with self._build_lock:
                    self.warm(self._build())
            finally:
                with self._state_lock:
                    self._building = False

        with self._state_lock:
            if self._building:
                return
            self._building = True
        threading.Thread(target=run, name="gpuwatch-snapshot", daemon=True).start()

    def warm(self, snapshot: Snapshot) -> None:
        """Compute what the first pages will ask for (the default views) ahead of time."""
        for warmer in self.warmers:
            warmer(snapshot)

    def start(self) -> None:
        """Build the first snapshot in the background (the server answers meanwhile)."""
        if self._snapshot is None:
            self._rebuild_in_background()

    def current(self) -> Snapshot:
        """The snapshot to serve: built now if there is none, refreshed when the data changed."""
        snapshot = self._snapshot
        if snapshot is None:
            with self._build_lock:
                snapshot = self._snapshot or self._build()
            return snapshot
        if time.monotonic() - self._checked < self.refresh_s:
            return snapshot
        self._checked = time.monotonic()
        if repository.data_marker(self.engine) == snapshot.marker:
            return snapshot
        if self.background:
            self._rebuild_in_background()
            return snapshot
        with self._build_lock:
            return self._build()
