"""Loading simulated frames into a store: every row lands, keys resolve, NULLs stay NULL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from sqlalchemy import Engine, event

from gpuwatch.simulate.fleet import build_fleet
from gpuwatch.simulate.generate import SimulatedData, generate
from gpuwatch.simulate.load import LoadStats, load_simulated
from gpuwatch.store.models import UTIL_SIGNAL_DEV, UTIL_SIGNAL_PROF, Base

END_TS = int(datetime(2026, 11, 17, tzinfo=UTC).timestamp())
START_TS = END_TS - 2 * 86400
STEP_S = 600


@pytest.fixture(scope="module")
def data() -> SimulatedData:
    return generate(build_fleet(7), START_TS, END_TS, STEP_S)


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    """A schema from the models on a temp SQLite file, foreign keys enforced."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'simulated.db'}")

    def _foreign_keys(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute("PRAGMA foreign_keys=ON")

    event.listen(engine, "connect", _foreign_keys)
    Base.metadata.create_all(engine)
    yield engine
    engine.dispose()


def _count(conn: sa.Connection, sql: str) -> int:
    return int(conn.execute(sa.text(sql)).scalar_one())


def _check_store(engine: Engine, data: SimulatedData, stats: LoadStats) -> None:
    samples = data.samples
    expected = LoadStats(
        clusters=len(data.clusters),
        nodes=len(data.nodes),
        gpus=len(data.gpus),
        namespaces=len(data.namespaces),
        pods=len(data.pods),
        samples=len(samples),
        dra_devices=len(data.dra_devices),
        sched_workloads=len(data.sched_workloads),
    )
    assert stats == expected
    assert expected.dra_devices > 0
    with engine.connect() as conn:
        for table, rows in (
            ("clusters", expected.clusters),
            ("nodes", expected.nodes),
            ("gpus", expected.gpus),
            ("namespaces", expected.namespaces),
            ("pods", expected.pods),
            ("gpu_samples", expected.samples),
            ("dra_devices", expected.dra_devices),
        ):
            assert _count(conn, f"SELECT count(*) FROM {table}") == rows, table
        held = int(samples["pod"].notna().sum())
        assert _count(conn, "SELECT count(pod_id) FROM gpu_samples") == held
        missing_power = int(samples["power_w"].isna().sum())
        assert missing_power > 0
        assert (
            _count(conn, "SELECT count(*) FROM gpu_samples WHERE power_w IS NULL") == missing_power
        )
        dev = int((samples["util_signal"] == "dev_gpu_util").sum())
        sql = "SELECT count(*) FROM gpu_samples WHERE util_signal = {}"
        assert _count(conn, sql.format(UTIL_SIGNAL_DEV)) == dev
        assert _count(conn, sql.format(UTIL_SIGNAL_PROF)) == len(samples) - dev
        total = conn.execute(sa.text("SELECT sum(util_ratio), sum(fb_used_mib) FROM gpu_samples"))
        util_sum, fb_sum = total.one()
        assert np.isclose(util_sum, samples["util_ratio"].sum())
        assert np.isclose(fb_sum, samples["fb_used_mib"].sum())
        state = conn.execute(
            sa.text("SELECT source, watermark_ts FROM collection_state ORDER BY cluster_id")
        ).all()
        assert [tuple(row) for row in state] == [("simulated", END_TS)] * len(data.clusters)


def test_load_writes_every_frame_into_a_fresh_sqlite_store(
    sqlite_engine: Engine, data: SimulatedData
) -> None:
    with sqlite_engine.begin() as conn:
        stats = load_simulated(conn, data)
    _check_store(sqlite_engine, data, stats)


def test_load_resolves_pods_and_units_by_natural_key(
    sqlite_engine: Engine, data: SimulatedData
) -> None:
    with sqlite_engine.begin() as conn:
        load_simulated(conn, data)
    row = data.samples[data.samples["pod"].notna() & (data.samples["mig_gi_id"] >= 0)].iloc[0]
    query = sa.text(
        "SELECT p.name, p.uid, g.uuid, g.mig_gi_id, g.mig_profile, s.util_ratio, s.power_w "
        "FROM gpu_samples s JOIN gpus g ON g.id = s.gpu_id JOIN pods p ON p.id = s.pod_id "
        "WHERE g.uuid = :uuid AND g.mig_gi_id = :gi AND s.ts = :ts"
    )
    params = {"uuid": row["uuid"], "gi": int(row["mig_gi_id"]), "ts": int(row["ts"])}
    with sqlite_engine.connect() as conn:
        name, uid, uuid, gi, profile, util, power = conn.execute(query, params).one()
    assert (name, uid, uuid, gi) == (row["pod"], row["pod_uid"], row["uuid"], row["mig_gi_id"])
    assert profile in {"1g.10gb", "3g.40gb"}
    assert util == pytest.approx(row["util_ratio"]) and power is None


def test_load_fills_seen_times_and_pending_pods(sqlite_engine: Engine) -> None:
    end = int(datetime(2026, 11, 16, 15, tzinfo=UTC).timestamp())
    data = generate(build_fleet(7), end - 86400, end, STEP_S)
    with sqlite_engine.begin() as conn:
        load_simulated(conn, data)
    with sqlite_engine.connect() as conn:
        first, last = conn.execute(
            sa.text("SELECT min(first_seen_ts), max(last_seen_ts) FROM gpus")
        ).one()
        assert (first, last) == (end - 86400, end - STEP_S)
        pending = conn.execute(
            sa.text("SELECT node_id, started_ts, last_seen_ts FROM pods WHERE phase = 'Pending'")
        ).all()
        assert pending and all(r[0] is None and r[1] is None and r[2] == end for r in pending)
        nodes = _count(conn, "SELECT count(*) FROM nodes WHERE first_seen_ts <= last_seen_ts")
        assert nodes == len(data.nodes)


def test_load_refuses_a_store_that_is_not_empty(sqlite_engine: Engine, data: SimulatedData) -> None:
    with sqlite_engine.begin() as conn:
        load_simulated(conn, data)
    with pytest.raises(ValueError, match="not empty"), sqlite_engine.begin() as conn:
        load_simulated(conn, data)
    with sqlite_engine.connect() as conn:
        assert _count(conn, "SELECT count(*) FROM gpu_samples") == len(data.samples)


def test_load_into_a_migrated_store(migrated_engine: Engine, data: SimulatedData) -> None:
    """The Alembic-built schema, on SQLite and on PostgreSQL; the load keeps its one index, the
    primary key (0013), and adds none."""

    def keys() -> tuple[list[str], list[dict[str, Any]]]:
        with migrated_engine.connect() as conn:
            inspector = sa.inspect(conn)
            primary = inspector.get_pk_constraint("gpu_samples")["constrained_columns"]
            return primary, inspector.get_indexes("gpu_samples")

    assert keys() == (["ts", "gpu_id"], [])
    with migrated_engine.begin() as conn:
        stats = load_simulated(conn, data)
    _check_store(migrated_engine, data, stats)
    assert keys() == (["ts", "gpu_id"], [])
    if migrated_engine.dialect.name == "postgresql":  # samples land in their days' partitions
        with migrated_engine.connect() as conn:
            assert _count(conn, "SELECT count(*) FROM gpu_samples_default") == 0
            assert _count(conn, "SELECT count(*) FROM gpu_samples_p20261115") > 0
            assert _count(conn, "SELECT count(*) FROM gpu_samples_p20261116") > 0
