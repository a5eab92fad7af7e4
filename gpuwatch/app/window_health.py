"""A window's health roll-up for the pages: its hourly rows (the health pages, a workload's
efficiency over time) or its sums per (GPU unit, pod) (efficiency figures and placement
traffic, summed in the store), each read once per data version and window."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
from sqlalchemy import Engine

from gpuwatch.app import windows
from gpuwatch.app.data import Snapshot
from gpuwatch.domain.frames import HEALTH_COLUMNS, HEALTH_SUM_COLUMNS, Column, empty_frame
from gpuwatch.store import repository

#: A store read of the hours starting in ``[start, end)``, given the snapshot's pods.
Reader = Callable[[Engine, int, int, pd.DataFrame], pd.DataFrame]


def _read(
    snap: Snapshot,
    window: str,
    kind: str,
    columns: tuple[Column, ...],
    read: Reader,
    *,
    share: bool = False,
) -> pd.DataFrame:
    """``read(engine, start, end, pods)`` over the window's bounds, memoized by ``kind`` and window
    (``share``: shared with the server's other workers); an empty frame of ``columns`` without a
    store or data."""

    def compute() -> pd.DataFrame:
        if snap.engine is None or snap.empty:
            return empty_frame(columns)
        start, end = windows.bounds(window, snap.end_ts)
        return read(snap.engine, start, end, snap.pods)

    return snap.memo((kind, window), compute, share=share)


def health_window(snap: Snapshot, window: str) -> pd.DataFrame:
    """The health rows (:data:`~gpuwatch.domain.frames.HEALTH_COLUMNS`) of the window, as the
    store returns them (never modify them). Not shared between workers: at 2,000 GPUs a week's
    rows are 184 MiB, which each data version would write again."""

    def read(engine: Engine, start: int, end: int, pods: pd.DataFrame) -> pd.DataFrame:
        return repository.load_health_hourly(engine, start, end, pods=pods)

    return _read(snap, window, "health_window", HEALTH_COLUMNS, read)


def health_sums_window(snap: Snapshot, window: str) -> pd.DataFrame:
    """The window's health roll-up summed per (unit, pod) in the store
    (:data:`~gpuwatch.domain.frames.HEALTH_SUM_COLUMNS`)."""
    read = repository.load_health_sums
    return _read(snap, window, "health_sums", HEALTH_SUM_COLUMNS, read, share=True)
