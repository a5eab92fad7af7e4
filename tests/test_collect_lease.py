"""The collector lease's rules: acquire, renew, expire, take over, lose; on SQLite (the row with
its TTL) and on PostgreSQL (the advisory lock, with the row for who holds it)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.cli.lease_guard import Leadership
from gpuwatch.collectors.stop import Stop
from gpuwatch.config import ConfigError, load_settings
from gpuwatch.store.engine import make_engine, upgrade
from gpuwatch.store.lease import (
    UPGRADE_LOCK,
    Holding,
    Lease,
    advisory_key,
    holder_id,
    lease_name,
    may_take,
    read_all,
    row_mutex_key,
    upgrade_lock,
)

NAME = "collect:prod-us-east"
TTL_S = 45


def test_the_lease_is_named_after_the_clusters_in_any_order() -> None:
    assert lease_name(["prod-us-east"]) == "collect:prod-us-east"
    assert lease_name(["b", "a", "b"]) == "collect:a,b"


def test_the_holder_is_host_and_pid() -> None:
    assert holder_id("gpuwatch-collector-7d9f8-x2x", 1) == "gpuwatch-collector-7d9f8-x2x:1"


def test_the_advisory_key_is_a_stable_64_bit_number() -> None:
    # The first 8 bytes of sha256("collect:prod-us-east"), big-endian, signed.
    assert advisory_key(NAME) == -4999276472821686975
    assert advisory_key("collect:other") != advisory_key(NAME)


def test_may_take_when_free_own_or_expired() -> None:
    held = Holding(NAME, "a:1", acquired_ts=1000, renewed_ts=1000, expires_ts=1045)
    assert may_take(None, "b:2", 1010)
    assert may_take(held, "a:1", 1010)
    assert not may_take(held, "b:2", 1044)
    assert may_take(held, "b:2", 1045)


@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[Engine]:
    engine = make_engine(sqlite_url)
    upgrade(engine)
    yield engine
    engine.dispose()


def test_sqlite_acquire_renew_expire_take_over_and_lose(sqlite_engine: Engine) -> None:
    a = Lease(sqlite_engine, NAME, "a:1", TTL_S)
    b = Lease(sqlite_engine, NAME, "b:2", TTL_S)
    first = a.acquire(1000)
    assert first.held and a.held
    assert first.holding == Holding(NAME, "a:1", 1000, 1000, 1045)
    refused = b.acquire(1010)
    assert not refused.held and not b.held
    assert refused.holding is not None and refused.holding.holder == "a:1"
    # Renewed: the same acquisition, a later expiry.
    assert a.acquire(1020).holding == Holding(NAME, "a:1", 1000, 1020, 1065)
    assert not b.acquire(1064).held
    # a stopped renewing: b takes over once the lease expired.
    taken = b.acquire(1065)
    assert taken.held
    assert taken.holding == Holding(NAME, "b:2", 1065, 1065, 1110)
    # a comes back: it lost the lease and does not get it back while b renews.
    assert not a.acquire(1070).held and not a.held
    assert read_all(sqlite_engine) == [Holding(NAME, "b:2", 1065, 1065, 1110)]


def test_sqlite_a_released_lease_is_taken_at_once(sqlite_engine: Engine) -> None:
    a = Lease(sqlite_engine, NAME, "a:1", TTL_S)
    b = Lease(sqlite_engine, NAME, "b:2", TTL_S)
    assert a.acquire(1000).held
    a.release(1005)
    assert b.acquire(1005).held


def test_sqlite_leases_of_other_clusters_are_independent(sqlite_engine: Engine) -> None:
    assert Lease(sqlite_engine, "collect:one", "a:1", TTL_S).acquire(1000).held
    assert Lease(sqlite_engine, "collect:two", "b:2", TTL_S).acquire(1000).held


@pytest.fixture
def pg_engines(postgres_url: str) -> Iterator[tuple[Engine, Engine]]:
    """Two engines on one PostgreSQL database: two replicas' connections."""
    first, second = make_engine(postgres_url), make_engine(postgres_url)
    upgrade(first)
    yield first, second
    first.dispose()
    second.dispose()


@pytest.mark.postgres
def test_postgres_the_lock_decides_not_the_expiry(pg_engines: tuple[Engine, Engine]) -> None:
    a = Lease(pg_engines[0], NAME, "a:1", TTL_S)
    b = Lease(pg_engines[1], NAME, "b:2", TTL_S)
    assert a.acquire(1000).holding == Holding(NAME, "a:1", 1000, 1000, 1045)
    # Long past the row's expiry, a's session still holds the lock: b waits.
    refused = b.acquire(5000)
    assert not refused.held
    assert refused.holding is not None and refused.holding.holder == "a:1"
    assert a.acquire(5001).holding == Holding(NAME, "a:1", 1000, 5001, 5046)
    a.release(5002)
    taken = b.acquire(5002)
    assert taken.held
    assert taken.holding == Holding(NAME, "b:2", 5002, 5002, 5047)


@pytest.mark.postgres
def test_postgres_a_dead_holder_is_replaced_at_once(pg_engines: tuple[Engine, Engine]) -> None:
    a = Lease(pg_engines[0], NAME, "a:1", TTL_S)
    b = Lease(pg_engines[1], NAME, "b:2", TTL_S)
    assert a.acquire(1000).held
    # The server drops a vanished host's connection (and lock) within two thirds of the TTL.
    assert a._lock_conn is not None
    shown = [a._lock_conn.execute(sa.text(f"SHOW tcp_keepalives_{k}")).scalar()
             for k in ("idle", "interval", "count")]  # fmt: skip
    assert shown == ["15", "5", "3"]
    a.close()  # the holder's connection is gone, its row still says it holds the lease
    assert b.acquire(1001).held


@pytest.mark.postgres
def test_postgres_a_holder_whose_session_ends_loses_the_lease(
    pg_engines: tuple[Engine, Engine],
) -> None:
    a = Lease(pg_engines[0], NAME, "a:1", TTL_S)
    b = Lease(pg_engines[1], NAME, "b:2", TTL_S)
    assert a.acquire(1000).held
    with pg_engines[1].connect() as conn:
        ended = conn.execute(
            sa.text(
                "SELECT pg_terminate_backend(pid) FROM pg_locks "
                "WHERE locktype = 'advisory' AND granted AND database = "
                "(SELECT oid FROM pg_database WHERE datname = current_database())"
            )
        ).scalars()
        assert list(ended) == [True]
    assert b.acquire(1001).held
    lost = a.acquire(1002)
    assert not lost.held and not a.held
    assert lost.holding is not None and lost.holding.holder == "b:2"


@pytest.mark.postgres
def test_postgres_a_refused_replica_reads_the_row_only_after_the_new_holder_wrote_it(
    pg_engines: tuple[Engine, Engine], postgres_url: str
) -> None:
    a = Lease(pg_engines[0], NAME, "a:1", TTL_S)
    assert a.acquire(1000).held
    a.release(1001)  # the row still names a:1, expired
    impatient = sa.create_engine(postgres_url, connect_args={"options": "-c lock_timeout=200"})
    b = Lease(impatient, NAME, "b:2", TTL_S)
    try:
        # A third replica is between taking the lock and naming itself in the row: b waits
        # for it (here: gives up after 200 ms) instead of reading "a:1" as the holder.
        with pg_engines[1].begin() as third:
            third.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": row_mutex_key(NAME)})
            with pytest.raises(sa.exc.OperationalError, match="lock timeout"):
                b.acquire(1002)
        assert b.acquire(1003).held
    finally:
        impatient.dispose()


@pytest.mark.postgres
def test_postgres_db_upgrade_runs_one_at_a_time(pg_engines: tuple[Engine, Engine]) -> None:
    key = {"k": advisory_key(UPGRADE_LOCK)}
    try_lock = sa.text("SELECT pg_try_advisory_lock(:k)")
    with pg_engines[1].connect() as other:
        with upgrade_lock(pg_engines[0]):
            assert other.execute(try_lock, key).scalar() is False
        assert other.execute(try_lock, key).scalar() is True


def test_a_waiting_replica_says_once_who_collects_and_when_it_takes_over(
    sqlite_engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    assert Lease(sqlite_engine, NAME, "a:1", TTL_S).acquire(1000).held
    ticks = itertools.count(1000, 10)  # each look at the clock, 10 s later
    lead = Leadership(Lease(sqlite_engine, NAME, "b:2", TTL_S), "cluster prod-us-east", 0.01,
                      lambda: next(ticks))  # fmt: skip
    assert lead.wait(Stop())
    said = capsys.readouterr()
    # a's lease (until 1045) expired at b's sixth try, at 1050.
    assert said.err == (
        "collect: waiting: a:1 collects cluster prod-us-east (lease until 1970-01-01T00:17:25Z)\n"
        "collect: leading: b:2 collects cluster prod-us-east\n"
    )
    assert said.out == ""
    assert read_all(sqlite_engine) == [Holding(NAME, "b:2", 1050, 1050, 1095)]


def test_a_stop_while_waiting_ends_the_wait(sqlite_engine: Engine) -> None:
    assert Lease(sqlite_engine, NAME, "a:1", TTL_S).acquire(1000).held
    lead = Leadership(Lease(sqlite_engine, NAME, "b:2", TTL_S), "cluster x", 0.01, lambda: 1001)
    stop = Stop()
    stop.set()
    assert not lead.wait(stop)


_IN_FILE = "in config file {path}: "


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("lease_ttl: 1s", "collect.lease_ttl " + _IN_FILE + "Value error, must be at least 2s"),
        ("lease_poll: 0", "collect.lease_poll " + _IN_FILE + "Value error, must be at least 1s"),
        (
            "{lease_ttl: 10s, lease_poll: 10s}",
            "collect " + _IN_FILE + "Value error, lease_poll must be shorter than lease_ttl",
        ),
        ("holder: ''", "collect.holder " + _IN_FILE + "String should have at least 1 character"),
    ],
)
def test_a_bad_lease_setting_names_the_key_and_the_file(
    tmp_path: Path, section: str, message: str
) -> None:
    path = tmp_path / "gpuwatch.yaml"
    body = section if section.startswith("{") else "\n  " + section
    path.write_text(f"collect: {body}\n")
    with pytest.raises(ConfigError) as error:
        load_settings(str(path), environ={})
    assert str(error.value).startswith(message.format(path=path))


def test_the_lease_settings_default_to_a_takeover_within_a_minute() -> None:
    config = load_settings(None, environ={}).collect
    assert (config.lease_ttl.total_seconds(), config.lease_poll.total_seconds()) == (45, 5)
    assert config.holder is None
