"""Daily sums: equal to the raw samples' sums, built once, dropped by every write of their day."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.domain.frames import NO_POD
from gpuwatch.simulate.fleet import build_fleet
from gpuwatch.simulate.generate import SimulatedData, generate
from gpuwatch.simulate.load import load_simulated
from gpuwatch.store import daily, repository, rollup
from gpuwatch.store.engine import make_engine, upgrade

DAY_S, HOUR_S = 86_400, 3_600
#: Two whole UTC days, then five hours of a third.
DAY1 = int(datetime(2026, 11, 14, tzinfo=UTC).timestamp())
DAY2, DAY3 = DAY1 + DAY_S, DAY1 + 2 * DAY_S
END_TS = DAY3 + 5 * HOUR_S
STEP_S = 900
IDLE = 0.05


@pytest.fixture(scope="module")
def data() -> SimulatedData:
    return generate(build_fleet(7), DAY1, END_TS, STEP_S)


@pytest.fixture
def engine(simulated_engine: Engine) -> Engine:
    return simulated_engine


def _raw_sums(engine: Engine, start_ts: int, end_ts: int) -> pd.DataFrame:
    """The same sums, straight from the raw samples the test wrote (not through any roll-up)."""
    raw = repository.load_samples(engine, start_ts, end_ts, health=False)
    util = raw["util_ratio"].to_numpy(dtype="float64", na_value=np.nan)
    step = raw["step_s"].to_numpy(dtype="float64")
    read = ~np.isnan(util)
    frame = pd.DataFrame(
        {
            "day_ts": raw["ts"].to_numpy() // DAY_S * DAY_S,
            "gpu_id": raw["gpu_id"].to_numpy(),
            "pod_id": raw["pod_id"].fillna(NO_POD).astype("int64").to_numpy(),
            "samples": 1,
            "data_s": np.where(read, step, 0.0),
            "used_s": np.where(read, np.clip(np.nan_to_num(util), 0, 1) * step, 0.0),
            "idle_s": np.where(read & (util < IDLE), step, 0.0),
        }
    )
    keys = ["day_ts", "gpu_id", "pod_id"]
    return frame.groupby(keys).sum().sort_index()


def _sums(read: daily.SumsRead) -> pd.DataFrame:
    keys = ["day_ts", "gpu_id", "pod_id"]
    frame = read.sums.groupby(keys)[["samples", "data_s", "used_s", "idle_s"]].sum()
    return frame.sort_index()


def _assert_equal(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.index) == list(want.index)
    for name in ("samples", "data_s", "idle_s"):
        assert got[name].astype("int64").tolist() == want[name].astype("int64").tolist(), name
    np.testing.assert_allclose(got["used_s"], want["used_s"], rtol=1e-12)


def _state(engine: Engine) -> dict[int, tuple[int, int | None]]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT day_ts, version, built_version FROM gpu_daily_state"))
        return {int(r[0]): (int(r[1]), r[2]) for r in rows}


def _daily_rows(engine: Engine, day_ts: int) -> int:
    with engine.connect() as conn:
        sql = sa.text("SELECT COUNT(*) FROM gpu_samples_daily WHERE day_ts = :d")
        return int(conn.execute(sql, {"d": day_ts}).scalar_one())


def test_the_loader_builds_the_finished_days(engine: Engine) -> None:
    assert _state(engine) == {DAY1: (1, 1), DAY2: (1, 1), DAY3: (1, None)}
    assert _daily_rows(engine, DAY1) > 0 and _daily_rows(engine, DAY3) == 0
    with engine.connect() as conn:
        assert daily.pending_days(conn, END_TS) == []
        assert daily.pending_days(conn, DAY3 + DAY_S) == [DAY3]


def test_a_window_sums_to_its_raw_samples_whole_days_from_daily_sums(engine: Engine) -> None:
    start = DAY1 + 7 * HOUR_S  # a part of day 1, day 2 whole, a part of day 3
    read = daily.read_sums(engine, start, END_TS)
    assert read.daily_days == 1
    _assert_equal(_sums(read), _raw_sums(engine, start, END_TS))
    assert set(read.sums["day_ts"]) == {DAY1, DAY2, DAY3}


def test_built_days_are_read_from_their_sums(engine: Engine) -> None:
    with engine.begin() as conn:  # a planted row: read from the hourly rows, it would not show
        conn.execute(
            sa.text(
                "UPDATE gpu_samples_daily SET samples = samples + 1000 WHERE day_ts = :d"
                " AND gpu_id = (SELECT MIN(gpu_id) FROM gpu_samples_daily WHERE day_ts = :d)"
            ),
            {"d": DAY2},
        )
    read = daily.read_sums(engine, DAY1, DAY3)
    extra = _sums(read)["samples"].sum() - _raw_sums(engine, DAY1, DAY3)["samples"].sum()
    assert extra == 1000 and read.daily_days == 2


def test_rolling_up_an_hour_again_drops_its_days_sums_until_the_next_build(
    engine: Engine,
) -> None:
    with engine.begin() as conn:
        rollup.roll_up(conn, DAY2 + 5 * HOUR_S, DAY2 + 6 * HOUR_S)
    assert _state(engine) == {DAY1: (1, 1), DAY2: (2, None), DAY3: (1, None)}
    assert _daily_rows(engine, DAY2) == 0 and _daily_rows(engine, DAY1) > 0
    read = daily.read_sums(engine, DAY1, DAY3)  # reads only: day 2 from its hourly rows
    assert read.daily_days == 1 and _state(engine)[DAY2] == (2, None)
    _assert_equal(_sums(read), _raw_sums(engine, DAY1, DAY3))
    assert daily.build_pending(engine, END_TS) == 1
    assert _state(engine)[DAY2] == (2, 2)
    read = daily.read_sums(engine, DAY1, DAY3)
    assert read.daily_days == 2
    _assert_equal(_sums(read), _raw_sums(engine, DAY1, DAY3))


def _add_a_sample(conn: sa.Connection, hour_ts: int) -> int:
    """An idle sample of the first GPU unit 7 s into the hour, rolled up; the unit's id."""
    gpu_id = int(conn.execute(sa.text("SELECT MIN(id) FROM gpus")).scalar_one())
    conn.execute(
        sa.text(
            "INSERT INTO gpu_samples (ts, gpu_id, pod_id, step_s, util_ratio)"
            " VALUES (:ts, :g, NULL, 60, 0.0)"
        ),
        {"ts": hour_ts + 7, "g": gpu_id},
    )
    rollup.roll_up(conn, hour_ts, hour_ts + HOUR_S)
    return gpu_id


def test_a_new_sample_in_a_built_day_is_in_the_next_read(engine: Engine) -> None:
    with engine.begin() as conn:
        gpu_id = _add_a_sample(conn, DAY1 + 17 * HOUR_S)
    daily.build_pending(engine, END_TS)
    read = daily.read_sums(engine, DAY1, DAY3)
    assert read.daily_days == 2
    _assert_equal(_sums(read), _raw_sums(engine, DAY1, DAY3))
    assert _sums(read).loc[(DAY1, gpu_id)]["samples"].sum() > 0


def test_compaction_drops_the_days_before_the_cut(engine: Engine) -> None:
    with engine.begin() as conn:
        rollup.compact(conn, END_TS, raw_keep_s=DAY_S, hourly_keep_s=END_TS - DAY2 - 6 * HOUR_S)
    state = _state(engine)
    assert DAY1 not in state and state[DAY2] == (2, None)
    assert _daily_rows(engine, DAY1) == 0
    read = daily.read_sums(engine, DAY1, END_TS)
    assert read.sums["day_ts"].min() == DAY2
    assert read.sums["samples"].sum() == _raw_sums(engine, DAY2 + 6 * HOUR_S, END_TS)[
        "samples"
    ].sum() + _hourly_samples(engine, DAY2, DAY2 + 6 * HOUR_S)


def _hourly_samples(engine: Engine, start_ts: int, end_ts: int) -> int:
    with engine.connect() as conn:
        sql = "SELECT COALESCE(SUM(samples), 0) FROM gpu_samples_hourly"
        sql += " WHERE hour_ts >= :a AND hour_ts < :b"
        return int(conn.execute(sa.text(sql), {"a": start_ts, "b": end_ts}).scalar_one())


def test_a_write_during_the_read_makes_it_read_again(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_gaps, calls = daily._gaps, []

    def gaps_then_a_write(start_ts: int, end_ts: int, built: list[int]) -> list[tuple[int, int]]:
        calls.append(built)
        if len(calls) == 1:
            with engine.begin() as conn:
                daily.invalidate(conn, [DAY1 + HOUR_S])
        return real_gaps(start_ts, end_ts, built)

    monkeypatch.setattr(daily, "_gaps", gaps_then_a_write)
    read = daily.read_sums(engine, DAY1, END_TS)
    assert read.tries == 2 and calls == [[DAY1, DAY2], [DAY2]]
    _assert_equal(_sums(read), _raw_sums(engine, DAY1, END_TS))


def test_whole_days_of_a_window() -> None:
    assert daily.whole_days(DAY1 + HOUR_S, DAY3 + DAY_S) == [DAY2, DAY3]
    assert daily.whole_days(DAY1, DAY3 + HOUR_S) == [DAY1, DAY2]
    assert daily.whole_days(DAY1, DAY1 + 23 * HOUR_S) == []


def _wait_for_a_lock_wait(engine: Engine, deadline_s: float = 30.0) -> None:
    """Until another session of this database waits on a lock (PostgreSQL's own view)."""
    sql = sa.text(
        "SELECT COUNT(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    began = time.monotonic()
    with engine.connect() as conn:
        while conn.execute(sql).scalar_one() == 0:
            assert time.monotonic() - began < deadline_s, "the build never waited"
            conn.rollback()
            time.sleep(0.01)


@pytest.mark.postgres
def test_a_build_waits_for_a_writer_of_its_day_and_sums_what_it_wrote(postgres_url: str) -> None:
    engine = make_engine(postgres_url)
    upgrade(engine)
    with engine.begin() as conn:
        load_simulated(conn, generate(build_fleet(7), DAY1, END_TS, STEP_S))
    with engine.connect() as writer:
        writer.begin()
        _add_a_sample(writer, DAY2 + 9 * HOUR_S)  # rolls its hour up: locks DAY2's state row
        with ThreadPoolExecutor(1) as pool:
            built = pool.submit(daily.build_day, engine, DAY2)
            _wait_for_a_lock_wait(engine)
            assert not built.done()
            writer.commit()
            assert built.result(timeout=60) is True
    version, built_version = _state(engine)[DAY2]
    assert built_version == version
    read = daily.read_sums(engine, DAY2, DAY3)
    assert read.daily_days == 1
    _assert_equal(_sums(read), _raw_sums(engine, DAY2, DAY3))
    engine.dispose()


def test_a_broken_store_is_reported_not_read_around(engine: Engine) -> None:
    """Only contention makes a build give way; a missing table is an error the user sees."""
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE gpu_samples_daily"))
    with pytest.raises(sa.exc.DBAPIError, match="gpu_samples_daily"):
        daily.build_day(engine, DAY1)
