"""Idempotent writes on SQLite and PostgreSQL: upserts on natural keys, watermarks forward only."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.store import writer


def _gpu(ts: int) -> dict[str, object]:
    return {"uuid": "GPU-1", "mig_gi_id": -1, "slot": 0, "model_name": "Tesla T4",
            "timeslice_replicas": 1, "first_seen_ts": ts, "last_seen_ts": ts}  # fmt: skip


def test_entities_upsert_keeps_first_seen_and_advances_last_seen(migrated_engine: Engine) -> None:
    with migrated_engine.begin() as conn:
        cluster = writer.ensure_cluster(conn, "prod")
        assert writer.ensure_cluster(conn, "prod") == cluster
        ids = writer.write_gpus(conn, cluster, [_gpu(100)])
        again = writer.write_gpus(conn, cluster, [_gpu(300)])
        older = writer.write_gpus(conn, cluster, [_gpu(50)])
        row = conn.execute(sa.text("SELECT first_seen_ts, last_seen_ts FROM gpus")).one()
    assert ids == again == older == {("GPU-1", -1, 0): ids[("GPU-1", -1, 0)]}
    assert tuple(row) == (100, 300)


def test_units_whose_facts_are_unchanged_only_see_their_last_seen_raised(
    migrated_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unit(uuid: str, ts: int, model: str = "Tesla T4") -> dict[str, object]:
        return _gpu(ts) | {"uuid": uuid, "model_name": model}

    upserted: list[list[str]] = []
    upsert = writer.upsert

    def spied(conn: sa.Connection, model: type, rows: list[dict[str, object]], key: object) -> None:
        upserted.append([str(row["uuid"]) for row in rows])
        upsert(conn, model, rows, key)  # type: ignore[arg-type]

    with migrated_engine.begin() as conn:
        cluster = writer.ensure_cluster(conn, "prod")
        first = writer.write_gpus(conn, cluster, [unit("GPU-1", 60), unit("GPU-2", 60)])
        monkeypatch.setattr(writer, "upsert", spied)
        rows = [unit("GPU-1", 120), unit("GPU-2", 120, "NVIDIA L4"), unit("GPU-3", 120)]
        ids = writer.write_gpus(conn, cluster, rows)
        quiet = writer.write_gpus(conn, cluster, [unit("GPU-1", 90), unit("GPU-3", 180)])
        assert writer.write_gpus(conn, cluster, []) == quiet  # no unit: the ids, nothing written
        stored = conn.execute(
            sa.text("SELECT uuid, model_name, first_seen_ts, last_seen_ts FROM gpus ORDER BY uuid")
        ).all()
    assert upserted == [["GPU-2", "GPU-3"], []]
    assert [tuple(r) for r in stored] == [
        ("GPU-1", "Tesla T4", 60, 120),
        ("GPU-2", "NVIDIA L4", 60, 120),
        ("GPU-3", "Tesla T4", 120, 180),
    ]
    assert ids == quiet and {k: ids[k] for k in first} == first and len(ids) == 3


def test_samples_upsert_is_idempotent_and_updates_values(migrated_engine: Engine) -> None:
    with migrated_engine.begin() as conn:
        cluster = writer.ensure_cluster(conn, "prod")
        gpu = writer.write_gpus(conn, cluster, [_gpu(0)])[("GPU-1", -1, 0)]
        rows = [(gpu, ts, 60, None, 0.5, 1, 10.0, 100.0, 70.0, 40.0, 0) for ts in (0, 60, 120)]
        assert writer.write_samples(conn, rows) == 3
        assert writer.write_samples(conn, rows) == 3
        writer.write_samples(
            conn, [(gpu, 60, 60, None, float("nan"), None, 11.0, 100.0, None, None, None)]
        )
        count = conn.execute(sa.text("SELECT count(*) FROM gpu_samples")).scalar_one()
        updated = conn.execute(
            sa.text("SELECT util_ratio, fb_used_mib FROM gpu_samples WHERE ts = 60")
        ).one()
    assert count == 3
    assert updated[0] is None  # NaN is stored as missing, never as a number
    assert updated[1] == 11.0


def test_watermark_never_moves_backwards(migrated_engine: Engine) -> None:
    with migrated_engine.begin() as conn:
        cluster = writer.ensure_cluster(conn, "prod")
        assert writer.read_watermark(conn, cluster, "prometheus") is None
        writer.advance_watermark(conn, cluster, "prometheus", 600, now_ts=1000)
        writer.advance_watermark(conn, cluster, "prometheus", 300, now_ts=1001)
        assert writer.read_watermark(conn, cluster, "prometheus") == 600
        writer.advance_watermark(conn, cluster, "prometheus", 900, now_ts=1002)
        assert writer.read_watermark(conn, cluster, "prometheus") == 900


def _columns(gpu: int, ts: list[int], util: float = 0.5) -> writer.SampleColumns:
    n = len(ts)
    return writer.SampleColumns(
        gpu_id=np.full(n, gpu),
        ts=np.asarray(ts, dtype=np.int64),
        step_s=np.full(n, 60),
        pod_id=np.full(n, np.nan),
        util_ratio=np.full(n, util),
        util_signal=np.full(n, 1.0),
        fb_used_mib=np.arange(n, dtype=np.float64) + 0.25,
        fb_total_mib=np.full(n, 81920.0),
        power_w=np.full(n, np.nan),
        temp_c=np.full(n, 41.5),
        xid=np.where(np.arange(n) % 2 == 0, 43.0, np.nan),
    )


def _stored(conn: sa.Connection) -> list[tuple[object, ...]]:
    sql = "SELECT gpu_id, ts, step_s, pod_id, util_ratio, util_signal, fb_used_mib, fb_total_mib,"
    sql += " power_w, temp_c, xid FROM gpu_samples ORDER BY gpu_id, ts"
    return [tuple(row) for row in conn.execute(sa.text(sql))]


def test_columns_store_what_tuples_store(migrated_engine: Engine) -> None:
    columns = _columns(0, [60 * i for i in range(4321)])  # several statements and a remainder
    with migrated_engine.begin() as conn:
        cluster = writer.ensure_cluster(conn, "prod")
        gpu = writer.write_gpus(conn, cluster, [_gpu(0)])[("GPU-1", -1, 0)]
        columns = replace(columns, gpu_id=np.full(len(columns), gpu))
        assert writer.write_samples(conn, columns) == len(columns)
        from_columns = _stored(conn)
        conn.execute(sa.text("DELETE FROM gpu_samples"))
        tuples = [
            (
                gpu,
                60 * i,
                60,
                None,
                0.5,
                1,
                i + 0.25,
                81920.0,
                None,
                41.5,
                43 if i % 2 == 0 else None,
            )
            for i in range(4321)
        ]
        writer.write_samples(conn, tuples)
        from_tuples = _stored(conn)
    assert from_columns == from_tuples
    assert len(from_columns) == 4321
    first, second = from_columns[0], from_columns[1]
    assert first == (gpu, 0, 60, None, 0.5, 1, 0.25, 81920.0, None, 41.5, 43)
    assert second[10] is None and second[8] is None
    # integers come back as integers, not floats, whatever the binding
    assert all(type(v) is int for v in (first[0], first[1], first[2], first[5], first[10]))


def test_a_repeated_row_keeps_its_last_values(migrated_engine: Engine) -> None:
    with migrated_engine.begin() as conn:
        cluster = writer.ensure_cluster(conn, "prod")
        gpu = writer.write_gpus(conn, cluster, [_gpu(0)])[("GPU-1", -1, 0)]
        rows = [(gpu, 60, 60, None, 0.1, 1, 1.0, 2.0, 3.0, 4.0, None)]
        rows += [(gpu, 0, 60, None, 0.2, 1, 1.0, 2.0, 3.0, 4.0, None)]
        rows += [(gpu, 60, 60, None, 0.3, 1, 1.0, 2.0, 3.0, 4.0, None)]
        assert writer.write_samples(conn, rows) == 3
        stored = {row[1]: row[4] for row in _stored(conn)}
    assert stored == {0: 0.2, 60: 0.3}


@pytest.mark.postgres
def test_copy_path_inserts_then_upserts_in_one_transaction(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backfill takes the plain INSERT; stored rows, and a writer that got there first
    (the pre-check said nothing was stored), take the upsert; the transaction goes on."""
    from gpuwatch.store import pgcopy
    from gpuwatch.store.engine import make_engine, upgrade

    monkeypatch.setattr(pgcopy, "_ROWS_PER_WRITE", 1000)  # several COPY writes
    engine = make_engine(postgres_url)
    upgrade(engine)
    ts = [60 * i for i in range(2500)]
    with engine.begin() as conn:
        cluster = writer.ensure_cluster(conn, "prod")
        gpu = writer.write_gpus(conn, cluster, [_gpu(0)])[("GPU-1", -1, 0)]
        assert (
            writer.write_samples(conn, replace(_columns(gpu, ts), gpu_id=np.full(2500, gpu)))
            == 2500
        )
        writer.write_samples(conn, replace(_columns(gpu, ts[:10], 0.75), gpu_id=np.full(10, gpu)))
        monkeypatch.setattr(pgcopy, "_any_stored", lambda *_: False)
        writer.write_samples(conn, replace(_columns(gpu, ts[-5:], 0.9), gpu_id=np.full(5, gpu)))
        stored = _stored(conn)
        temp = conn.execute(sa.text(f"SELECT count(*) FROM {pgcopy.TEMP_TABLE}")).scalar_one()
    assert len(stored) == 2500
    assert [row[4] for row in stored[:10]] == [0.75] * 10
    assert [row[4] for row in stored[10:-5]] == [0.5] * 2485
    assert [row[4] for row in stored[-5:]] == [0.9] * 5
    assert temp == 0
    with engine.connect() as conn:
        assert _stored(conn) == stored
        # the temporary table went with the transaction
        exists = conn.execute(sa.text(f"SELECT to_regclass('{pgcopy.TEMP_TABLE}')")).scalar()
    assert exists is None
    engine.dispose()
