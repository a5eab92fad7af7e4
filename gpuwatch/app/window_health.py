"""A window's health roll-up for the pages: its hourly rows (the health pages, a workload's
efficiency over time) or its sums per (GPU unit, pod) (efficiency figures and placement
traffic, summed in the store), each read once per data version and window."""

from __future__ import annotations

import pandas as pd

from gpuwatch.app import windows
from gpuwatch.app.data import Snapshot
from gpuwatch.domain.frames import HEALTH_COLUMNS, HEALTH_SUM_COLUMNS, empty_frame
from gpuwatch.store import repository


def health_window(snap: Snapshot, window: str) -> pd.DataFrame:
    """The health rows (:data:`~gpuwatch.domain.frames.HEALTH_COLUMNS`) of the window, as the
    store returns them (never modify them)."""

    def compute() -> pd.DataFrame:
        if snap.engine is None or snap.empty:
            return empty_frame(HEALTH_COLUMNS)
        start, end = windows.bounds(window, snap.end_ts)
        return repository.load_health_hourly(snap.engine, start, end)

    return snap.memo(("health_window", window), compute)


def health_sums_window(snap: Snapshot, window: str) -> pd.DataFrame:
    """The window's health roll-up summed per (unit, pod) in the store
    (:data:`~gpuwatch.domain.frames.HEALTH_SUM_COLUMNS`)."""

    def compute() -> pd.DataFrame:
        if snap.engine is None or snap.empty:
            return empty_frame(HEALTH_SUM_COLUMNS)
        start, end = windows.bounds(window, snap.end_ts)
        return repository.load_health_sums(snap.engine, start, end)

    return snap.memo(("health_sums", window), compute)
