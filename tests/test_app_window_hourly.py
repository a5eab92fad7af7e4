"""The hourly rows a page asks for are read from the store per window, a week at a time."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from sqlalchemy import Engine

from gpuwatch.analytics import columns as c
from gpuwatch.app import window_hourly
from gpuwatch.app.data import DashboardData, Snapshot
from gpuwatch.app.window_hourly import read_hourly
from gpuwatch.config import Settings
from gpuwatch.store import repository
from tests.support.demo_fleet import DEMO_NOW_TS

NOW_TS = DEMO_NOW_TS
DAY_S = 86_400


@pytest.fixture
def engine(demo_fleet: Engine) -> Engine:
    return demo_fleet


def _snap(engine: Engine) -> Snapshot:
    return DashboardData(engine, Settings(), background=False).current()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Every window ``read_hourly`` is asked for, in order."""
    calls: list[tuple[int, int]] = []

    def counted(*args: Any, start_ts: int, end_ts: int) -> pd.DataFrame:
        calls.append((start_ts, end_ts))
        return read_hourly(*args, start_ts=start_ts, end_ts=end_ts)

    monkeypatch.setattr(window_hourly, "read_hourly", counted)
    return calls


def test_windows_share_the_weeks_they_cover(engine: Engine, reads: list[tuple[int, int]]) -> None:
    snap = _snap(engine)
    end = snap.end_ts
    assert end == NOW_TS
    for days in (1, 3, 7):
        window_hourly.window_hourly(snap, end - days * DAY_S, end)
    assert reads == [(end - 7 * DAY_S, end)]
    window_hourly.window_hourly(snap, end - 14 * DAY_S, end)
    assert reads == [(end - 7 * DAY_S, end), (end - 14 * DAY_S, end - 7 * DAY_S)]
    window_hourly.window_hourly(snap, end - 2 * DAY_S, end - DAY_S)  # not a filter window
    assert reads[-1] == (end - 2 * DAY_S, end - DAY_S) and len(reads) == 3
    # a longer one is read in weeks counted back from its own end
    window_hourly.window_hourly(snap, end - 10 * DAY_S, end - DAY_S)
    assert reads[3:] == [(end - 10 * DAY_S, end - 8 * DAY_S), (end - 8 * DAY_S, end - DAY_S)]


def test_a_window_is_its_hours_of_the_stored_rollups(engine: Engine) -> None:
    snap = _snap(engine)
    end = snap.end_ts
    for start, stop in ((end - DAY_S, end), (end - 9 * DAY_S, end), (end - 3 * DAY_S, end - DAY_S)):
        rows = window_hourly.window_hourly(snap, start, stop)
        ts = rows["ts"].to_numpy()
        assert (ts[1:] >= ts[:-1]).all() and ts.min() == start and ts.max() == stop - 3600
        stored = repository.load_hourly_samples(engine, start, stop, health=False)
        assert int(rows[c.SAMPLES].sum()) == int(stored["samples"].sum()) > 0
        assert rows[c.DATA_HOURS].sum() == pytest.approx(stored["step_s"].sum() / 3600, rel=1e-12)
        priced = rows[c.USD_PER_HOUR].to_numpy()
        assert (priced > 0).all()


def test_nine_days_are_cut_from_two_weeks_as_read_directly(engine: Engine) -> None:
    """The rows of a window cut from the weeks equal its two parts read directly: the last
    week, and the two days before it."""
    snap = _snap(engine)
    end = snap.end_ts
    got = window_hourly.window_hourly(snap, end - 9 * DAY_S, end)
    parts = [
        read_hourly(engine, snap.pods, snap.price_book, start_ts=start, end_ts=stop)
        for start, stop in ((end - 9 * DAY_S, end - 7 * DAY_S), (end - 7 * DAY_S, end))
    ]
    direct = pd.concat(parts, ignore_index=True)
    columns = ["ts", "gpu_id", "pod_id", "step_s", c.SAMPLES, c.UTIL, c.ALLOCATED]
    pd.testing.assert_frame_equal(
        got[columns].reset_index(drop=True), direct[columns].reset_index(drop=True)
    )
