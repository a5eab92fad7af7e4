"""The snapshot of one data version: the fleet's inventory and a bounded cache of answers.

:func:`build_snapshot` reads what identifies the data (:func:`gpuwatch.store.repository.
data_marker`), the GPU units with their prices, the pods, nodes and collection state: no
samples. Pages ask the store for each window's figures (:mod:`gpuwatch.app.window_costs` for
sums per UTC day, :mod:`gpuwatch.app.window_hourly` for hourly rows) and keep the answers in
the snapshot's memo, so a cached answer never outlives the data version it was read at.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from gpuwatch.analytics.costing import unit_prices, unit_shares
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.app.shared import SharedVersion
from gpuwatch.domain.durations import DAY_S, HOUR_S
from gpuwatch.domain.pricing import PriceBook
from gpuwatch.store import repository
from gpuwatch.store.repository_span import recent_step_s

T = TypeVar("T")
MEMO_SIZE = 256
#: Bytes of memoized frames kept per snapshot (pinned results aside).
MEMO_BYTES = 256 * 2**20
#: The same for a worker that shares its answers with the server's other workers: it reads an
#: answer it evicted again from the shared folder (0.02-0.1 s for a week of hourly rows at
#: 2,000 GPUs) instead of computing it, so it keeps less.
SHARED_MEMO_BYTES = 64 * 2**20


def _size(value: object) -> int:
    """Approximate bytes a memoized result holds (frames and arrays; other values are small)."""
    if isinstance(value, pd.DataFrame):
        return int(value.memory_usage(index=True).sum())
    if isinstance(value, pd.Series | np.ndarray):
        return int(value.nbytes)
    if is_dataclass(value) and not isinstance(value, type):
        return sum(_size(getattr(value, f.name)) for f in fields(value))
    if isinstance(value, list | tuple):
        return sum(_size(v) for v in value) + 64
    return 64


@dataclass
class Snapshot:
    """The fleet's inventory at one data version, and the answers read for it.

    ``end_ts`` is the hour after the last sample (where every window ends); ``first_ts`` the
    first instant with data in the store, roll-ups included (older than
    ``marker.first_ts`` once raw samples have been compacted); ``step_s`` the sampling step of
    the latest hours. No samples are kept here: pages read them per window and memoize them
    (:meth:`memo`).
    """

    marker: repository.DataMarker
    end_ts: int
    first_ts: int | None
    step_s: int
    units: pd.DataFrame
    pods: pd.DataFrame
    nodes: pd.DataFrame
    collection: pd.DataFrame
    price_book: PriceBook
    policy: AnalyticsPolicy
    rollup_idle_util_pct: float | None = None
    #: The devices ResourceClaims held at the last Kubernetes snapshot (``dra_devices``).
    dra: pd.DataFrame = field(default_factory=pd.DataFrame)
    built_s: float = 0.0
    #: The store the snapshot was read from: every window's figures are read from it.
    engine: Engine | None = None
    _memo: OrderedDict[Hashable, tuple[Any, int]] = field(default_factory=OrderedDict, repr=False)
    _memo_bytes: int = field(default=0, repr=False)
    _pinned: dict[Hashable, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    #: The pinned results pages asked for (not the warm-up), with when they last did, carried
    #: over from the previous data version's snapshot (:meth:`asked_since`).
    asked: dict[Hashable, float] = field(default_factory=dict, repr=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    #: No snapshot served before this one in the process: its warm-up computes every default
    #: view, where later ones compute those of the pages asked for lately.
    first: bool = field(default=True, repr=False)
    #: The answers this data version shares with the server's other workers, if it has any.
    shared: SharedVersion | None = field(default=None, repr=False)

    @property
    def empty(self) -> bool:
        return self.marker.last_ts is None

    @property
    def span_start_ts(self) -> int:
        """The first hour with data (``end_ts`` without any)."""
        first = self.first_ts
        return self.end_ts if first is None else first - first % HOUR_S

    @property
    def raw_from_ts(self) -> int:
        """Raw samples are kept from this hour on; earlier hours have roll-ups only."""
        first = self.marker.raw_first_ts
        return self.end_ts if first is None else first - first % HOUR_S

    @property
    def memo_bytes(self) -> int:
        """Bytes of memoized frames kept: :data:`SHARED_MEMO_BYTES` when the answers are shared
        (an evicted one is read back), else :data:`MEMO_BYTES`."""
        return MEMO_BYTES if self.shared is None else SHARED_MEMO_BYTES

    def memo(
        self, key: Hashable, compute: Callable[[], T], *, pin: bool = False, share: bool = False
    ) -> T:
        """``compute()`` once per key for this snapshot.

        The most recent :data:`MEMO_SIZE` results, at most :attr:`memo_bytes` of frames, are
        kept; ``pin`` keeps a result for the snapshot's life (the few expensive ones:
        recommendations per window, weekly reports). With ``share`` (the expensive answers,
        ``key`` naming its question in its ``repr``), a result another worker of the server
        computed for this data version is read instead (:mod:`gpuwatch.app.shared`).
        """
        with self._lock:
            if pin and not getattr(_WARMING, "active", False):
                self.asked[key] = self.clock()
            if key in self._pinned:
                pinned: T = self._pinned[key]
                return pinned
            if key in self._memo:
                self._memo.move_to_end(key)
                found: T = self._memo[key][0]
                return found
        shared = self.shared if share else None
        value = compute() if shared is None else shared.get(key, compute)
        if shared is not None and pin:
            release_memory()  # what computing an expensive answer held
        bound = self.memo_bytes
        with self._lock:
            if pin:
                self._pinned[key] = value
                return value
            size = _size(value)
            old = self._memo.pop(key, None)
            self._memo_bytes += size - (old[1] if old else 0)
            self._memo[key] = (value, size)
            while len(self._memo) > 1 and (len(self._memo) > MEMO_SIZE or self._memo_bytes > bound):
                _, (_, dropped) = self._memo.popitem(last=False)
                self._memo_bytes -= dropped
        return value

    def asked_of(self, kind: str) -> list[Hashable]:
        """What pages asked for lately of one kind of pinned result: the ``x`` of each asked
        key ``(kind, x)`` (a window's recommendations, a week's report)."""
        with self._lock:
            keys = list(self.asked)
        return [
            key[1] for key in keys if isinstance(key, tuple) and len(key) == 2 and key[0] == kind
        ]

    def asked_since(self, since: float) -> dict[Hashable, float]:
        """The pinned results pages asked for at ``since`` or later (clock of :attr:`clock`)."""
        with self._lock:
            return {key: at for key, at in self.asked.items() if at >= since}

    def forget(self) -> None:
        """Drop every memoized result (benchmarks time cold views with it)."""
        with self._lock:
            self._memo.clear()
            self._memo_bytes = 0
            self._pinned.clear()


_WARMING = threading.local()


@contextmanager
def warming() -> Iterator[None]:
    """Results computed in this thread meanwhile are the warm-up's, not a page's ask."""
    _WARMING.active = True
    try:
        yield
    finally:
        _WARMING.active = False


def _hour_ceil(ts: int) -> int:
    return -(-ts // HOUR_S) * HOUR_S


def _labelled_units(engine: Engine, price_book: PriceBook) -> pd.DataFrame:
    units = repository.load_gpus(engine)
    prices = unit_prices(units, price_book) if len(units) else pd.Series(dtype="float64")
    shares = unit_shares(units) if len(units) else pd.Series(dtype="float64")
    units["usd_per_hour"] = units["gpu_id"].map(prices).astype("float64")
    units["gpu_share"] = units["gpu_id"].map(shares).astype("float64")
    return units


def _empty_snapshot(
    marker: repository.DataMarker, engine: Engine, price_book: PriceBook, policy: AnalyticsPolicy
) -> Snapshot:
    return Snapshot(
        marker=marker,
        end_ts=0,
        first_ts=None,
        step_s=0,
        units=repository.load_gpus(engine).assign(usd_per_hour=0.0, gpu_share=1.0),
        pods=repository.load_pods(engine),
        nodes=repository.load_nodes(engine),
        collection=repository.load_collection_state(engine),
        price_book=price_book,
        policy=policy,
    )


def release_memory() -> None:
    """Hand freed heap back to the system (glibc keeps it after big frames are dropped)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return


def build_snapshot(engine: Engine, price_book: PriceBook, policy: AnalyticsPolicy) -> Snapshot:
    """Read the fleet's inventory at the store's current data version."""
    began = time.monotonic()
    marker = repository.data_marker(engine)
    if marker.last_ts is None or marker.first_ts is None:
        return _empty_snapshot(marker, engine, price_book, policy)
    end_ts = _hour_ceil(marker.last_ts + 1)
    return Snapshot(
        marker=marker,
        end_ts=end_ts,
        first_ts=marker.first_ts,
        step_s=recent_step_s(engine, end_ts - DAY_S),
        units=_labelled_units(engine, price_book),
        pods=repository.load_pods(engine),
        nodes=repository.load_nodes(engine),
        collection=repository.load_collection_state(engine),
        price_book=price_book,
        policy=policy,
        rollup_idle_util_pct=repository.rollup_idle_util_pct(engine),
        dra=repository.load_dra_devices(engine),
        built_s=time.monotonic() - began,
        engine=engine,
    )
