"""Shared fixtures: a migrated SQLite store, a private PostgreSQL server on demand, and a
read-only demo fleet."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.cli.commands_demo import build_demo_database
from gpuwatch.simulate.generate import SimulatedData
from gpuwatch.simulate.load import load_simulated
from gpuwatch.store.engine import make_engine, upgrade
from tests.support.demo_fleet import DEMO_DAYS, DEMO_NOW_TS, DEMO_SEED, DEMO_STEP_S
from tests.support.postgres import private_postgres

_db_counter = itertools.count()


@pytest.fixture(scope="session", autouse=True)
def empty_working_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every test runs in an empty folder of its own session, not in the checkout: a
    ``gpuwatch.yaml`` there (``gpuwatch demo`` writes one) or a default ``gpuwatch.db`` would
    reach every command a test runs without ``--config``. Tests name their files in full."""
    before = Path.cwd()
    folder = tmp_path_factory.mktemp("cwd")
    os.chdir(folder)
    yield folder
    os.chdir(before)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    with private_postgres() as url:
        yield url


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """A fresh, empty database on the private server."""
    name = f"gw_test_{next(_db_counter)}"
    admin = sa.create_engine(f"{postgres_server}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    admin.dispose()
    return f"{postgres_server}/{name}"


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'gpuwatch.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str:
    """The URL of an empty database, once for SQLite and once for PostgreSQL."""
    fixture = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    return str(request.getfixturevalue(fixture))


@pytest.fixture
def migrated_engine(store_url: str) -> Iterator[Engine]:
    engine = make_engine(store_url)
    upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def simulated_engine(store_url: str, data: SimulatedData) -> Iterator[Engine]:
    """The module's simulated fleet (its ``data`` fixture) loaded into a migrated store, once
    for SQLite and once for PostgreSQL."""
    engine = make_engine(store_url)
    upgrade(engine)
    with engine.begin() as conn:
        load_simulated(conn, data)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def demo_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """The demo's simulated fleet (:mod:`tests.support.demo_fleet`), built once for the
    session: tests only read it."""
    path = Path(tmp_path_factory.mktemp("demo-fleet")) / "fleet.db"
    build_demo_database(
        path, days=DEMO_DAYS, step_s=DEMO_STEP_S, seed=DEMO_SEED, now_ts=DEMO_NOW_TS
    )
    engine = make_engine(f"sqlite:///{path}")
    yield engine
    engine.dispose()
