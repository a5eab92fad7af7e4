"""The GPU health page reads the hourly health rows of the GPUs that can be other than healthy
(or of every GPU in scope when the timeline shows them all) and shows exactly what every row in
scope gives."""

from __future__ import annotations

import pandas as pd
import pytest
from sqlalchemy import Engine

from gpuwatch.app import figures_health, views_health
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.app.figures_health import health_timeline_figure
from gpuwatch.app.views import window_bounds
from gpuwatch.app.views_health import HealthView, health_view, health_view_of, scope
from gpuwatch.app.window_health import health_window
from gpuwatch.config import Settings
from gpuwatch.store import repository
from tests.support.demo_fleet import DEMO_NOW_TS

NOW_TS = DEMO_NOW_TS
POLICY = Settings().health.policy()


@pytest.fixture
def engine(demo_fleet: Engine) -> Engine:
    return demo_fleet


def _snap(engine: Engine) -> Snapshot:
    return DashboardData(engine, Settings(), background=False).current()


def _from_every_row(snap: Snapshot, f: Filters) -> HealthView:
    rows = scope(health_window(snap, f.window), f)
    return health_view_of(rows, snap.price_book, POLICY, window_bounds(snap, f)[1])


def _assert_same_page(got: HealthView, want: HealthView) -> None:
    pd.testing.assert_frame_equal(got.entries, want.entries)
    pd.testing.assert_frame_equal(got.drain, want.drain)
    assert got.gpus == want.gpus
    assert got.readings == want.readings
    drawn = health_timeline_figure(got.timeline, {}, got.gpus)
    assert drawn == health_timeline_figure(want.timeline, {}, None)


FILTERS = [
    Filters(window="7d"),
    Filters(window="30d"),
    Filters(window="24h"),
    Filters(window="7d", cluster="research-eu"),
    Filters(window="30d", team="research"),
    Filters(window="7d", namespace="llm-serving"),
]


@pytest.mark.parametrize("f", FILTERS, ids=str)
def test_the_page_equals_the_one_every_row_in_scope_gives(engine: Engine, f: Filters) -> None:
    snap = _snap(engine)
    want = _from_every_row(snap, f)
    assert want.gpus > 0
    _assert_same_page(health_view(snap, f, POLICY), want)


@pytest.mark.parametrize("limit", [0, 5])
def test_above_the_timeline_limit_only_gpus_with_evidence_are_read(
    engine: Engine, limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(figures_health, "MAX_TIMELINE_GPUS", limit)
    monkeypatch.setattr(views_health, "MAX_TIMELINE_GPUS", limit)
    snap = _snap(engine)
    entries = 0
    for f in FILTERS:
        want = _from_every_row(snap, f)
        got = health_view(snap, f, POLICY)
        _assert_same_page(got, want)
        read = got.timeline[["cluster", "gpu_uuid"]].drop_duplicates()
        assert len(read) < got.gpus, f  # the always-healthy GPUs were not read
        entries += len(got.entries)
    assert entries > 0  # some pages list GPUs: the equality covers entries, not only empties


def test_only_gpus_with_evidence_are_candidates(engine: Engine) -> None:
    snap = _snap(engine)
    start, end = window_bounds(snap, Filters(window="30d"))
    units = set(repository.units_with_health_events(engine, start, end))
    every = repository.load_health_hourly(engine, start, end)
    sick = _from_every_row(snap, Filters(window="30d")).entries
    held = every[every["gpu_uuid"].isin(sick["gpu_uuid"])]
    assert set(held["gpu_id"].astype(int)) <= units
    assert len(units) < every["gpu_id"].nunique()
