"""The dashboard on hourly roll-ups: raw samples past the retention change no figure, one
GPU's history falls back to roll-ups, gaps are found at hour grain."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import Engine, text

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.summary import sample_measures
from gpuwatch.analytics.totals import data_span
from gpuwatch.app import snapshot, views, views_gpu, views_store
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.app.windows import ROLLING
from gpuwatch.cli.commands_demo import build_demo_database
from gpuwatch.config import Settings
from gpuwatch.store import rollup as store_rollup
from gpuwatch.store.engine import make_engine

NOW_TS = 1_794_823_200  # a Monday 12:00 UTC
DAY_S = 86400
RAW_KEEP_S = 2 * DAY_S
FILTERS = [Filters(), Filters(window="24h"), Filters(window="3d"), Filters(team="ml-platform")]


@pytest.fixture(scope="module")
def fleet_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("fleet")) / "fleet.db"
    build_demo_database(path, days=5, step_s=900, seed=7, now_ts=NOW_TS)
    return path


def _engine(path: Path) -> Engine:
    return make_engine(f"sqlite:///{path}")


@pytest.fixture(scope="module")
def full(fleet_path: Path) -> Iterator[tuple[DashboardData, Snapshot]]:
    engine = _engine(fleet_path)
    data = DashboardData(engine, Settings(), background=False)
    yield data, data.current()
    engine.dispose()


@pytest.fixture(scope="module")
def compacted(
    fleet_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[DashboardData, Snapshot]]:
    path = Path(tmp_path_factory.mktemp("compacted")) / "fleet.db"
    shutil.copy(fleet_path, path)
    engine = _engine(path)
    with engine.begin() as conn:
        done = store_rollup.compact(conn, NOW_TS, RAW_KEEP_S, 400 * DAY_S)
    assert done.raw_deleted > 0
    data = DashboardData(engine, Settings(), background=False)
    yield data, data.current()
    engine.dispose()


def test_the_span_outlives_the_raw_samples(
    full: tuple[DashboardData, Snapshot], compacted: tuple[DashboardData, Snapshot]
) -> None:
    (_, before), (_, after) = full, compacted
    first_raw, old_raw = after.marker.raw_first_ts, before.marker.raw_first_ts
    assert first_raw is not None and old_raw is not None
    assert first_raw > old_raw  # raw samples are gone...
    assert after.marker.first_ts == before.marker.first_ts  # ...the roll-ups are not
    assert after.span_start_ts == before.span_start_ts
    assert after.raw_from_ts == first_raw - first_raw % 3600
    assert views_store.report_weeks(after) == views_store.report_weeks(before)
    assert len(views_store.report_weeks(after)) == 2


@pytest.mark.parametrize("f", FILTERS, ids=lambda f: str(f.query()) or "default")
def test_compaction_changes_no_figure(
    full: tuple[DashboardData, Snapshot], compacted: tuple[DashboardData, Snapshot], f: Filters
) -> None:
    (_, before), (_, after) = full, compacted
    assert views.headline(after, f) == pytest.approx(views.headline(before, f))
    assert views.headline(after, f).capacity_gpu_hours > 0
    pd.testing.assert_frame_equal(
        views.breakdown(after, f, ("team",)), views.breakdown(before, f, ("team",))
    )
    pd.testing.assert_frame_equal(views.capacity_series(after, f), views.capacity_series(before, f))
    pd.testing.assert_frame_equal(views.recommendations(after, f), views.recommendations(before, f))
    pd.testing.assert_frame_equal(
        views_gpu.health_by_node(after, f), views_gpu.health_by_node(before, f)
    )


def _totals(history: pd.DataFrame) -> dict[str, float]:
    m = sample_measures(history, Settings().thresholds.idle_util_pct / 100)
    return {name: float(np.sum(v)) for name, v in m.items()}


def test_gpu_history_falls_back_to_hourly_rows(
    full: tuple[DashboardData, Snapshot], compacted: tuple[DashboardData, Snapshot]
) -> None:
    (data_before, before), (data_after, after) = full, compacted
    f = Filters(window="7d")
    rows = views.hourly_rows(before, f)
    gpu_id = int(rows.loc[rows[c.ALLOCATED], "gpu_id"].iloc[0])
    raw = views_store.gpu_history(data_before, before, gpu_id, f)
    mixed = views_store.gpu_history(data_after, after, gpu_id, f)
    old = mixed["ts"] < after.raw_from_ts
    assert old.any() and (~old).any()
    assert mixed.loc[old, "span_s"].eq(3600).all() and mixed.loc[~old, "span_s"].eq(900).all()
    assert mixed.loc[old, "ts"].mod(3600).eq(0).all()
    assert raw["span_s"].eq(900).all() and len(raw) > len(mixed)
    # the cost model's sums are exact on roll-ups: the same totals either way
    assert _totals(mixed) == pytest.approx(_totals(raw), rel=1e-9)
    assert mixed["temp_c"].max() == raw["temp_c"].max()


@pytest.mark.parametrize("window", list(ROLLING))
def test_the_data_window_is_where_the_hourly_rows_lie(
    full: tuple[DashboardData, Snapshot], compacted: tuple[DashboardData, Snapshot], window: str
) -> None:
    """The store's two probes of the roll-ups' key find the span ``data_span`` finds in the
    window's hourly rows, before and after compaction."""
    days = ROLLING[window]
    for _, snap in (full, compacted):
        f = Filters(window=window)
        rows = views.hourly_rows(snap, f)
        assert views.data_window(snap, window) == data_span(rows, *views.window_bounds(snap, f))
        first = max(snap.end_ts - int(days * DAY_S), NOW_TS - 5 * DAY_S)
        assert views.data_window(snap, window) == (first, NOW_TS)


def test_pages_read_the_store_when_they_ask(fleet_path: Path, tmp_path: Path) -> None:
    """The snapshot keeps no samples: a window's hourly rows are read when a page first asks
    for them, so hours the store lost after the snapshot was read are not shown."""
    path = tmp_path / "late.db"
    shutil.copy(fleet_path, path)
    engine = _engine(path)
    snap = DashboardData(engine, Settings(), background=False).current()
    assert snap.end_ts == NOW_TS
    with engine.begin() as conn:
        conn.execute(
            text("DELETE FROM gpu_samples_hourly WHERE hour_ts >= :a"), {"a": NOW_TS - 7200}
        )
    rows = views.hourly_rows(snap, Filters(window="24h"))
    assert int(rows["ts"].min()) == NOW_TS - DAY_S and int(rows["ts"].max()) == NOW_TS - 3 * 3600
    assert views.data_window(snap, "24h") == (NOW_TS - DAY_S, NOW_TS - 7200)
    engine.dispose()


def test_a_hole_in_the_samples_is_one_gap_at_hour_grain(
    fleet_path: Path, tmp_path: Path, full: tuple[DashboardData, Snapshot]
) -> None:
    _, before = full
    unit = before.units.iloc[0]
    gpu_id, start = int(unit["gpu_id"]), NOW_TS - 2 * DAY_S + 1800
    path = tmp_path / "holed.db"
    shutil.copy(fleet_path, path)
    engine = _engine(path)
    with engine.begin() as conn:
        deleted = conn.execute(
            text("DELETE FROM gpu_samples WHERE gpu_id = :g AND ts >= :a AND ts < :b"),
            {"g": gpu_id, "a": start, "b": start + 5400},
        )
        assert deleted.rowcount == 6
        store_rollup.roll_up(conn, start, start + 5400)
    after = DashboardData(engine, Settings(), background=False).current()
    node = {"cluster": unit["cluster"], "node": unit["node"]}

    def gaps(snap: Snapshot) -> tuple[int, int]:
        frame = views_gpu.health_by_node(snap, Filters())
        row = frame[frame["cluster"].eq(node["cluster"]) & frame["node"].eq(node["node"])]
        return int(row["gaps"].fillna(0).iloc[0]), int(row["gap_s"].fillna(0).iloc[0])

    (n_before, s_before), (n_after, s_after) = gaps(before), gaps(after)
    assert (n_after, s_after) == (n_before + 1, s_before + 5400)
    engine.dispose()


def test_memo_keeps_a_byte_budget(
    full: tuple[DashboardData, Snapshot], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, snap = full
    monkeypatch.setattr(snapshot, "MEMO_BYTES", 3 * 8000 + 100)
    snap.forget()
    calls: list[int] = []

    def frame(i: int) -> pd.DataFrame:
        calls.append(i)
        return pd.DataFrame({"x": np.zeros(1000)})  # 8,000 bytes (and an index)

    for i in range(5):
        snap.memo(("bytes", i), lambda i=i: frame(i))
    snap.memo(("bytes", 4), lambda: frame(-1))
    snap.memo(("bytes", 0), lambda: frame(-2))
    assert -1 not in calls and -2 in calls  # the newest kept, the oldest evicted
    snap.forget()
