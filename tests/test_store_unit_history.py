"""Raw samples keep their primary key as their only index (schema 0013), and one GPU unit's
history is read through that key (gpuwatch/store/unit_history.py).

Real SQLite and PostgreSQL (the private server of tests/conftest.py).
"""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy import Connection, Engine

from gpuwatch.store import partitions, repository, writer
from gpuwatch.store.engine import alembic_config, make_engine
from gpuwatch.store.engine import upgrade as upgrade_store
from gpuwatch.store.unit_history import history_query

D0 = 1_763_251_200  # 2025-11-16T00:00:00Z
DAY = 86_400


def _three_gpus(conn: Connection) -> None:
    conn.execute(sa.text("INSERT INTO clusters (id, name) VALUES (1, 'c')"))
    for gpu in (1, 2, 3):
        conn.execute(
            sa.text(
                "INSERT INTO gpus (id, cluster_id, uuid, mig_gi_id, slot, timeslice_replicas,"
                " first_seen_ts, last_seen_ts) VALUES (:id, 1, :uuid, -1, 0, 1, 0, 0)"
            ),
            {"id": gpu, "uuid": f"GPU-{gpu}"},
        )


def _write(conn: Connection, gpu: int, stamps: list[int], step_s: int) -> None:
    """One sample of ``gpu`` at each instant; its utilization tells the instant apart."""
    rows = [(gpu, ts, step_s, None, (ts - D0) / DAY, 1, None, None, None, None, None)
            for ts in stamps]  # fmt: skip
    writer.write_samples(conn, rows)


#: GPU 1 every minute; GPU 2 at 30 s steps, with a gap, and at instants no other unit has;
#: GPU 3 at instants of its own only. The window under test is [D0 + 120, D0 + 600).
STAMPS = {
    1: ([D0 + 60 * n for n in range(12)], 60),
    2: ([D0 + 90, D0 + 120, D0 + 150, D0 + 420, D0 + 450, D0 + 600, D0 + DAY + 30], 30),
    3: ([D0 + 125, D0 + 599], 1),
}


@pytest.fixture
def store(store_url: str) -> Engine:
    engine = make_engine(store_url)
    upgrade_store(engine)
    with engine.begin() as conn:
        _three_gpus(conn)
        partitions.ensure_partitions(conn, D0, D0 + DAY + 30)  # as a collection does first
        for gpu, (stamps, step_s) in STAMPS.items():
            _write(conn, gpu, stamps, step_s)
    return engine


def _history(engine: Engine, gpu: int, start_ts: int, end_ts: int) -> list[tuple[int, int]]:
    with engine.connect() as conn:
        rows = conn.execute(history_query(gpu, start_ts, end_ts)).all()
    return [(int(r.ts), int(r.step_s)) for r in rows]


def test_a_units_history_is_its_samples_in_the_window_and_no_other(store: Engine) -> None:
    lo, hi = D0 + 120, D0 + 600
    assert _history(store, 2, lo, hi) == [(D0 + 120, 30), (D0 + 150, 30), (D0 + 420, 30),
                                          (D0 + 450, 30)]  # fmt: skip
    assert _history(store, 3, lo, hi) == [(D0 + 125, 1), (D0 + 599, 1)]
    assert _history(store, 1, lo, hi) == [(D0 + 60 * n, 60) for n in range(2, 10)]
    assert _history(store, 2, D0 + 600, D0 + 2 * DAY) == [(D0 + 600, 30), (D0 + DAY + 30, 30)]
    assert _history(store, 2, D0 + 200, D0 + 400) == []  # its gap: other units have samples
    assert _history(store, 4, D0, D0 + 2 * DAY) == []  # no such unit
    assert _history(store, 1, D0 + 2 * DAY, D0 + 3 * DAY) == []  # no sample at all


def test_the_repository_reads_a_units_history_with_its_values(store: Engine) -> None:
    frame = repository.load_gpu_samples(store, 2, D0 + 120, D0 + 600)
    assert frame["ts"].tolist() == [D0 + 120, D0 + 150, D0 + 420, D0 + 450]
    assert frame["gpu_id"].tolist() == [2, 2, 2, 2]
    assert frame["util_ratio"].tolist() == pytest.approx([120 / DAY, 150 / DAY, 420 / DAY,
                                                          450 / DAY])  # fmt: skip
    assert frame["gpu_uuid"].tolist() == ["GPU-2"] * 4


def test_raw_samples_have_their_primary_key_as_their_only_index(store: Engine) -> None:
    assert sa.inspect(store).get_indexes("gpu_samples") == []
    if store.dialect.name != "postgresql":
        return
    with store.connect() as conn:  # every partition, the day ones and the DEFAULT
        indexes = conn.execute(
            sa.text(
                "SELECT c.relname, x.indisprimary FROM pg_inherits i"
                " JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_index x ON x.indrelid = c.oid"
                " WHERE i.inhparent = 'gpu_samples'::regclass"
            )
        ).all()
    assert sorted(indexes) == [
        ("gpu_samples_default", True),
        ("gpu_samples_p20251116", True),
        ("gpu_samples_p20251117", True),
    ]


def test_downgrading_0013_builds_the_unit_index_again_and_keeps_every_sample(
    store: Engine,
) -> None:
    cfg = alembic_config(store)
    command.downgrade(cfg, "0012")
    indexes = sa.inspect(store).get_indexes("gpu_samples")
    assert [(ix["name"], ix["column_names"], ix["unique"]) for ix in indexes] == [
        ("ix_gpu_samples_gpu_id_ts", ["gpu_id", "ts"], True)
    ]
    upgrade_store(store)
    assert sa.inspect(store).get_indexes("gpu_samples") == []
    with store.connect() as conn:
        count = conn.execute(sa.text("SELECT COUNT(*) FROM gpu_samples")).scalar_one()
    assert count == sum(len(stamps) for stamps, _ in STAMPS.values())


def test_sqlite_reads_a_units_history_by_probing_the_key_not_scanning_it(
    sqlite_url: str,
) -> None:
    engine = make_engine(sqlite_url)
    upgrade_store(engine)
    query = history_query(1, D0, D0 + DAY).compile(engine, compile_kwargs={"literal_binds": True})
    with engine.connect() as conn:
        plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {query}").all()
    steps = [str(row[3]) for row in plan]
    samples = [step for step in steps if re.search(r"\b(gpu_samples|s|g)\b", step)]
    assert samples, steps
    assert all(step.startswith("SEARCH") and "PRIMARY KEY" in step for step in samples), steps
    assert any("(ts=? AND gpu_id=?)" in step for step in samples), steps
