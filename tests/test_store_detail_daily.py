"""The recommendation detail kept per day (``pod_detail_daily``, ``workload_detail_daily``): a
window read from its built days' sums equals the same window summed from its hourly rows, on
SQLite and PostgreSQL, and writes, builds and compaction keep the two in step."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.domain import sketch
from gpuwatch.domain.detail_sums import summed_detail
from gpuwatch.domain.series import Histograms, StoredDetail
from gpuwatch.simulate.fleet import build_fleet
from gpuwatch.simulate.generate import SimulatedData, generate
from gpuwatch.store import daily, daily_detail, repository_detail, rollup

END_TS = 1_794_823_200  # Monday 2026-11-16 10:00 UTC
DAY_S = 86_400
START_TS = END_TS - 10 * DAY_S
FIRST_DAY = START_TS - START_TS % DAY_S
DAYS = list(range(FIRST_DAY, END_TS - END_TS % DAY_S, DAY_S))  # the finished days
MID_DAY = DAYS[4]


@pytest.fixture(scope="module")
def data() -> SimulatedData:
    return generate(build_fleet(seed=5), START_TS, END_TS, 1800)


@pytest.fixture
def engine(simulated_engine: Engine) -> Engine:
    return simulated_engine


def _days(engine: Engine, table: str) -> list[int]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT DISTINCT day_ts FROM {table} ORDER BY 1"))
        return [int(r[0]) for r in rows]


def _from_hours(engine: Engine, start_ts: int, end_ts: int) -> StoredDetail:
    """The window's detail summed from its hourly rows alone (the definition)."""
    return summed_detail(repository_detail.load_detail(engine, start_ts, end_ts))


def _hist(h: Histograms) -> tuple[list[int], list[int], list[int]]:
    return h.rows.tolist(), h.bins.tolist(), h.counts.tolist()


def _assert_same(got: StoredDetail, want: StoredDetail) -> None:
    pd.testing.assert_frame_equal(got.pods, want.pods, check_dtype=False)
    pd.testing.assert_frame_equal(got.workloads, want.workloads, check_dtype=False)
    for name in ("pod_busy", "pod_util", "pod_fb_used", "held", "util_sum"):
        assert _hist(getattr(got, name)) == _hist(getattr(want, name)), name


def test_the_loader_builds_each_finished_days_detail_sums(engine: Engine) -> None:
    assert _days(engine, "pod_detail_daily") == DAYS
    assert _days(engine, "workload_detail_daily") == DAYS
    with engine.connect() as conn:
        pod_rows = conn.execute(sa.text("SELECT COUNT(*) FROM pod_detail_daily")).scalar_one()
        hourly = conn.execute(sa.text("SELECT COUNT(*) FROM pod_samples_hourly")).scalar_one()
    assert 0 < pod_rows < hourly // 4  # a row per pod and day, not per hour


@pytest.mark.parametrize(
    ("start_ts", "end_ts"),
    [
        (START_TS, END_TS + 3600),  # partial first and last days around 9 whole ones
        (DAYS[2], DAYS[5]),  # whole days only
        (MID_DAY + 5 * 3600, MID_DAY + 9 * 3600),  # hours of one day only
        (MID_DAY + 1800, MID_DAY + DAY_S + 1),  # from the next whole hour
    ],
)
def test_a_window_from_the_daily_sums_equals_its_hours_summed(
    engine: Engine, start_ts: int, end_ts: int
) -> None:
    got = repository_detail.load_window_detail(engine, start_ts, end_ts)
    want = _from_hours(engine, start_ts, end_ts)
    _assert_same(got, want)
    assert len(got.pods) > 0 and len(got.workloads) > 0 and len(got.util_sum.rows) > 0


def test_built_days_are_read_from_their_detail_sums(engine: Engine) -> None:
    before = repository_detail.load_window_detail(engine, START_TS, END_TS)
    with engine.begin() as conn:  # planted: read from the hourly rows, it would not show
        pod = conn.execute(
            sa.text("SELECT MIN(pod_id) FROM pod_detail_daily WHERE day_ts = :d"), {"d": MID_DAY}
        ).scalar_one()
        conn.execute(
            sa.text("UPDATE pod_detail_daily SET held_max = 99 WHERE day_ts = :d AND pod_id = :p"),
            {"d": MID_DAY, "p": pod},
        )
    after = repository_detail.load_window_detail(engine, START_TS, END_TS)
    changed = after.pods["held_max"] != before.pods["held_max"]
    assert after.pods.loc[changed, ["pod_id", "held_max"]].values.tolist() == [[pod, 99]]


def test_days_not_built_are_read_from_their_hourly_rows(engine: Engine) -> None:
    built = repository_detail.load_window_detail(engine, START_TS, END_TS)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE gpu_daily_state SET built_version = NULL"))
        conn.execute(sa.text("DELETE FROM pod_detail_daily"))  # never read for pending days
    _assert_same(repository_detail.load_window_detail(engine, START_TS, END_TS), built)


def test_a_write_drops_its_days_detail_sums_until_the_next_build(engine: Engine) -> None:
    with engine.begin() as conn:
        rollup.roll_up(conn, MID_DAY + 5 * 3600, MID_DAY + 6 * 3600)
    assert MID_DAY not in _days(engine, "pod_detail_daily")
    assert MID_DAY not in _days(engine, "workload_detail_daily")
    want = _from_hours(engine, START_TS, END_TS)
    _assert_same(repository_detail.load_window_detail(engine, START_TS, END_TS), want)
    assert daily.build_pending(engine, END_TS) == 1
    assert MID_DAY in _days(engine, "pod_detail_daily")
    _assert_same(repository_detail.load_window_detail(engine, START_TS, END_TS), want)


def test_compaction_drops_the_detail_sums_before_its_cut(engine: Engine) -> None:
    with engine.begin() as conn:
        rollup.compact(conn, END_TS, raw_keep_s=DAY_S, hourly_keep_s=END_TS - MID_DAY)
    assert _days(engine, "pod_detail_daily")[0] == MID_DAY
    assert _days(engine, "workload_detail_daily")[0] == MID_DAY
    got = repository_detail.load_window_detail(engine, START_TS, END_TS)
    _assert_same(got, _from_hours(engine, START_TS, END_TS))
    assert int(np.min(got.pods["hour_ts"])) >= MID_DAY


def test_a_day_rebuilt_while_read_leaves_out_the_workload_hours_the_read_did_not_see() -> None:
    """Histograms of daily rows whose workload-hour the first read missed (-1) are left out;
    the window's versions moved, so the window is read again (tests/test_store_daily.py)."""
    blob = sketch.encode(np.array([3]), np.array([5]))
    daily_rows = [(0, "a", blob), (0, "b", blob), (0, "c", blob)]
    got = daily_detail._placed(daily_rows, 2, np.array([4, -1, 0]))
    assert (got.rows.tolist(), got.bins.tolist(), got.counts.tolist()) == ([4, 0], [3, 3], [5, 5])
