"""Cost rows summed by the store (daily sums) equal the snapshot's, window by window."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.analytics.costing import node_level_units, prepare
from gpuwatch.app import rollup, views
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.app.window_costs import WindowSums, window_sums
from gpuwatch.cli.commands_demo import build_demo_database
from gpuwatch.config import Settings
from gpuwatch.store import daily, repository
from gpuwatch.store.engine import make_engine
from tests.support.node_level import strip_pod_labels_of_one_node

NOW_TS = 1_794_823_200  # Monday 2026-11-16 10:00 UTC: windows start and end inside a UTC day
KEYS = ["gpu_id", "pod_id"]
#: Readings the hourly rows keep as float32 (rollup.compact): the store's are float64.
FLOAT32 = ("temp_c_max", "power_w_max")
SUMMED = ("samples", "data_hours", "util_hours", "xid_hours", "prof_samples", "dev_samples")
TEXT = ["cluster", "node", "gpu_model", "allocation", "namespace", "pod", "workload", "team"]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    path = Path(tmp_path_factory.mktemp("fleet")) / "fleet.db"
    build_demo_database(path, days=16, step_s=900, seed=11, now_ts=NOW_TS)
    engine = make_engine(f"sqlite:///{path}")
    strip_pod_labels_of_one_node(engine, NOW_TS)
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def snap(engine: Engine) -> Snapshot:
    return DashboardData(engine, Settings(), background=False).current()


def _by_unit_and_pod(rows: pd.DataFrame) -> pd.DataFrame:
    sums = rows.groupby(KEYS)[list(rollup.COST_SUMS)].sum()
    text = rows.drop_duplicates(KEYS).set_index(KEYS)[TEXT].astype(object)
    return sums.join(text).sort_index()


def _store_sums(snap: Snapshot, engine: Engine, start_ts: int, end_ts: int) -> WindowSums:
    return window_sums(
        engine,
        snap.pods,
        snap.price_book,
        snap.policy.idle_threshold_ratio,
        (start_ts, end_ts),
    )


def _store_rows(snap: Snapshot, engine: Engine, start_ts: int, end_ts: int) -> pd.DataFrame:
    return _store_sums(snap, engine, start_ts, end_ts).cost


def _hourly_reference(snap: Snapshot, engine: Engine, start_ts: int, end_ts: int) -> pd.DataFrame:
    """The window's cost rows as the analytics compute them over its hourly rows (what the
    snapshot summed before the store did, and what ``gpuwatch recommend`` sums)."""
    hourly = repository.load_hourly_samples(engine, start_ts, end_ts, health=False)
    rows = rollup.compact(prepare(hourly, snap.pods, snap.price_book))
    days = rows["ts"].to_numpy() // 86_400 * 86_400
    return rollup.cost_sums(rows, days, snap.policy.idle_threshold_ratio)


def _assert_same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.index) == list(want.index)
    for name in rollup.COST_SUMS:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-9, atol=1e-9, err_msg=name)
    for name in TEXT:
        assert got[name].fillna("-").tolist() == want[name].fillna("-").tolist(), name


@pytest.mark.parametrize("window", ["24h", "3d", "7d"])
def test_the_store_sums_a_window_as_the_hourly_rows_do(
    snap: Snapshot, engine: Engine, window: str
) -> None:
    start, end = views.window_bounds(snap, Filters(window=window))
    assert end % 86_400 != 0  # the window cuts two UTC days: hourly rows at both ends
    want = _by_unit_and_pod(_hourly_reference(snap, engine, start, end))
    _assert_same(_by_unit_and_pod(_store_rows(snap, engine, start, end)), want)
    assert want["allocated_cost_usd"].sum() > 0 and want["unallocated_cost_usd"].sum() > 0


def _unit_readings(rows: pd.DataFrame) -> pd.DataFrame:
    """Per unit, over costed hourly rows: the readings' sums and peaks as the GPU pages use
    them (hours with an XID counted once however many pods shared them)."""
    hours = rows["data_hours"].to_numpy(dtype="float64")
    signal = rows["util_signal"].astype(object)
    fb_total = rows["fb_total_mib"].to_numpy(dtype="float64", na_value=np.nan)
    frame = pd.DataFrame(
        {
            "gpu_id": rows["gpu_id"].to_numpy(),
            "samples": rows["samples"].to_numpy(dtype="float64"),
            "data_hours": hours,
            "util_hours": hours * rows["util_ratio"].to_numpy(dtype="float64"),
            "prof_samples": np.where(signal.eq("prof_gr_engine_active"), rows["samples"], 0),
            "dev_samples": np.where(signal.eq("dev_gpu_util"), rows["samples"], 0),
            "fb_used_ratio_max": rows["fb_used_mib"].to_numpy(dtype="float64") / fb_total,
            "temp_c_max": rows["temp_c"].to_numpy(dtype="float64", na_value=np.nan),
            "power_w_max": rows["power_w"].to_numpy(dtype="float64", na_value=np.nan),
            "xid_last": rows["xid"].to_numpy(dtype="float64"),
        }
    )
    grouped = frame.groupby("gpu_id")
    out = grouped[[n for n in SUMMED if n != "xid_hours"]].sum()
    out = out.join(grouped[list(rollup.GPU_PEAKS)].max())
    with_xid = rows[rows["xid"].to_numpy() != 0]
    out["xid_hours"] = with_xid.groupby("gpu_id")["ts"].nunique().reindex(out.index).fillna(0)
    return out


@pytest.mark.parametrize("window", ["24h", "7d"])
def test_the_store_gives_each_units_readings_as_the_hourly_rows_do(
    snap: Snapshot, engine: Engine, window: str
) -> None:
    start, end = views.window_bounds(snap, Filters(window=window))
    hourly = repository.load_hourly_samples(engine, start, end)
    rows = rollup.compact(prepare(hourly, snap.pods, snap.price_book))
    want = _unit_readings(rows)
    want["step_s"] = rollup.unit_steps(rows)
    got_rows = _store_sums(snap, engine, start, end).gpu.groupby("gpu_id")
    got = got_rows[list(SUMMED)].sum().join(got_rows[list(rollup.GPU_PEAKS)].max())
    got["step_s"] = got_rows["step_s"].max()
    assert list(got.index) == list(want.index)
    for name in [*SUMMED, *rollup.GPU_PEAKS, "step_s"]:
        rtol = 1e-6 if name in FLOAT32 else 1e-9
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=1e-9, err_msg=name)
    assert want["xid_hours"].sum() > 0 and want["prof_samples"].sum() > 0
    assert want["dev_samples"].sum() > 0 and want["temp_c_max"].max() > 0


def test_the_pages_cost_rows_are_the_stores(snap: Snapshot, engine: Engine) -> None:
    f = Filters(window="3d", cluster="prod-us-east")
    start, end = views.window_bounds(snap, f)
    want = _hourly_reference(snap, engine, start, end)
    want = _by_unit_and_pod(want[want["cluster"].astype(object).eq("prod-us-east")])
    _assert_same(_by_unit_and_pod(views.cost_rows(snap, f)), want)


def test_whole_days_came_from_daily_sums(snap: Snapshot, engine: Engine) -> None:
    start, end = views.window_bounds(snap, Filters(window="7d"))
    assert daily.read_sums(engine, start, end).daily_days == 6
    with engine.connect() as conn:
        built = conn.execute(
            sa.text("SELECT COUNT(*) FROM gpu_daily_state WHERE built_version = version")
        ).scalar_one()
        rows = conn.execute(sa.text("SELECT COUNT(*) FROM gpu_samples_daily")).scalar_one()
    assert built >= 6 and rows > 0


def test_the_demo_has_units_attributed_by_node(snap: Snapshot, engine: Engine) -> None:
    """The comparison above covers node-level attribution: the demo fleet has such units."""
    start, end = views.window_bounds(snap, Filters(window="7d"))
    samples = repository.load_hourly_samples(engine, start, end, health=False)
    assert len(node_level_units(samples, snap.pods)) > 0


def test_a_window_older_than_the_snapshot_is_answered(snap: Snapshot, engine: Engine) -> None:
    """Fifteen days back: further than the snapshot's 14-day comparisons reach, same sums as
    the hourly rows summed directly."""
    end = snap.end_ts - 7 * 86_400
    start = end - 8 * 86_400
    got = _store_rows(snap, engine, start, end)
    hourly = repository.load_hourly_samples(engine, start, end, health=False)
    assert int(got["samples"].sum()) == int(hourly["samples"].sum()) > 0
