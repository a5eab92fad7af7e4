"""The snapshot of one data version: the store's hourly roll-ups of the last 31 days, costed.

:func:`build_snapshot` reads the hourly roll-ups (:func:`gpuwatch.store.repository.
load_hourly_samples`) a week at a time and costs them with the analytics
(:func:`gpuwatch.analytics.costing.prepare`, :mod:`gpuwatch.app.rollup`). Sums per window come
from the store (:mod:`gpuwatch.app.window_costs`), not from here.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from gpuwatch.analytics.costing import prepare, unit_prices, unit_shares
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.app import rollup
from gpuwatch.domain.durations import DAY_S, HOUR_S, WEEK_S
from gpuwatch.domain.pricing import PriceBook
from gpuwatch.store import repository

T = TypeVar("T")
#: Time windows offered by the filter bar, in days (the default first after "24h").
WINDOWS: dict[str, float] = {"24h": 1, "3d": 3, "7d": 7, "14d": 14, "30d": 30}
MEMO_SIZE = 256
#: Bytes of memoized frames kept per snapshot (pinned results aside).
MEMO_BYTES = 256 * 2**20
#: Days of roll-ups read and costed at once.
CHUNK_DAYS = 7
#: How far back :func:`_first_data_ts` looks for roll-ups older than the span, in weeks.
MAX_PROBE_WEEKS = 60


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
    """The roll-ups of one data version. Frames are shared: never modify them.

    ``hourly``: every costed hourly row of the span (one per hour, GPU unit and pod), sorted
    by ``ts``, as :func:`~gpuwatch.app.rollup.stored` keeps them (read them with
    :meth:`hourly_between`); ``gaps``: the hours in which a unit has fewer samples than its
    step implies. Sums per day are not kept here: the store sums cost and GPU rows per window
    (:mod:`gpuwatch.app.window_costs`).
    ``first_ts`` is the first instant with data in the store, roll-ups included (older than
    ``marker.first_ts`` once raw samples have been compacted).
    """

    marker: repository.DataMarker
    end_ts: int
    span_start_ts: int
    first_ts: int | None
    step_s: int
    units: pd.DataFrame
    pods: pd.DataFrame
    nodes: pd.DataFrame
    collection: pd.DataFrame
    hourly: pd.DataFrame
    gaps: pd.DataFrame
    price_book: PriceBook
    policy: AnalyticsPolicy
    rollup_idle_util_pct: float | None = None
    #: The devices ResourceClaims held at the last Kubernetes snapshot (``dra_devices``).
    dra: pd.DataFrame = field(default_factory=pd.DataFrame)
    built_s: float = 0.0
    #: The store the snapshot was read from: recommendations read its stored detail
    #: (:mod:`gpuwatch.store.repository_detail`) for the window they cover.
    engine: Engine | None = None
    _memo: OrderedDict[Hashable, tuple[Any, int]] = field(default_factory=OrderedDict, repr=False)
    _memo_bytes: int = field(default=0, repr=False)
    _pinned: dict[Hashable, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def empty(self) -> bool:
        return self.marker.last_ts is None

    @property
    def raw_from_ts(self) -> int:
        """Raw samples are kept from this hour on; earlier hours have roll-ups only."""
        first = self.marker.raw_first_ts
        return self.end_ts if first is None else first - first % HOUR_S

    def hourly_between(self, start_ts: int, end_ts: int) -> pd.DataFrame:
        """The hourly rows of ``[start_ts, end_ts)`` with data hours and unit prices."""
        ts = self.hourly["ts"].to_numpy()
        first, last = np.searchsorted(ts, [start_ts, end_ts], side="left")
        rows = self.hourly.iloc[int(first) : int(last)]
        return rollup.with_costs(rows, self._by_unit("usd_per_hour"), self._by_unit("gpu_share"))

    def _by_unit(self, column: str) -> np.ndarray:
        """A column of ``units`` as an array indexed by ``gpu_id``."""
        ids = self.units["gpu_id"].to_numpy(dtype="int64")
        top = int(max(ids.max(initial=0), self.hourly["gpu_id"].max() if len(self.hourly) else 0))
        values = np.full(top + 1, np.nan)
        values[ids] = self.units[column].to_numpy(dtype="float64")
        return values

    def memo(self, key: Hashable, compute: Callable[[], T], *, pin: bool = False) -> T:
        """``compute()`` once per key for this snapshot.

        The most recent :data:`MEMO_SIZE` results, at most :data:`MEMO_BYTES` of frames, are
        kept; ``pin`` keeps a result for the snapshot's life (the few expensive ones:
        recommendations per window, weekly reports).
        """
        with self._lock:
            if key in self._pinned:
                pinned: T = self._pinned[key]
                return pinned
            if key in self._memo:
                self._memo.move_to_end(key)
                found: T = self._memo[key][0]
                return found
        value = compute()
        with self._lock:
            if pin:
                self._pinned[key] = value
                return value
            size = _size(value)
            old = self._memo.pop(key, None)
            self._memo_bytes += size - (old[1] if old else 0)
            self._memo[key] = (value, size)
            while len(self._memo) > 1 and (
                len(self._memo) > MEMO_SIZE or self._memo_bytes > MEMO_BYTES
            ):
                _, (_, dropped) = self._memo.popitem(last=False)
                self._memo_bytes -= dropped
        return value

    def forget(self) -> None:
        """Drop every memoized result (benchmarks time cold views with it)."""
        with self._lock:
            self._memo.clear()
            self._memo_bytes = 0
            self._pinned.clear()


def _hour_ceil(ts: int) -> int:
    return -(-ts // HOUR_S) * HOUR_S


def _labelled_units(engine: Engine, price_book: PriceBook) -> pd.DataFrame:
    units = repository.load_gpus(engine)
    prices = unit_prices(units, price_book) if len(units) else pd.Series(dtype="float64")
    shares = unit_shares(units) if len(units) else pd.Series(dtype="float64")
    units["usd_per_hour"] = units["gpu_id"].map(prices).astype("float64")
    units["gpu_share"] = units["gpu_id"].map(shares).astype("float64")
    return units


def _frame(columns: tuple[str, ...]) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype="float64") for name in columns})


def _empty_snapshot(
    marker: repository.DataMarker, engine: Engine, price_book: PriceBook, policy: AnalyticsPolicy
) -> Snapshot:
    return Snapshot(
        marker=marker,
        end_ts=0,
        span_start_ts=0,
        first_ts=None,
        step_s=0,
        units=repository.load_gpus(engine).assign(usd_per_hour=0.0, gpu_share=1.0),
        pods=repository.load_pods(engine),
        nodes=repository.load_nodes(engine),
        collection=repository.load_collection_state(engine),
        hourly=rollup.empty_hourly(),
        gaps=_frame(("gpu_id", "hour_ts", "missing_s")),
        price_book=price_book,
        policy=policy,
    )


def read_hourly(
    engine: Engine,
    pods: pd.DataFrame,
    price_book: PriceBook,
    *,
    start_ts: int,
    end_ts: int,
) -> pd.DataFrame:
    """The costed hourly rows of ``[start_ts, end_ts)``, as :func:`~gpuwatch.app.rollup.stored`
    keeps them.

    Read and costed in chunks of :data:`CHUNK_DAYS` days counted back from ``end_ts``: the
    default window is one chunk (node-level attribution is decided over it, as ``gpuwatch
    recommend`` decides it over its window).
    """
    hourly = []
    chunk_s = CHUNK_DAYS * DAY_S
    for chunk_end in range(end_ts, start_ts, -chunk_s):
        samples = repository.load_hourly_samples(
            engine, max(start_ts, chunk_end - chunk_s), chunk_end
        )
        if len(samples):
            rows = rollup.compact(prepare(samples, pods, price_book))
            del samples
            hourly.append(rollup.stored(rows))
        release_memory()
    return rollup.concat_parts(hourly[::-1], rollup.empty_hourly())


def release_memory() -> None:
    """Hand freed heap back to the system (glibc keeps it after big frames are dropped)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return


def _first_data_ts(engine: Engine, marker: repository.DataMarker, span_start_ts: int) -> int:
    """The first hour with data, roll-ups kept past the raw retention included."""
    known = min(span_start_ts, marker.first_ts or span_start_ts)
    high = known - known % HOUR_S
    low = high
    for _ in range(MAX_PROBE_WEEKS):
        if not repository.has_hourly(engine, low - WEEK_S, low):
            break
        low -= WEEK_S
    if low == high:
        return known
    while high - low > HOUR_S:  # data in [low, high), none just before low
        mid = low + (high - low) // (2 * HOUR_S) * HOUR_S
        if repository.has_hourly(engine, low, mid):
            high = mid
        else:
            low = mid
    return low


def build_snapshot(
    engine: Engine, price_book: PriceBook, policy: AnalyticsPolicy, span_days: int
) -> Snapshot:
    """Read and cost the hourly roll-ups of the last ``span_days`` days, and sum them."""
    began = time.monotonic()
    marker = repository.data_marker(engine)
    if marker.last_ts is None or marker.first_ts is None:
        return _empty_snapshot(marker, engine, price_book, policy)
    end_ts = _hour_ceil(marker.last_ts + 1)
    pods = repository.load_pods(engine)
    units = _labelled_units(engine, price_book)
    hourly = read_hourly(
        engine, pods, price_book, start_ts=end_ts - span_days * DAY_S, end_ts=end_ts
    )
    start_ts = int(hourly["ts"].min()) if len(hourly) else marker.first_ts
    start_ts -= start_ts % HOUR_S
    steps = rollup.unit_steps(hourly)
    return Snapshot(
        marker=marker,
        end_ts=end_ts,
        span_start_ts=start_ts,
        first_ts=_first_data_ts(engine, marker, start_ts),
        step_s=int(steps.max()) if len(steps) else 0,
        units=units,
        pods=pods,
        nodes=repository.load_nodes(engine),
        collection=repository.load_collection_state(engine),
        hourly=hourly,
        gaps=rollup.hour_gaps(hourly, units, steps, start_ts, end_ts),
        price_book=price_book,
        policy=policy,
        rollup_idle_util_pct=repository.rollup_idle_util_pct(engine),
        dra=repository.load_dra_devices(engine),
        built_s=time.monotonic() - began,
        engine=engine,
    )
