"""A dashboard on a small simulated fleet, for page tests that call layouts and callbacks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dash import Dash
from sqlalchemy import Engine

from gpuwatch.app.data import DashboardData
from gpuwatch.app.server import create_app
from gpuwatch.cli.commands_demo import build_demo_database
from gpuwatch.config import Settings
from gpuwatch.store.engine import make_engine

#: The instant the test fleets end at: 2026-11-16 10:00 UTC, a Monday.
NOW_TS = 1_794_823_200


@contextmanager
def demo_engine(folder: Path, *, days: int, step_s: int, seed: int) -> Iterator[Engine]:
    """A demo fleet of ``days`` built in ``folder``, ending at :data:`NOW_TS`."""
    path = folder / "fleet.db"
    build_demo_database(path, days=days, step_s=step_s, seed=seed, now_ts=NOW_TS)
    engine = make_engine(f"sqlite:///{path}")
    try:
        yield engine
    finally:
        engine.dispose()


@contextmanager
def demo_app(
    folder: Path, settings: Settings | None = None, *, days: int = 2, step_s: int = 3600,
    seed: int = 7,
) -> Iterator[Dash]:  # fmt: skip
    """The app on a demo fleet of ``days`` built in ``folder``, inside its Flask context (the
    snapshot is built when asked for, not in the background)."""
    path = folder / "fleet.db"
    build_demo_database(path, days=days, step_s=step_s, seed=seed, now_ts=NOW_TS)
    engine = make_engine(f"sqlite:///{path}")
    settings = settings or Settings()
    data = DashboardData(engine, settings, background=False)
    dash_app = create_app(engine, settings, data=data, warm=False)
    try:
        with dash_app.server.app_context():
            yield dash_app
    finally:
        engine.dispose()
