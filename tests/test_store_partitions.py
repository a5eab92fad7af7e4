"""Raw samples partitioned by UTC day on PostgreSQL (schema 0009); SQLite unchanged.

Real PostgreSQL (the private server of tests/conftest.py) and SQLite.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy import Connection, Engine

from gpuwatch.cli.commands_db import describe_compaction
from gpuwatch.collectors import collect
from gpuwatch.collectors.dcgm import page_samples
from gpuwatch.domain.labels import LabelVariants
from gpuwatch.store import partitions, rollup, writer
from gpuwatch.store.engine import alembic_config, current_revision, head_revision, make_engine
from gpuwatch.store.engine import upgrade as upgrade_store

D0 = 1_763_251_200  # 2025-11-16T00:00:00Z
DAY = 86_400
HOUR = 3_600
P16, P17, P18, P19 = (f"gpu_samples_p202511{day}" for day in (16, 17, 18, 19))
DEFAULT = "gpu_samples_default"


def _one_gpu(conn: Connection) -> None:
    conn.execute(sa.text("INSERT INTO clusters (id, name) VALUES (1, 'c')"))
    conn.execute(
        sa.text(
            "INSERT INTO gpus (id, cluster_id, uuid, mig_gi_id, slot, timeslice_replicas,"
            " first_seen_ts, last_seen_ts) VALUES (1, 1, 'GPU-1', -1, 0, 1, 0, 0)"
        )
    )


def _write(conn: Connection, stamps: list[int], step_s: int = 60) -> None:
    """One sample of GPU 1 at each instant, utilization 0.5, through the store's writer."""
    rows = [(1, ts, step_s, None, 0.5, 1, None, None, None, None, None) for ts in stamps]
    writer.write_samples(conn, rows)


def _partitions_listed(conn: Connection) -> set[str]:
    """The partitions of gpu_samples, from PostgreSQL's catalogue (not the code under test)."""
    rows = conn.execute(
        sa.text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'gpu_samples'::regclass"
        )
    )
    return {str(r[0]) for r in rows}


def _where(conn: Connection) -> list[tuple[int, str]]:
    """Each sample's instant and the partition holding it."""
    rows = conn.execute(sa.text("SELECT ts, tableoid::regclass::text FROM gpu_samples ORDER BY ts"))
    return [(int(r[0]), str(r[1])) for r in rows]


@pytest.fixture
def pg(postgres_url: str) -> Iterator[Engine]:
    engine = make_engine(postgres_url)
    upgrade_store(engine)
    with engine.begin() as conn:
        _one_gpu(conn)
    yield engine
    engine.dispose()


@pytest.mark.postgres
def test_upgrading_0008_partitions_every_row_and_downgrading_restores_a_plain_table(
    postgres_url: str,
) -> None:
    engine = make_engine(postgres_url)
    cfg = alembic_config(engine)
    stamps = [D0 + 60, D0 + HOUR, D0 + DAY + 120, D0 + 3 * DAY]  # no sample on the 18th
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0008")
        _one_gpu(conn)
        values = ", ".join(f"(1, {ts}, 60, {n / 10})" for n, ts in enumerate(stamps))
        conn.execute(
            sa.text(f"INSERT INTO gpu_samples (gpu_id, ts, step_s, util_ratio) VALUES {values}")
        )
    upgrade_store(engine)
    assert current_revision(engine) == head_revision()
    with engine.connect() as conn:
        assert (
            conn.execute(
                sa.text(
                    "SELECT partstrat FROM pg_partitioned_table"
                    " WHERE partrelid = 'gpu_samples'::regclass"
                )
            ).scalar_one()
            == "r"
        )
        assert _partitions_listed(conn) == {DEFAULT, P16, P17, P19}
        assert _where(conn) == [
            (D0 + 60, P16),
            (D0 + HOUR, P16),
            (D0 + DAY + 120, P17),
            (D0 + 3 * DAY, P19),
        ]
        rows = conn.execute(
            sa.text("SELECT gpu_id, ts, step_s, util_ratio FROM gpu_samples ORDER BY ts")
        ).all()
        assert [tuple(r) for r in rows] == [
            (1, D0 + 60, 60, 0.0),
            (1, D0 + HOUR, 60, 0.1),
            (1, D0 + DAY + 120, 60, 0.2),
            (1, D0 + 3 * DAY, 60, 0.3),
        ]
        cfg.attributes["connection"] = conn
        command.check(cfg)  # the partitioned table still matches the models
    inspector = sa.inspect(engine)
    assert inspector.get_pk_constraint("gpu_samples")["constrained_columns"] == ["ts", "gpu_id"]
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0008")
    with engine.connect() as conn:
        kind = conn.execute(sa.text("SELECT relkind FROM pg_class WHERE relname = 'gpu_samples'"))
        assert kind.scalar_one() == "r"
        # A plain table: nothing to create or drop.
        assert partitions.ensure_partitions(conn, D0, D0 + 5 * DAY) == []
        assert partitions.drop_partitions_before(conn, D0 + 5 * DAY) == []
        left = conn.execute(
            sa.text(
                "SELECT count(*) FROM pg_class"
                " WHERE relname LIKE 'gpu_samples\\_p%' OR relname = :d"
            ),
            {"d": DEFAULT},
        )
        assert left.scalar_one() == 0
        rows = conn.execute(
            sa.text("SELECT gpu_id, ts, step_s, util_ratio FROM gpu_samples ORDER BY ts")
        ).all()
        assert [tuple(r) for r in rows] == [
            (1, D0 + 60, 60, 0.0),
            (1, D0 + HOUR, 60, 0.1),
            (1, D0 + DAY + 120, 60, 0.2),
            (1, D0 + 3 * DAY, 60, 0.3),
        ]
    inspector = sa.inspect(engine)
    assert inspector.get_pk_constraint("gpu_samples")["constrained_columns"] == ["ts", "gpu_id"]
    assert [
        (ix["name"], ix["column_names"], ix["unique"])
        for ix in inspector.get_indexes("gpu_samples")
    ] == [("ix_gpu_samples_gpu_id_ts", ["gpu_id", "ts"], True)]
    engine.dispose()


def _page(stamps: list[int]) -> Any:
    """A collected page: one GPU's utilization at each instant."""
    metric = {"UUID": "GPU-page", "Hostname": "node-a", "modelName": "NVIDIA L4"}
    results = {"util_prof": [{"metric": metric, "values": [[ts, "0.5"] for ts in stamps]}]}
    return page_samples(results, LabelVariants(), 60, keep_device_slots=True)


def test_a_page_spanning_three_days_creates_exactly_those_days(store_url: str) -> None:
    engine = make_engine(store_url)
    upgrade_store(engine)
    tables = set(sa.inspect(engine).get_table_names())
    stamps = [D0 + DAY - 60, D0 + DAY + 600, D0 + 2 * DAY + 60]  # the 16th, 17th and 18th
    with engine.begin() as conn:
        cluster_id = writer.ensure_cluster(conn, "lab")
        written = collect._write_page(conn, cluster_id, _page(stamps), None, 60)[0]
    assert written == 3
    with engine.begin() as conn:  # the same page again: an upsert of stored rows
        assert collect._write_page(conn, cluster_id, _page(stamps), None, 60)[0] == 3
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            assert _partitions_listed(conn) == {DEFAULT, P16, P17, P18}
            assert _where(conn) == [
                (D0 + DAY - 60, P16),
                (D0 + DAY + 600, P17),
                (D0 + 2 * DAY + 60, P18),
            ]
        else:
            assert partitions.ensure_partitions(conn, D0, D0 + 5 * DAY) == []
            assert set(sa.inspect(engine).get_table_names()) == tables  # nothing changes
            count = conn.execute(sa.text("SELECT count(*) FROM gpu_samples")).scalar_one()
            assert count == 3
    engine.dispose()


def _waiting_on_a_lock(engine: Engine, pid: int) -> bool:
    with engine.connect() as conn:
        found = conn.execute(
            sa.text("SELECT wait_event_type FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
        ).scalar()
    return found == "Lock"


@pytest.mark.postgres
def test_two_writers_ensuring_the_same_days_at_once_both_succeed(pg: Engine) -> None:
    results: dict[str, Any] = {}
    second_pid: list[int] = []

    def second_writer() -> None:
        try:
            with pg.begin() as conn:
                second_pid.append(
                    int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())
                )
                results["second"] = partitions.ensure_partitions(conn, D0, D0 + 2 * DAY)
                _write(conn, [D0 + 120, D0 + 2 * DAY + 120])
        except Exception as error:
            results["error"] = error

    with pg.begin() as first:
        results["first"] = partitions.ensure_partitions(first, D0, D0 + 2 * DAY)
        thread = threading.Thread(target=second_writer)
        thread.start()
        deadline = time.monotonic() + 60
        while not (second_pid and _waiting_on_a_lock(pg, second_pid[0])):
            assert time.monotonic() < deadline, "the second writer never waited for the first"
            assert thread.is_alive(), results
            time.sleep(0.05)  # the interval of the poll, not the synchronisation
        _write(first, [D0 + 60, D0 + DAY + 60])
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert "error" not in results, results["error"]
    assert results["first"] == [P16, P17, P18]
    assert results["second"] == []  # the first writer's days, found once it committed
    with pg.connect() as conn:
        assert _partitions_listed(conn) == {DEFAULT, P16, P17, P18}
        assert _where(conn) == [
            (D0 + 60, P16),
            (D0 + 120, P16),
            (D0 + DAY + 60, P17),
            (D0 + 2 * DAY + 120, P18),
        ]


@pytest.mark.postgres
def test_a_row_in_the_default_partition_moves_into_its_new_day(pg: Engine) -> None:
    with pg.begin() as conn:
        _write(conn, [D0 + DAY + 60, D0 + DAY + 120, D0 + 3 * DAY])  # no day partition yet
    with pg.connect() as conn:
        assert _where(conn) == [
            (D0 + DAY + 60, DEFAULT),
            (D0 + DAY + 120, DEFAULT),
            (D0 + 3 * DAY, DEFAULT),
        ]
    with pg.begin() as conn:
        assert partitions.ensure_partitions(conn, D0 + DAY, D0 + DAY + 1) == [P17]
        assert partitions.ensure_partitions(conn, D0 + DAY, D0 + DAY + 1) == []  # idempotent
    with pg.connect() as conn:
        assert _where(conn) == [
            (D0 + DAY + 60, P17),
            (D0 + DAY + 120, P17),
            (D0 + 3 * DAY, DEFAULT),
        ]
        values = conn.execute(
            sa.text("SELECT util_ratio, step_s FROM gpu_samples WHERE ts < :t"), {"t": D0 + 2 * DAY}
        ).all()
        assert [tuple(v) for v in values] == [(0.5, 60), (0.5, 60)]


def _hourly(conn: Connection) -> list[tuple[int, int]]:
    rows = conn.execute(sa.text("SELECT hour_ts, samples FROM gpu_samples_hourly ORDER BY hour_ts"))
    return [(int(r[0]), int(r[1])) for r in rows]


def test_compact_drops_the_days_before_the_cut_and_deletes_the_older_rest(store_url: str) -> None:
    engine = make_engine(store_url)
    upgrade_store(engine)
    stamps = [
        D0,
        D0 + 12 * HOUR,
        D0 + DAY,
        D0 + DAY + 12 * HOUR,
        D0 + 2 * DAY,
        D0 + 2 * DAY + 6 * HOUR,
        D0 + 2 * DAY + 12 * HOUR,
    ]
    with engine.begin() as conn:
        _one_gpu(conn)
        partitions.ensure_partitions(conn, D0, D0)  # the 16th
        partitions.ensure_partitions(conn, D0 + 2 * DAY, D0 + 2 * DAY)  # the 18th
        _write(conn, stamps, step_s=HOUR)  # the 17th's rows land in the DEFAULT partition
        rollup.roll_up(conn, D0, D0 + 3 * DAY)
    hours = [(ts, 1) for ts in stamps]
    # Raw samples kept from the 18th, 06:00: 35 days before "now".
    now_ts = D0 + 2 * DAY + 6 * HOUR + 35 * DAY + 1800
    with engine.begin() as conn:
        assert _hourly(conn) == hours
        done = rollup.compact(conn, now_ts, raw_keep_s=35 * DAY, hourly_keep_s=400 * DAY)
    assert done.raw_kept_from_ts == D0 + 2 * DAY + 6 * HOUR
    with engine.connect() as conn:
        kept = [int(r[0]) for r in conn.execute(sa.text("SELECT ts FROM gpu_samples ORDER BY ts"))]
        assert kept == [D0 + 2 * DAY + 6 * HOUR, D0 + 2 * DAY + 12 * HOUR]
        assert _hourly(conn) == hours  # every hour deleted from raw samples is kept rolled up
        if engine.dialect.name == "postgresql":
            assert done.partitions_dropped == (P16,)
            assert done.raw_deleted == 3  # the 17th's two (DEFAULT) and the 18th's 00:00
            assert _partitions_listed(conn) == {DEFAULT, P18}
        else:
            assert done.partitions_dropped == ()
            assert done.raw_deleted == 5
    engine.dispose()


def test_compaction_names_the_dropped_days() -> None:
    one = rollup.Compaction(3, 0, D0 + 2 * DAY, D0 - 300 * DAY, (P16,))
    assert describe_compaction(one) == (
        "dropped 1 day partition of raw samples (gpu_samples_p20251116); deleted 3 raw samples"
        " before 2025-11-18 00:00 UTC and 0 hourly roll-up rows before 2025-01-20 00:00 UTC"
    )
    three = rollup.Compaction(0, 7, D0 + 2 * DAY, D0 - 300 * DAY, (P16, P17, P18))
    assert describe_compaction(three).startswith(
        "dropped 3 day partitions of raw samples (gpu_samples_p20251116 to gpu_samples_p20251118);"
        " deleted 0 raw samples before 2025-11-18 00:00 UTC and 7 hourly"
    )
    none = rollup.Compaction(3, 0, D0 + 2 * DAY, D0 - 300 * DAY)
    assert describe_compaction(none).startswith("deleted 3 raw samples before 2025-11-18")


def test_day_partitions_by_hand() -> None:
    assert partitions.partition_name(D0) == P16
    assert partitions.day_partition(P17) == partitions.DayPartition(P17, D0 + DAY, D0 + 2 * DAY)
    assert partitions.day_partition("gpu_samples_hourly") is None
    assert partitions.is_partition_name(DEFAULT) and not partitions.is_partition_name("gpu_samples")
    assert partitions.days_between(D0 + DAY - 1, D0 + 2 * DAY) == [D0, D0 + DAY, D0 + 2 * DAY]
    assert partitions.days_between(D0 + 5, D0 + 10) == [D0]
