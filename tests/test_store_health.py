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


# -- the roll-up: SQL and in memory agree, retention --------------------------------------

H0 = 1_794_182_400  # an hour
SQL_HOURLY = "SELECT * FROM gpu_health_hourly ORDER BY hour_ts, gpu_id, pod_id"


def _pod(name: str) -> dict[str, object]:
    return {"namespace": "ml", "name": name, "uid": f"uid-{name}", "workload_kind": "Job",
            "workload_name": name, "team": "ml", "gpu_count": 1, "labels": {},
            "last_seen_ts": H0}  # fmt: skip


def _random_samples(gpus: list[int], pods: list[int]) -> writer.SampleColumns:
    """Three hours of one-minute samples of each GPU (a gap, then another step), values drawn
    with a fixed seed among the limits' edges (util 0.5, SM 0.25, tensor 0.01), NULLs, every
    clock-event class and XID class."""
    rng = np.random.default_rng(16)
    ts = np.concatenate([np.arange(H0, H0 + 7200, 60), np.arange(H0 + 7500, H0 + 10800, 300)])
    n = len(ts) * len(gpus)

    def pick(*choices: float) -> np.ndarray:
        return rng.choice(np.asarray(choices, dtype=np.float64), n)

    step = np.where(np.tile(ts, len(gpus)) < H0 + 7200, 60, 300)
    health = {
        "sm_active_ratio": pick(NAN, 0.0, 0.1, 0.25, 0.6, 1.0),
        "sm_occupancy_ratio": pick(NAN, 0.3, 0.7),
        "tensor_active_ratio": pick(NAN, 0.0, 0.005, 0.01, 0.5),
        "dram_active_ratio": pick(NAN, 0.2, 0.8),
        "sm_clock_mhz": pick(NAN, 1410.0, 1980.0),
        "pcie_bytes_per_s": pick(NAN, 1e9, 2.5e9),
        "nvlink_bytes_per_s": pick(NAN, 4e10),
        "clock_events": pick(NAN, 0, 0x1, 0x4, 0x8, 0x20, 0x44, 0x80, 0x10),
        "ecc_sbe_count": pick(NAN, NAN, 1, 7),
        "ecc_dbe_count": pick(*[NAN] * 20, 1),
        "pcie_replay_count": pick(NAN, 3),
        "nvlink_error_count": pick(NAN, 2),
        "row_remap_failure": pick(*[NAN] * 30, 1),
    }
    return writer.SampleColumns(
        np.repeat(np.asarray(gpus), len(ts)),
        np.tile(ts, len(gpus)),
        step,
        pick(NAN, *pods),
        pick(NAN, 0.0, 0.2, 0.5, 0.9, 1.0),
        np.full(n, 1.0),
        np.full(n, 100.0),
        np.full(n, 81920.0),
        np.full(n, 300.0),
        np.full(n, 50.0),
        pick(*[NAN] * 40, 13, 79, 48, 999, 31),
        health=health,
    )


def _rows(conn: sa.Connection) -> list[tuple[object, ...]]:
    return [tuple(row) for row in conn.execute(sa.text(SQL_HOURLY))]


def _same(got: list[tuple[object, ...]], want: list[tuple[object, ...]]) -> None:
    assert len(got) == len(want) > 0
    for mine, theirs in zip(got, want, strict=True):
        assert len(mine) == len(theirs)
        for a, b in zip(mine, theirs, strict=True):
            assert (a is None) == (b is None), (mine, theirs)
            assert type(a) is type(b), (mine, theirs)
            assert a is None or a == pytest.approx(b, rel=1e-12), (mine, theirs)


def test_the_roll_up_in_memory_gives_the_sql_rows(migrated_engine: Engine) -> None:
    """Every hour rolled up from the table (``roll_up``), then the samples written again with
    their hours rolled up in memory, every other hour each way or all of them: the same
    rows."""
    from gpuwatch.store import rollup

    with migrated_engine.begin() as conn:
        cluster = writer.ensure_cluster(conn, "prod")
        gpus = list(writer.write_gpus(conn, cluster, [_gpu(f"GPU-{i}") for i in range(3)]).values())
        pods = list(writer.write_pods(conn, cluster, [_pod("a"), _pod("b")]).values())
        samples = writer.unique_samples(_random_samples(gpus, pods))
        writer.write_unique_samples(conn, samples)
        rollup.roll_up(conn, H0, H0 + 3 * 3600)
        by_sql = _rows(conn)
        found = []
        for fresh in ({H0, H0 + 7200}, {H0, H0 + 3600, H0 + 7200}):
            # written again: the fresh hours rolled up beside the write, the others from the
            # table after it
            conn.execute(sa.text("DELETE FROM gpu_health_hourly"))
            conn.execute(sa.text("DELETE FROM gpu_samples"))
            rollup.write_and_roll_up(conn, samples, fresh)
            found.append(_rows(conn))
    # of the 3 hours x 3 GPUs x (2 pods and none) groups, those with samples (seeded draw)
    assert len(by_sql) == 26
    _same(found[0], by_sql)
    _same(found[1], by_sql)


def test_raw_retention_keeps_the_health_hours_and_hourly_retention_ends_them(
    migrated_engine: Engine,
) -> None:
    from gpuwatch.store import rollup

    with migrated_engine.begin() as conn:
        cluster = writer.ensure_cluster(conn, "prod")
        gpu = writer.write_gpus(conn, cluster, [_gpu()])[("GPU-1", -1, 0)]
        ts = [H0 + 60 * m for m in range(0, 180, 30)]  # minutes 0, 30, ..., 150
        samples = _columns(gpu, ts, clock_events=[0x4] * 6)
        writer.write_samples(conn, samples)
        rollup.roll_up(conn, H0, H0 + 3 * 3600)
        before = _rows(conn)
        done = rollup.compact(conn, H0 + 3 * 3600, raw_keep_s=3600, hourly_keep_s=86400)
        kept = _rows(conn)
        raw = conn.execute(sa.text("SELECT count(*) FROM gpu_samples")).scalar_one()
        rollup.rebuild(conn, 5.0, H0 + 3 * 3600)  # ``gpuwatch db rollup``
        rebuilt = _rows(conn)
        rollup.compact(conn, H0 + 3 * 3600, raw_keep_s=3600, hourly_keep_s=7200)
        shortened = _rows(conn)
    assert [(r[0], r[3], r[21]) for r in before] == [(H0, 120, 120), (H0 + 3600, 120, 120),
                                                      (H0 + 7200, 120, 120)]  # fmt: skip
    assert done.raw_deleted == 4 and raw == 2
    assert kept == before and rebuilt == before
    assert [r[0] for r in shortened] == [H0 + 3600, H0 + 7200]
