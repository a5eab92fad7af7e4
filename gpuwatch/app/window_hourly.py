"""The hourly rows of one window, read from the store when a page asks for them.

:func:`window_hourly` reads the window's hourly roll-ups (:func:`gpuwatch.store.repository.
load_hourly_samples`), costs them with the analytics (:func:`gpuwatch.analytics.costing.
prepare`, :mod:`gpuwatch.app.rollup`) and caches them with the data version they were read at,
in the snapshot's bounded memo, a week at a time: no process keeps more of the fleet's hours
than the windows its pages asked for, and no more than the memo's bound. :func:`window_gaps`
finds a window's incomplete hours in them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from gpuwatch.analytics.costing import prepare
from gpuwatch.app import rollup
from gpuwatch.app.data import Snapshot
from gpuwatch.app.snapshot import release_memory
from gpuwatch.domain.durations import DAY_S
from gpuwatch.domain.pricing import PriceBook
from gpuwatch.store import repository

#: Days of roll-ups read and costed at once.
CHUNK_DAYS = 7
#: The filter windows' chunks reach this many days back from the last hour with data.
SPAN_DAYS = 31


def read_hourly(
    engine: Engine,
    pods: pd.DataFrame,
    price_book: PriceBook,
    *,
    start_ts: int,
    end_ts: int,
) -> pd.DataFrame:
    """The costed hourly rows of ``[start_ts, end_ts)``, as :func:`~gpuwatch.app.rollup.stored`
    keeps them, costed together (node-level attribution is decided over the range, as
    ``gpuwatch recommend`` decides it over its window)."""
    samples = repository.load_hourly_samples(engine, start_ts, end_ts, pods=pods)
    if not len(samples):
        return rollup.empty_hourly()
    rows = rollup.stored(rollup.compact(prepare(samples, pods, price_book)))
    del samples
    release_memory()
    return rows


def _by_unit(units: pd.DataFrame, rows: pd.DataFrame, column: str) -> np.ndarray:
    """A column of ``units`` as an array indexed by ``gpu_id``."""
    ids = units["gpu_id"].to_numpy(dtype="int64")
    top = int(max(ids.max(initial=0), rows["gpu_id"].max() if len(rows) else 0))
    values = np.full(top + 1, np.nan)
    values[ids] = units[column].to_numpy(dtype="float64")
    return values


def _read(snap: Snapshot, start_ts: int, end_ts: int) -> pd.DataFrame:
    """The stored hourly rows of ``[start_ts, end_ts)``, read once per data version."""

    def compute() -> pd.DataFrame:
        if snap.engine is None or snap.empty:
            return rollup.empty_hourly()
        return read_hourly(
            snap.engine, snap.pods, snap.price_book, start_ts=start_ts, end_ts=end_ts
        )

    return snap.memo(("hourly_rows", start_ts, end_ts), compute, share=True)


def _between(rows: pd.DataFrame, start_ts: int, end_ts: int) -> pd.DataFrame:
    ts = rows["ts"].to_numpy()
    first, last = np.searchsorted(ts, [start_ts, end_ts], side="left")
    return rows.iloc[int(first) : int(last)]


def window_hourly(snap: Snapshot, start_ts: int, end_ts: int) -> pd.DataFrame:
    """The hourly rows of ``[start_ts, end_ts)`` with data hours and unit prices (never modify
    them): one per (hour, GPU unit, pod), sorted by ``ts``.

    Every window is read in chunks of :data:`CHUNK_DAYS` days counted back from its end, each
    read and costed once per data version (node-level attribution is decided per chunk).
    Windows ending where the snapshot ends (the rolling presets, month to date) share their
    chunks: those are whole weeks back from the data's end (none starting more than
    :data:`SPAN_DAYS` days back), and each window takes the hours it covers.
    """
    chunk_s = CHUNK_DAYS * DAY_S
    span_start = snap.end_ts - SPAN_DAYS * DAY_S
    shared = end_ts == snap.end_ts and start_ts >= span_start
    floor = span_start if shared else start_ts
    parts = [
        _between(_read(snap, max(e - chunk_s, floor), e), start_ts, end_ts)
        for e in reversed(range(end_ts, start_ts, -chunk_s))
    ]
    rows = rollup.concat_parts(parts, rollup.empty_hourly())
    prices = _by_unit(snap.units, rows, "usd_per_hour")
    return rollup.with_costs(rows, prices, _by_unit(snap.units, rows, "gpu_share"))


def window_gaps(snap: Snapshot, start_ts: int, end_ts: int) -> pd.DataFrame:
    """The hours of ``[start_ts, end_ts)`` in which a unit has fewer samples than its step
    implies (:func:`~gpuwatch.app.rollup.hour_gaps`): ``gpu_id``, ``hour_ts``, ``missing_s``."""

    def compute() -> pd.DataFrame:
        rows = window_hourly(snap, start_ts, end_ts)
        return rollup.hour_gaps(rows, snap.units, rollup.unit_steps(rows), start_ts, end_ts)

    return snap.memo(("window_gaps", start_ts, end_ts), compute)
