"""Hourly roll-ups: exact additive quantities, idempotence, thresholds, retention, resolution."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.costing import prepare
from gpuwatch.analytics.summary import summarize
from gpuwatch.domain.pricing import build_price_book
from gpuwatch.report.inputs import choose_resolution, load_inputs
from gpuwatch.simulate.fleet import build_fleet
from gpuwatch.simulate.generate import SimulatedData, generate
from gpuwatch.simulate.load import load_simulated
from gpuwatch.store import repository, rollup, rollup_append, writer
from gpuwatch.store.engine import make_engine, upgrade
from gpuwatch.store.models import SAMPLE_FIELDS

END_TS = int(datetime(2026, 11, 16, tzinfo=UTC).timestamp())
START_TS = END_TS - 2 * 86400  # raw retention in the tests: the last day
STEP_S = 900
IDLE = 0.05
HOURLY_COLUMNS = (
    "hour_ts, gpu_id, pod_id, samples, step_s, first_ts, last_ts, data_s, used_s, idle_s, "
    "util_max, fb_used_max_mib, power_w_sum, power_n, temp_max_c, xid"
)


@pytest.fixture(scope="module")
def data() -> SimulatedData:
    return generate(build_fleet(7), START_TS, END_TS, STEP_S)


@pytest.fixture
def engine(simulated_engine: Engine) -> Engine:
    return simulated_engine


def _hourly_rows(engine: Engine) -> list[tuple[object, ...]]:
    with engine.connect() as conn:
        sql = f"SELECT {HOURLY_COLUMNS} FROM gpu_samples_hourly ORDER BY hour_ts, gpu_id, pod_id"
        return [tuple(row) for row in conn.execute(sa.text(sql))]


def _summary(samples: pd.DataFrame, pods: pd.DataFrame, by: tuple[str, ...]) -> pd.DataFrame:
    costed = prepare(samples, pods, build_price_book(2.0, 0.6, {}, {}))
    return summarize(costed, by, IDLE).set_index(list(by)).sort_index()


@pytest.mark.parametrize("by", [("cluster", "namespace", "workload"), ("cluster", "node")])
def test_additive_quantities_are_exact_under_rollup(engine: Engine, by: tuple[str, ...]) -> None:
    pods = repository.load_pods(engine)
    raw = _summary(repository.load_samples(engine, START_TS, END_TS), pods, by)
    hourly = _summary(repository.load_hourly_samples(engine, START_TS, END_TS), pods, by)
    assert list(hourly.index) == list(raw.index)
    for name in c.SUM_COLUMNS:
        np.testing.assert_allclose(hourly[name], raw[name], rtol=1e-9, atol=1e-9, err_msg=name)
    assert raw[c.IDLE_GPU_HOURS].sum() > 0 and raw[c.UNALLOCATED_GPU_HOURS].sum() > 0


def test_hourly_rows_count_every_sample_once(engine: Engine, data: SimulatedData) -> None:
    hourly = repository.load_hourly_samples(engine, START_TS, END_TS)
    assert int(hourly["samples"].sum()) == len(data.samples)
    assert set(hourly["ts"] % 3600) == {0}
    assert hourly["step_s"].max() <= 3600
    assert hourly["idle_ratio"].dropna().between(0, 1).all()


def test_rolling_up_again_changes_nothing(engine: Engine) -> None:
    before = _hourly_rows(engine)
    with engine.begin() as conn:
        rows = rollup.roll_up(conn, START_TS + 1800, START_TS + 5400)
    assert rows > 0
    assert _hourly_rows(engine) == before


def test_rebuild_counts_idle_time_at_the_new_threshold(engine: Engine) -> None:
    def idle_s() -> int:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT sum(idle_s) FROM gpu_samples_hourly")).scalar())

    at_5 = idle_s()
    with engine.begin() as conn:
        rollup.rebuild(conn, 30.0, END_TS)
        state = rollup.read_state(conn)
    assert state is not None and state.idle_util_pct == 30.0
    assert idle_s() > at_5
    with engine.begin() as conn:
        rollup.rebuild(conn, 5.0, END_TS)
    assert idle_s() == at_5


def test_compaction_keeps_every_gpu_hour_of_the_deleted_raw_samples(engine: Engine) -> None:
    pods = repository.load_pods(engine)
    by = ("cluster", "namespace")
    before = _summary(repository.load_hourly_samples(engine, START_TS, END_TS), pods, by)
    with engine.begin() as conn:
        done = rollup.compact(conn, END_TS, raw_keep_s=86400, hourly_keep_s=400 * 86400)
        state = rollup.read_state(conn)
    if engine.dialect.name == "postgresql":  # the first day is one partition, dropped whole
        assert done.partitions_dropped == ("gpu_samples_p20261114",)
        assert done.raw_deleted == 0
    else:
        assert done.partitions_dropped == () and done.raw_deleted > 0
    assert done.hourly_deleted == 0
    assert done.raw_kept_from_ts == END_TS - 86400
    assert state is not None and state.raw_kept_from_ts == END_TS - 86400
    assert not repository.has_samples(engine, START_TS, END_TS - 86400)
    assert repository.has_samples(engine, END_TS - 86400, END_TS)
    after = _summary(repository.load_hourly_samples(engine, START_TS, END_TS), pods, by)
    pd.testing.assert_frame_equal(after, before)


def test_compaction_drops_rollups_past_their_retention(engine: Engine) -> None:
    with engine.begin() as conn:
        done = rollup.compact(conn, END_TS, raw_keep_s=86400, hourly_keep_s=86400 + 3600)
    assert done.hourly_deleted > 0
    hourly = repository.load_hourly_samples(engine, START_TS, END_TS)
    assert hourly["ts"].min() == END_TS - 86400 - 3600


def test_auto_reads_rollups_when_they_match_the_threshold(engine: Engine) -> None:
    assert choose_resolution(engine, START_TS, END_TS, "auto", 5.0) == "hourly"
    assert choose_resolution(engine, START_TS, END_TS, "raw", 5.0) == "raw"
    inputs = load_inputs(engine, START_TS + 600, END_TS - 600, resolution="auto")
    assert inputs.resolution == "hourly"
    assert (inputs.start_ts, inputs.end_ts) == (START_TS, END_TS)  # widened to whole hours


@pytest.mark.parametrize("resolution", ["raw", "hourly"])
def test_the_inputs_read_the_pods_table_once(engine: Engine, resolution: str) -> None:
    """Samples, health sums and the pods frame share one read of the pods table."""
    statements: list[str] = []

    def seen(conn: object, cursor: object, statement: str, *args: object) -> None:
        statements.append(statement)

    sa.event.listen(engine, "before_cursor_execute", seen)
    try:
        data = load_inputs(engine, START_TS, END_TS, resolution=resolution, health=True)
    finally:
        sa.event.remove(engine, "before_cursor_execute", seen)
    pods = [s for s in statements if re.search(r"\bFROM pods\b", s)]
    assert len(pods) == 1, pods
    assert data.samples["namespace"].notna().any() and data.health_sums is not None
    assert data.health_sums["namespace"].notna().any()


def test_the_inputs_are_read_on_threads_on_postgresql_only(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite works inside this process, where reads on threads cost more than in turn."""
    names: list[str] = []
    load_gpus = repository.load_gpus

    def recorded(*args: Any) -> pd.DataFrame:
        names.append(threading.current_thread().name)
        return load_gpus(*args)

    monkeypatch.setattr(repository, "load_gpus", recorded)
    load_inputs(engine, START_TS, END_TS, resolution="hourly", health=True)
    assert len(names) == 1
    if engine.dialect.name == "sqlite":
        assert names == [threading.current_thread().name]
    else:
        assert names[0].startswith("read") and names[0] != threading.current_thread().name


def test_a_pods_frame_without_a_pod_of_the_rows_is_read_again(engine: Engine) -> None:
    """Given the pods a caller read earlier, rows of a pod stored since still get its facts."""
    pods = repository.load_pods(engine)
    want = repository.load_hourly_samples(engine, START_TS, END_TS)
    held = want.dropna(subset=["pod_id"])
    missing = int(held["pod_id"].iloc[0])
    statements: list[str] = []

    def seen(conn: object, cursor: object, statement: str, *args: object) -> None:
        statements.append(statement)

    sa.event.listen(engine, "before_cursor_execute", seen)
    try:
        same = repository.load_hourly_samples(engine, START_TS, END_TS, pods=pods)
        read_before = sum(bool(re.search(r"\bFROM pods\b", s)) for s in statements)
        older = pods[pods["pod_id"] != missing]
        got = repository.load_hourly_samples(engine, START_TS, END_TS, pods=older)
    finally:
        sa.event.remove(engine, "before_cursor_execute", seen)
    assert read_before == 0  # the frame given has every pod: no read
    assert sum(bool(re.search(r"\bFROM pods\b", s)) for s in statements) == 1
    pd.testing.assert_frame_equal(same, want)
    pd.testing.assert_frame_equal(got, want)
    assert want.loc[want["pod_id"] == missing, "namespace"].notna().all()


def test_auto_falls_back_to_raw_samples_at_another_threshold(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        chosen = choose_resolution(engine, START_TS, END_TS, "auto", 10.0)
    assert chosen == "raw"
    assert "gpuwatch db rollup" in caplog.text and "10%" in caplog.text


def test_auto_reads_raw_samples_that_were_never_rolled_up(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM gpu_samples_hourly"))
    assert choose_resolution(engine, START_TS, END_TS, "auto", 5.0) == "raw"


def test_auto_reads_raw_samples_until_the_detail_is_rolled_up(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """A store upgraded to migration 0004 has roll-ups without detail until `db rollup`."""
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM pod_samples_hourly"))
        conn.execute(sa.text("DELETE FROM workload_samples_hourly"))
    with caplog.at_level(logging.WARNING):
        assert choose_resolution(engine, START_TS, END_TS, "auto", 5.0) == "raw"
    assert "recommendation detail" in caplog.text and "gpuwatch db rollup" in caplog.text
    with engine.begin() as conn:
        rollup.rebuild(conn, 5.0, END_TS)
        detail = conn.execute(sa.text("SELECT count(*) FROM pod_samples_hourly")).scalar_one()
    assert detail > 0
    assert choose_resolution(engine, START_TS, END_TS, "auto", 5.0) == "hourly"


def test_an_unknown_resolution_is_refused(engine: Engine) -> None:
    with pytest.raises(ValueError, match="auto, raw, hourly"):
        choose_resolution(engine, START_TS, END_TS, "daily", 5.0)


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"GPUWATCH_DATABASE_URL": url, "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "gpuwatch", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_cli_rollup_and_compact(tmp_path: Path) -> None:
    # Six hours that ended 40 days ago: past the default raw retention (35 d), within the
    # roll-ups' (400 d), whatever today is.
    now_ts = int(datetime.now(UTC).timestamp())
    end_ts = now_ts - now_ts % 3600 - 40 * 86400
    old = generate(build_fleet(7), end_ts - 6 * 3600, end_ts, 600)
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    engine = make_engine(url)
    upgrade(engine)
    with engine.begin() as conn:
        load_simulated(conn, old)
    rebuilt = _cli(url, "db", "rollup")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "hourly roll-up rows at an idle threshold of 5%" in rebuilt.stdout
    compacted = _cli(url, "db", "compact")
    assert compacted.returncode == 0, compacted.stderr
    assert f"deleted {len(old.samples):,} raw samples before" in compacted.stdout
    assert "and 0 hourly roll-up rows" in compacted.stdout
    assert not repository.has_samples(engine, end_ts - 6 * 3600, end_ts)
    hourly = repository.load_hourly_samples(engine, end_ts - 6 * 3600, end_ts)
    assert int(hourly["samples"].sum()) == len(old.samples)
    engine.dispose()


def test_the_weekly_report_has_the_same_hours_and_dollars_from_either_source(
    engine: Engine,
) -> None:
    from gpuwatch.analytics.policy import AnalyticsPolicy
    from gpuwatch.report.weekly import weekly_report

    week_start = END_TS - 7 * 86400
    policy = AnalyticsPolicy.from_mappings({}, {})
    book = build_price_book(2.0, 0.6, {}, {})
    frames = {}
    for resolution in ("raw", "hourly"):
        data = load_inputs(engine, week_start, END_TS, resolution=resolution)
        assert data.resolution == resolution
        report = weekly_report(data.samples, data.pods, data.gpus, book, policy, week_start)
        keys = ["cluster", "namespace", "workload_kind", "workload", "gpu_model"]
        frames[resolution] = report.set_index(keys).sort_index()
    raw, hourly = frames["raw"], frames["hourly"]
    assert list(hourly.index) == list(raw.index) and len(raw) > 10
    for name in ("allocated_gpu_hours", "used_gpu_hours", "idle_gpu_hours", "idle_cost_usd"):
        np.testing.assert_allclose(hourly[name], raw[name], atol=0.011, err_msg=name)


def test_the_data_marker_keeps_the_hours_of_compacted_samples(engine: Engine) -> None:
    with engine.begin() as conn:
        rollup.compact(conn, END_TS + 400 * 86400, raw_keep_s=86400, hourly_keep_s=800 * 86400)
    marker = repository.data_marker(engine)
    assert not repository.has_samples(engine, START_TS, END_TS)
    assert marker.first_ts == START_TS
    assert marker.last_ts == END_TS - 1


def _stored_samples(engine: Engine) -> writer.SampleColumns:
    fields = ", ".join(SAMPLE_FIELDS)
    with engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT {fields} FROM gpu_samples ORDER BY ts, gpu_id"))
        return writer.SampleColumns.from_rows(rows)


def _assert_same_rows(got: list[tuple[object, ...]], want: list[tuple[object, ...]]) -> None:
    assert len(got) == len(want) > 0
    for mine, theirs in zip(got, want, strict=True):
        assert mine[:8] == theirs[:8]  # keys, counts, instants and whole seconds: exact
        for a, b in zip(mine[8:], theirs[8:], strict=True):
            assert (a is None) == (b is None)
            assert a is None or a == pytest.approx(b, rel=1e-12)


def _detail_rows(engine: Engine) -> list[tuple[object, ...]]:
    with engine.connect() as conn:
        pods = conn.execute(sa.text("SELECT * FROM pod_samples_hourly ORDER BY hour_ts, pod_id"))
        loads = conn.execute(
            sa.text(
                "SELECT * FROM workload_samples_hourly ORDER BY hour_ts, cluster_id, namespace, "
                "workload_kind, workload_name, gpu_model"
            )
        )
        return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
                for row in [*pods, *loads]]  # fmt: skip


def test_rolling_up_written_samples_in_memory_gives_the_sql_rows(engine: Engine) -> None:
    """The samples written again, hours first written by them rolled up from the page itself
    (in a thread, while the samples are written), the others from the table after the write:
    the same samples, and the rows of the SQL roll-up, detail included."""
    want, want_detail = _hourly_rows(engine), _detail_rows(engine)
    samples = writer.unique_samples(_stored_samples(engine))
    hours = sorted(set((samples.ts - samples.ts % 3600).tolist()))
    with engine.begin() as conn:
        for table in ("gpu_samples", "gpu_samples_hourly", "pod_samples_hourly",
                      "workload_samples_hourly"):  # fmt: skip
            conn.execute(sa.text(f"DELETE FROM {table}"))
        fresh = set(hours[::2])  # every other hour in memory, the others in SQL
        written = rollup.write_and_roll_up(conn, samples, fresh)
    assert written == len(samples) > 0
    _assert_same_rows(_hourly_rows(engine), want)
    assert _detail_rows(engine) == want_detail
    again = writer.unique_samples(_stored_samples(engine))
    for mine, theirs in zip(again.columns(), samples.columns(), strict=True):
        np.testing.assert_array_equal(mine, theirs)


def test_a_write_without_fresh_hours_starts_no_thread(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every hour rolled up from the table after the write (a steady minute in a stored hour):
    no roll-up runs beside the write, and the rows are the SQL roll-up's."""
    want = _hourly_rows(engine)
    samples = writer.unique_samples(_stored_samples(engine))

    def no_thread(*_: object) -> None:
        raise AssertionError("a thread was started for a write without fresh hours")

    monkeypatch.setattr(rollup.rollup_fresh, "beside", no_thread)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM gpu_samples"))
        written = rollup.write_and_roll_up(conn, samples, set())
    assert written == len(samples) > 0
    _assert_same_rows(_hourly_rows(engine), want)


def test_a_page_written_again_replaces_its_detail_rows(engine: Engine) -> None:
    """Fresh hours whose detail rows are stored (raw samples since removed): the page's rows
    replace them, none doubled."""
    want_detail = _detail_rows(engine)
    samples = writer.unique_samples(_stored_samples(engine))
    hours = set((samples.ts - samples.ts % 3600).tolist())
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM gpu_samples"))
        rollup.write_and_roll_up(conn, samples, hours)
    assert _detail_rows(engine) == want_detail


def test_only_hours_without_raw_samples_are_fresh(engine: Engine) -> None:
    with engine.connect() as conn:
        last = conn.execute(sa.text("SELECT max(ts) FROM gpu_samples")).scalar_one()
        assert rollup.unstored_hours(conn, last - 7200, last + 7200) == {
            last - last % 3600 + 3600,
            last - last % 3600 + 7200,
        }


def test_a_fresh_hour_rolled_up_in_memory_leaves_other_units_alone(engine: Engine) -> None:
    """Another cluster's collector may roll up the same hour for its own GPU units."""
    want = _hourly_rows(engine)
    samples = _stored_samples(engine)
    hour = int(samples.ts.max()) - int(samples.ts.max()) % 3600
    gpus = np.unique(samples.gpu_id)[::2]
    page = (samples.ts - samples.ts % 3600 == hour) & np.isin(samples.gpu_id, gpus)
    assert page.any() and not page.all()
    mine = writer.unique_samples(writer.SampleColumns(*(c[page] for c in samples.columns())))
    with engine.begin() as conn:
        for gpu in np.unique(mine.gpu_id).tolist():  # the page's samples, written again
            conn.execute(
                sa.text(
                    "DELETE FROM gpu_samples WHERE gpu_id = :g AND ts >= :h AND ts < :h + 3600"
                ),
                {"g": gpu, "h": hour},
            )
        rollup.write_and_roll_up(conn, mine, {hour})
    _assert_same_rows(_hourly_rows(engine), want)


def _quiet_workload(engine: Engine, hour: int) -> tuple[object, ...]:
    """Delete the samples of the last 20 minutes of ``hour`` of the pods of one workload held in
    its first 40, and roll the hour up again; returns the workload's stored row."""
    with engine.begin() as conn:
        ns, kind, name = conn.execute(
            sa.text(
                "SELECT p.namespace, p.workload_kind, p.workload_name FROM gpu_samples s "
                "JOIN pods p ON p.id = s.pod_id WHERE s.ts >= :h AND s.ts < :h + 2400 "
                "ORDER BY p.workload_name LIMIT 1"
            ),
            {"h": hour},
        ).one()
        conn.execute(
            sa.text(
                "DELETE FROM gpu_samples WHERE ts >= :h + 2400 AND ts < :h + 3600 AND pod_id IN "
                "(SELECT id FROM pods WHERE namespace = :ns AND workload_kind = :kind "
                "AND workload_name = :name)"
            ),
            {"h": hour, "ns": ns, "kind": kind, "name": name},
        )
        rollup.roll_up(conn, hour, hour + 3600)
    found = [
        r for r in _detail_rows(engine) if len(r) > 3 and r[0] == hour and r[3:5] == (kind, name)
    ]
    assert len(found) == 1 and found[0][2] == ns
    return found[0]


def test_a_page_appended_to_its_hour_merges_into_the_stored_rows(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last 20 minutes of an hour written after its first 40 were rolled up: merged, the
    rows (detail included) are those of the whole hour; where the page raised a pod's GPU count,
    the hour is rolled up from the table instead, to the same rows. One workload has no sample
    in the page: its row of the hour stays as stored."""
    samples = _stored_samples(engine)
    hour = int(samples.ts.max()) - int(samples.ts.max()) % 3600 - 3600
    quiet = _quiet_workload(engine, hour)
    want, want_detail = _hourly_rows(engine), _detail_rows(engine)
    samples = _stored_samples(engine)
    page = writer.SampleColumns(
        *(c[(samples.ts >= hour + 2400) & (samples.ts < hour + 3600)] for c in samples.columns())
    )
    pod = int(page.pod_id[~np.isnan(page.pod_id)][0])
    whole_hours: list[int] = []
    roll_up = rollup.roll_up

    def counted(conn: sa.Connection, start_ts: int, end_ts: int) -> int:
        whole_hours.append(start_ts)
        return roll_up(conn, start_ts, end_ts)

    for raised, rolled in ((set(), []), ({pod}, [hour])):
        with engine.begin() as conn:
            conn.execute(sa.text(f"DELETE FROM gpu_samples WHERE ts >= {hour + 2400} "
                                 f"AND ts < {hour + 3600}"))  # fmt: skip
            rollup.roll_up(conn, hour, hour + 3600)  # the first 40 minutes
            assert rollup_append.appended_hours(conn, 1, hour + 2400, hour + 3599, set()) == {hour}
            monkeypatch.setattr(rollup, "roll_up", counted)
            rollup.write_and_roll_up(conn, page, set(), {hour}, raised)
            monkeypatch.setattr(rollup, "roll_up", roll_up)
        assert whole_hours == rolled
        _assert_same_rows(_hourly_rows(engine), want)
        assert _detail_rows(engine) == want_detail
        assert quiet in want_detail
