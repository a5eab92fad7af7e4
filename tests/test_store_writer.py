"""Idempotent writes on SQLite and PostgreSQL: upserts on natural keys, watermarks forward only."""

from __future__ import annotations

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
