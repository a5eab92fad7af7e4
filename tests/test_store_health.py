"""Efficiency and health readings in the store: written exactly on SQLite and PostgreSQL (plain
upserts and COPY), rolled up into ``gpu_health_hourly`` wherever the hourly roll-ups are, and
read back as the health frame."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.store import writer
from gpuwatch.store.models import HEALTH_SAMPLE_FIELDS

NAN = float("nan")


def _gpu(uuid: str = "GPU-1") -> dict[str, object]:
    return {"uuid": uuid, "mig_gi_id": -1, "slot": 0, "model_name": "NVIDIA H100 80GB HBM3",
            "timeslice_replicas": 1, "first_seen_ts": 0, "last_seen_ts": 0}  # fmt: skip


def _columns(gpu: int, ts: list[int], **health: list[float]) -> writer.SampleColumns:
    n = len(ts)
    return writer.SampleColumns(
        np.full(n, gpu),
        np.asarray(ts, dtype=np.int64),
        np.full(n, 60),
        np.full(n, np.nan),
        np.full(n, 0.5),
        np.full(n, 1.0),
        np.full(n, 100.0),
        np.full(n, 81920.0),
        np.full(n, 300.0),
        np.full(n, 50.0),
        np.full(n, np.nan),
        health={name: np.asarray(values, dtype=np.float64) for name, values in health.items()},
    )


def _health(conn: sa.Connection) -> list[tuple[object, ...]]:
    names = ", ".join(HEALTH_SAMPLE_FIELDS)
    sql = f"SELECT ts, util_ratio, {names} FROM gpu_samples ORDER BY gpu_id, ts"
    return [tuple(row) for row in conn.execute(sa.text(sql))]


READINGS = {
    "sm_active_ratio": [0.25, NAN, 0.75],
    "tensor_active_ratio": [0.0, 0.5, NAN],
    "pcie_bytes_per_s": [1.5e9, NAN, 3e9],
    "clock_events": [0x44, 0x1, NAN],
    "ecc_sbe_count": [NAN, 3.0, NAN],
    "row_remap_failure": [NAN, NAN, 1.0],
}
# ts, util, then HEALTH_SAMPLE_FIELDS: sm_active, sm_occupancy, tensor, dram, sm_clock, pcie,
# nvlink, clock_events, ecc_sbe, ecc_dbe, pcie_replay, nvlink_error, row_remap_failure.
STORED = [
    (0, 0.5, 0.25, None, 0.0, None, None, 1.5e9, None, 68, None, None, None, None, None),
    (60, 0.5, None, None, 0.5, None, None, None, None, 1, 3, None, None, None, None),
    (120, 0.5, 0.75, None, None, None, None, 3e9, None, None, None, None, None, None, 1),
]


def test_health_readings_are_stored_exactly_and_absent_ones_are_null(
    migrated_engine: Engine,
) -> None:
    with migrated_engine.begin() as conn:
        cluster = writer.ensure_cluster(conn, "prod")
        gpu = writer.write_gpus(conn, cluster, [_gpu()])[("GPU-1", -1, 0)]
        assert writer.write_samples(conn, _columns(gpu, [0, 60, 120], **READINGS)) == 3
        stored = _health(conn)
    assert stored == STORED
    # integer columns come back as integers whatever the binding
    assert type(stored[0][9]) is int and type(stored[1][10]) is int


def test_writing_again_without_a_reading_clears_it(migrated_engine: Engine) -> None:
    """A re-collection stores what it read: a reading it no longer has becomes NULL."""
    with migrated_engine.begin() as conn:
        cluster = writer.ensure_cluster(conn, "prod")
        gpu = writer.write_gpus(conn, cluster, [_gpu()])[("GPU-1", -1, 0)]
        writer.write_samples(conn, _columns(gpu, [0, 60, 120], **READINGS))
        writer.write_samples(conn, _columns(gpu, [0, 60, 120], **READINGS))
        assert _health(conn) == STORED
        writer.write_samples(conn, _columns(gpu, [60], sm_active_ratio=[0.125]))
        changed = _health(conn)
        writer.write_samples(conn, _columns(gpu, [0, 120]))
        cleared = _health(conn)
    assert changed[1] == (60, 0.5, 0.125) + (None,) * 12
    assert changed[0] == STORED[0] and changed[2] == STORED[2]
    assert cleared == [(0, 0.5) + (None,) * 13, changed[1], (120, 0.5) + (None,) * 13]


def test_unknown_health_fields_are_refused() -> None:
    with pytest.raises(ValueError, match="sm_activity"):
        _columns(1, [0], sm_activity=[0.5])


def test_rows_taken_keep_their_health_readings() -> None:
    columns = _columns(1, [120, 0, 60], **READINGS)
    ordered = writer.unique_samples(columns)
    assert ordered.ts.tolist() == [0, 60, 120]
    np.testing.assert_array_equal(
        ordered.health_column("sm_active_ratio"), np.array([NAN, 0.75, 0.25])
    )
    assert np.isnan(ordered.health_column("dram_active_ratio")).all()


@pytest.mark.postgres
def test_copy_writes_health_readings_straight_and_through_the_upsert(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backfill copies the present readings straight into the table; rows already stored go
    through the temporary table and the upsert, which clears readings no longer given."""
    from gpuwatch.store import pgcopy
    from gpuwatch.store.engine import make_engine, upgrade

    monkeypatch.setattr(pgcopy, "_ROWS_PER_WRITE", 2)  # several COPY writes
    engine = make_engine(postgres_url)
    upgrade(engine)
    with engine.begin() as conn:
        cluster = writer.ensure_cluster(conn, "prod")
        gpu = writer.write_gpus(conn, cluster, [_gpu()])[("GPU-1", -1, 0)]
        writer.write_samples(conn, _columns(gpu, [0, 60, 120], **READINGS))
        assert _health(conn) == STORED
        again = replace(_columns(gpu, [60], ecc_sbe_count=[4.0]), util_ratio=np.array([0.25]))
        writer.write_samples(conn, again)
        stored = _health(conn)
    assert stored[1] == (60, 0.25) + (None,) * 8 + (4,) + (None,) * 4
    assert stored[0] == STORED[0] and stored[2] == STORED[2]
    engine.dispose()
