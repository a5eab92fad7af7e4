"""The warm-up after new data computes the default views and the windows pages asked for
lately, and forgets windows nobody asked for since; pages keep the current snapshot until the
next one is warm."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

import pytest
from sqlalchemy import Engine, text

from gpuwatch.app.data import ASKED_KEEP_S, DEFAULT_WINDOW, DashboardData, Snapshot
from gpuwatch.app.server import create_app, data_source
from gpuwatch.app.views import recommendations_key, window_recommendations
from gpuwatch.app.views_store import default_week, weekly, weekly_key
from gpuwatch.app.windows import PRESETS
from gpuwatch.config import Settings
from gpuwatch.config.sections import DashboardSettings, WarmWindow
from tests.support.dash_app import demo_engine


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    with demo_engine(Path(tmp_path_factory.mktemp("fleet")), days=4, step_s=1800, seed=3) as engine:
        yield engine


def _new_data(engine: Engine) -> None:
    """What a collection round does to the data version: a later ``updated_ts``."""
    with engine.begin() as conn:
        conn.execute(text("UPDATE collection_state SET updated_ts = updated_ts + 60"))


def test_the_warm_up_computes_the_windows_pages_asked_for(engine: Engine) -> None:
    now = [10_000.0]
    settings = Settings()
    data = DashboardData(engine, settings, background=False, refresh_s=0, clock=lambda: now[0])
    app = create_app(engine, settings, data=data, warm=False)
    asked, default, unasked = (recommendations_key(w) for w in ("3d", "7d", "30d"))
    with app.server.app_context():
        first = data.current()
        data.warm(first)
        assert default in first._pinned and not first.asked  # the warm-up is nobody's ask
        window_recommendations(first, "3d")  # a page asks for the 3-day window
        assert first.asked[asked] == 10_000.0 and default not in first.asked

        _new_data(engine)
        now[0] += 600
        second = data.current()
        assert second is not first and second.asked[asked] == 10_000.0
        assert asked not in second._pinned
        data.warm(second)
        assert {asked, default} <= set(second._pinned) and unasked not in second._pinned

        _new_data(engine)
        now[0] = 10_000.0 + ASKED_KEEP_S + 1  # nobody asked for it again
        third = data.current()
        assert third is not second and not third.asked
        data.warm(third)
        assert default in third._pinned and asked not in third._pinned


def test_new_data_serves_the_current_snapshot_until_the_next_one_is_warm(engine: Engine) -> None:
    now = [20_000.0]
    settings = Settings()
    data = DashboardData(engine, settings, background=True, refresh_s=0, clock=lambda: now[0])
    app = create_app(engine, settings, data=data, warm=False)
    started, release = threading.Event(), threading.Event()

    def held_warm_up(snapshot: Snapshot) -> None:
        window_recommendations(snapshot, DEFAULT_WINDOW)
        started.set()
        assert release.wait(timeout=120), "the test never released the warm-up"

    with app.server.app_context():
        first = data.current()  # no snapshot yet: read now, served cold
        data.warmers = [held_warm_up]
        _new_data(engine)
        assert data.current() is first  # the next one is read in the background
        assert started.wait(timeout=120), "the warm-up never started"
        assert data.current() is first and data.current() is first  # still warming up
        window_recommendations(first, "3d")  # a page asks meanwhile
        release.set()
        assert data.rebuild_thread is not None
        data.rebuild_thread.join(timeout=120)
        assert not data.rebuild_thread.is_alive()
        second = data.current()
    assert second is not first
    assert second.marker != first.marker
    assert recommendations_key(DEFAULT_WINDOW) in second._pinned  # warm when it first serves
    assert second.asked[recommendations_key("3d")] == 20_000.0  # the ask made meanwhile


def test_the_store_is_checked_as_often_as_the_settings_say(engine: Engine) -> None:
    for given, expected in (({"refresh_s": 300}, 300.0), ({}, 60.0)):
        settings = Settings.model_validate({"dashboard": given})
        app = create_app(engine, settings, warm=False)
        with app.server.app_context():
            assert data_source().data.refresh_s == expected


def test_the_week_s_report_is_warmed_first_then_only_when_a_page_asked(engine: Engine) -> None:
    now = [30_000.0]
    settings = Settings()
    data = DashboardData(engine, settings, background=False, refresh_s=0, clock=lambda: now[0])
    app = create_app(engine, settings, data=data, warm=False)
    with app.server.app_context():
        first = data.current()
        data.warm(first)
        week = default_week(first)
        assert week is not None and first.first and weekly_key(week) in first._pinned

        _new_data(engine)
        second = data.current()
        data.warm(second)
        assert not second.first and weekly_key(week) not in second._pinned  # nobody asked
        weekly(data, second, week)  # the Reports page asks for it

        _new_data(engine)
        now[0] += 60
        third = data.current()
        data.warm(third)
        assert weekly_key(week) in third._pinned and third.asked[weekly_key(week)] == 30_000.0


def test_the_warm_up_computes_the_windows_set_to_be_warm(engine: Engine) -> None:
    settings = Settings(dashboard=DashboardSettings(warm_windows=["3d", "14d", "3d"]))
    warm_set = DashboardData(engine, settings, background=False)
    plain = DashboardData(engine, Settings(), background=False)
    for data, expected in ((warm_set, True), (plain, False)):
        app = create_app(engine, data.settings, data=data, warm=False)
        with app.server.app_context():
            snapshot = data.current()
            data.warm(snapshot)
        for window in ("3d", "14d"):
            assert (recommendations_key(window) in snapshot._pinned) is expected, window
        assert recommendations_key("30d") not in snapshot._pinned
        assert not snapshot.asked  # the warm-up is nobody's ask


def test_the_windows_that_may_be_warm_are_the_filter_bars_presets() -> None:
    assert set(get_args(WarmWindow)) == set(PRESETS)
