"""The demo store's efficiency and health readings: the scenarios land as collection stores them.

One window, Wednesday 2026-11-18 09:00 to Thursday 17:00 UTC at 5-minute steps (384 instants),
on SQLite and PostgreSQL. Expected values are worked out by hand from the declared scenarios
(docs/simulation.md): the failing GPU fails on Wednesday at 10:00, falls silent at 16:00 and is
back on Thursday at 10:00; SBE noise at every even hour + 17 minutes (a3 GPU 2) and every third
hour from 00:40 (rh0 GPU 4); PCIe replays at :07/:22/:37/:52 (l0 GPU 1) and every 10 minutes on
the hour (rl3 GPU 0); llm-sft holds the hot node h1 from Thursday 00:00.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.simulate.fleet import Fleet, build_fleet
from gpuwatch.simulate.generate import SimulatedData, generate
from gpuwatch.simulate.load import load_simulated

START_TS = int(datetime(2026, 11, 18, 9, tzinfo=UTC).timestamp())
HOURS = 32
END_TS = START_TS + HOURS * 3600
STEP_S = 300
FAILED_TS = START_TS + 3600  # 10:00
SILENT_TS = START_TS + 7 * 3600  # 16:00
BACK_TS = START_TS + 25 * 3600  # Thursday 10:00


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return build_fleet(7)


@pytest.fixture(scope="module")
def data(fleet: Fleet) -> SimulatedData:
    return generate(fleet, START_TS, END_TS, STEP_S)


@pytest.fixture
def store(migrated_engine: Engine, data: SimulatedData) -> Engine:
    with migrated_engine.begin() as conn:
        load_simulated(conn, data)
    return migrated_engine


def _uuid(fleet: Fleet, cluster: str, alias: str, index: int) -> str:
    node = next(n for n in fleet.nodes if (n.cluster, n.alias) == (cluster, alias))
    return next(u.uuid for u in fleet.units if u.node == node.name and u.gpu_index == index)


def _rows(store: Engine, sql: str, **params: object) -> list[tuple[object, ...]]:
    with store.connect() as conn:
        return [tuple(row) for row in conn.execute(sa.text(sql), params)]


def _of_gpu(store: Engine, uuid: str, column: str) -> list[tuple[object, ...]]:
    """``(ts, column)`` of the GPU's samples where the column has a value, by instant."""
    return _rows(
        store,
        f"SELECT s.ts, s.{column} FROM gpu_samples s JOIN gpus g ON g.id = s.gpu_id "
        f"WHERE g.uuid = :uuid AND s.{column} IS NOT NULL ORDER BY s.ts",
        uuid=uuid,
    )


def test_the_failing_gpu_stores_its_dbe_and_xid_79_then_nothing(
    store: Engine, fleet: Fleet
) -> None:
    uuid = _uuid(fleet, "prod-us-east", "a7", 5)
    held = _of_gpu(store, uuid, "pod_id")
    expected = [*range(START_TS, SILENT_TS, STEP_S), *range(BACK_TS, END_TS, STEP_S)]
    assert [ts for ts, _ in held] == expected  # 84 + 84: 09:00-15:55, then 10:00-16:55
    # Back on Thursday without a reading a step earlier: no increase (NULL), never a 0 or a -1.
    assert _of_gpu(store, uuid, "ecc_dbe_count") == [(FAILED_TS, 1)]
    xids = _of_gpu(store, uuid, "xid")
    assert [(ts, x) for ts, x in xids if x] == [(ts, 79) for ts in range(FAILED_TS, SILENT_TS, 300)]
    (last_seen,) = _rows(store, "SELECT last_seen_ts FROM gpus WHERE uuid = :u", u=uuid)
    assert last_seen == (END_TS - STEP_S,)
    assert _rows(store, "SELECT count(*), sum(ecc_dbe_count) FROM gpu_samples "
                        "WHERE ecc_dbe_count IS NOT NULL") == [(1, 1)]  # fmt: skip


def test_counter_noise_is_stored_as_increases_per_step(store: Engine, fleet: Fleet) -> None:
    sbe = _of_gpu(store, _uuid(fleet, "prod-us-east", "a3", 2), "ecc_sbe_count")
    # 10:20, 12:20, ... (16 steps up to Thursday 16:20)
    assert sbe == [(START_TS + h * 3600 + 1200, 1) for h in range(1, HOURS, 2)]
    other = _of_gpu(store, _uuid(fleet, "research-eu", "rh0", 4), "ecc_sbe_count")
    # 09:40, 12:40, ... (11 steps up to Thursday 15:40)
    assert other == [(START_TS + 2400 + h * 3600, 1) for h in range(0, HOURS, 3)]
    replays = _of_gpu(store, _uuid(fleet, "prod-us-east", "l0", 1), "pcie_replay_count")
    quarter = range(START_TS + 600, END_TS, 900)  # 09:10, 09:25, ... (128 steps)
    assert replays == [(ts, 1) for ts in quarter]
    every_ten = _of_gpu(store, _uuid(fleet, "research-eu", "rl3", 0), "pcie_replay_count")
    assert every_ten == [(ts, 1) for ts in range(START_TS, END_TS, 600)]  # 192
    totals = _rows(
        store,
        "SELECT count(ecc_sbe_count), count(pcie_replay_count), count(nvlink_error_count), "
        "count(row_remap_failure) FROM gpu_samples",
    )
    assert totals == [(16 + 11, 128 + 192, 0, 0)]


def test_the_throttling_node_stores_its_clock_events(store: Engine, fleet: Fleet) -> None:
    h1 = next(n.name for n in fleet.nodes if n.alias == "h1")
    events = _rows(
        store,
        "SELECT s.clock_events, s.sm_clock_mhz, count(*) FROM gpu_samples s "
        "JOIN gpus g ON g.id = s.gpu_id JOIN nodes n ON n.id = g.node_id "
        "WHERE n.name = :node AND s.ts >= :lo AND s.ts < :hi "
        "GROUP BY s.clock_events, s.sm_clock_mhz",
        node=h1,
        lo=START_TS + 27 * 3600,
        hi=START_TS + 31 * 3600,
    )
    # Thursday 12:00-15:55: llm-sft's GPUs busy in the afternoon heat, 8 GPUs × 48 instants.
    assert events == [(32, 1584.0, 384)]
    idle = _rows(
        store,
        "SELECT DISTINCT s.clock_events FROM gpu_samples s JOIN gpus g ON g.id = s.gpu_id "
        "JOIN nodes n ON n.id = g.node_id WHERE n.name = :node AND s.ts < :lo",
        node=h1,
        lo=START_TS + 15 * 3600,
    )
    assert idle == [(1,)]  # Wednesday: llm-sft ended at 07:47, the GPUs idle


def test_readings_are_null_where_the_exporter_has_no_such_field(store: Engine) -> None:
    # Profiling off: the T4 nodes (t0, t1: 8 GPUs; t2: 16 time-slice slots; rt0, rt1: 8 GPUs)
    # and l2 (4 GPUs): 36 units × 384 instants.
    nulls = "SELECT count(*) FROM gpu_samples WHERE sm_active_ratio IS NULL"
    assert _rows(store, nulls) == [(36 * 384,)]
    assert _rows(
        store,
        "SELECT count(*) FROM gpu_samples WHERE sm_active_ratio IS NULL AND ("
        "tensor_active_ratio IS NOT NULL OR dram_active_ratio IS NOT NULL OR "
        "sm_occupancy_ratio IS NOT NULL OR pcie_bytes_per_s IS NOT NULL)",
    ) == [(0,)]
    # NVLink bytes on whole A100 and H100 GPUs: a0-a7 (64), h0-h2 (24), hd0 (7 GPUs, one shared
    # by two pods: 9 units), hb0-hb3 (32), ra0-ra4 (40), rh0-rh3 (32) = 201 units × 384, less
    # the failing GPU's 216 silent instants (Wednesday 16:00 to Thursday 09:55).
    nvlink = "SELECT count(*) FROM gpu_samples WHERE nvlink_bytes_per_s IS NOT NULL"
    assert _rows(store, nvlink) == [(201 * 384 - 216,)]
    everywhere = (
        "SELECT count(*) FROM gpu_samples WHERE clock_events IS NULL OR sm_clock_mhz IS NULL"
    )
    assert _rows(store, everywhere) == [(0,)]


def test_the_health_roll_up_holds_the_scenarios(store: Engine, fleet: Fleet) -> None:
    """Loading builds the hourly health roll-up from these readings, as collection does."""
    failing = _rows(
        store,
        "SELECT h.hour_ts, h.ecc_dbe, h.data_s FROM gpu_health_hourly h "
        "JOIN gpus g ON g.id = h.gpu_id WHERE g.uuid = :uuid AND h.ecc_dbe IS NOT NULL",
        uuid=_uuid(fleet, "prod-us-east", "a7", 5),
    )
    assert failing == [(FAILED_TS, 1, 3600)]
    h1 = next(n.name for n in fleet.nodes if n.alias == "h1")
    afternoon = _rows(
        store,
        "SELECT h.hour_ts, sum(h.clock_data_s), sum(h.throttled_s), sum(h.thermal_s), "
        "sum(h.power_cap_s) FROM gpu_health_hourly h JOIN gpus g ON g.id = h.gpu_id "
        "JOIN nodes n ON n.id = g.node_id WHERE n.name = :node AND h.hour_ts >= :lo "
        "AND h.hour_ts < :hi GROUP BY h.hour_ts ORDER BY h.hour_ts",
        node=h1,
        lo=START_TS + 26 * 3600,
        hi=START_TS + 32 * 3600,
    )
    # Thursday 11:00-16:00: 8 GPUs × 3,600 s of clock data; thermal from 12:00 to 16:00.
    assert afternoon == [
        (START_TS + h * 3600, 28800, 28800 if 27 <= h < 31 else 0, 28800 if 27 <= h < 31 else 0, 0)
        for h in range(26, 32)
    ]
