"""The health roll-up summed per (GPU unit, pod) in the database equals the same sums taken over
the window's hourly rows, on SQLite and PostgreSQL, and every efficiency figure follows from the
sums as it did from the rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.analytics.efficiency import efficiency_of_sums, key_of, workload_efficiency
from gpuwatch.analytics.health_sums import health_sums
from gpuwatch.analytics.placement import _traffic
from gpuwatch.domain.frames import HEALTH_COLUMNS, HEALTH_SUM_COLUMNS, conform
from gpuwatch.domain.pricing import build_price_book
from gpuwatch.simulate.fleet import build_fleet
from gpuwatch.simulate.generate import SimulatedData, generate
from gpuwatch.store import daily, repository, rollup

END_TS = 1_794_823_200  # Monday 2026-11-16 10:00 UTC
DAY_S = 86_400
START_TS = END_TS - 10 * DAY_S
BOOK = build_price_book(2.0, 0.6, {}, {})
PAIR = ["gpu_id", "pod_id"]


@pytest.fixture(scope="module")
def data() -> SimulatedData:
    return generate(build_fleet(seed=5), START_TS, END_TS, 1800)


@pytest.fixture
def engine(simulated_engine: Engine) -> Engine:
    return simulated_engine


def _by_pair(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(PAIR, na_position="first", ignore_index=True)


def _both(engine: Engine, start_ts: int, end_ts: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    stored = repository.load_health_sums(engine, start_ts, end_ts)
    summed = health_sums(repository.load_health_hourly(engine, start_ts, end_ts))
    return _by_pair(stored), _by_pair(summed)


def test_the_store_sums_equal_the_hourly_rows_summed(engine: Engine) -> None:
    stored, summed = _both(engine, START_TS, END_TS + 3600)
    assert list(stored.columns) == [c.name for c in HEALTH_SUM_COLUMNS]
    pd.testing.assert_frame_equal(stored, summed, check_exact=False, rtol=1e-9, atol=1e-6)
    # The fleet exercises every kind of term: without these the equality proves little.
    assert stored["pod_id"].isna().any() and stored["pod_id"].notna().any()
    for name in ("throttled_data_s", "fail_s", "engine_weighted_s", "nvlink_bytes_per_s_sum"):
        assert (stored[name] > 0).any(), name
    tensor_bound = stored["inefficient_data_s"] > stored["low_sm_data_s"] + 1e-6
    assert tensor_bound.any()
    assert stored["mig_profile"].notna().any() and (stored["timeslice_replicas"] > 1).any()


def test_a_window_counts_failing_from_its_own_first_event(engine: Engine) -> None:
    """Cut after some GPUs' first failing events: the window's onset is its own first event,
    as for its hourly rows, so the seconds before it in the window are not failing."""
    start = END_TS - 3 * DAY_S
    stored, summed = _both(engine, start, END_TS + 3600)
    pd.testing.assert_frame_equal(stored, summed, check_exact=False, rtol=1e-9, atol=1e-6)
    whole, _ = _both(engine, START_TS, END_TS + 3600)
    assert stored["fail_s"].sum() <= whole["fail_s"].sum()


def test_efficiency_from_the_store_sums_equals_efficiency_from_the_rows(engine: Engine) -> None:
    rows = repository.load_health_hourly(engine, START_TS, END_TS + 3600)
    stored = repository.load_health_sums(engine, START_TS, END_TS + 3600)
    keys = ["cluster", "namespace", "workload_kind", "workload", "gpu_model"]
    from_rows = workload_efficiency(rows, BOOK).sort_values(keys, ignore_index=True)
    from_sums = efficiency_of_sums(stored, BOOK).sort_values(keys, ignore_index=True)
    pd.testing.assert_frame_equal(from_sums, from_rows, check_exact=False, rtol=1e-9)
    assert from_sums["failing_gpu_hours"].gt(0).any()
    assert from_sums["cause"].notna().any()
    held = rows[rows["pod_id"].notna()].astype({k: object for k in keys})
    means = held.groupby(keys, dropna=False)[["pcie_bytes_per_s", "nvlink_bytes_per_s"]].mean()
    traffic = _traffic(stored)
    assert len(traffic) == len(means)
    for key, (pcie, nvlink) in means.iterrows():
        got = traffic[key_of(key)]
        np.testing.assert_allclose(got, (pcie, nvlink), rtol=1e-9)


def test_an_empty_window_has_no_sums(engine: Engine) -> None:
    stored = repository.load_health_sums(engine, END_TS + DAY_S, END_TS + 2 * DAY_S)
    assert stored.empty
    assert list(stored.columns) == [c.name for c in HEALTH_SUM_COLUMNS]
    assert efficiency_of_sums(stored, BOOK).empty


#: Hourly means: NaN without readings; every other float column is seconds (0: none).
_MEANS = ("sm_clock_mhz", "pcie_bytes_per_s", "nvlink_bytes_per_s")


def _hour(ts: int, **values: float) -> dict[str, object]:
    row: dict[str, object] = {
        c.name: (np.nan if c.name in _MEANS else 0.0) if c.dtype == "float64" else pd.NA
        for c in HEALTH_COLUMNS
    }
    row.update(cluster="c", node="n", gpu_id=1, gpu_uuid="GPU-1", slot=0, timeslice_replicas=1,
               gpu_model="NVIDIA H100 80GB HBM3", capacity_type="on_demand", ts=ts, pod_id=7,
               namespace="ml", pod="train-0", workload_kind="Job", workload="train", team="ml",
               pod_gpu_count=1, attribution="pod", allocation="device-plugin",
               first_ts=ts, last_ts=ts + 3000)  # fmt: skip
    row["step_s"] = values.get("data_s", 0)
    row.update(values)
    return row


def test_two_hours_sum_to_the_figures_worked_by_hand() -> None:
    """Hour 1: 3600 s, a quarter throttled, busy 3600 s of which 900 s with low SM and 1800 s
    without tensor use, SM active 0.5 over 3600 s; hour 2: 1800 s, no clock reading, SM 0.25
    over 1800 s, and a DBE 45 minutes in."""
    t = END_TS
    first = _hour(t, data_s=3600, clock_data_s=3600, throttled_s=900, util_s=3600,
                  util_data_s=3600, busy_low_sm_s=900, busy_no_tensor_s=1800,
                  sm_active_s=1800, sm_data_s=3600, pcie_bytes_per_s=10.0)  # fmt: skip
    second = _hour(t + 3600, data_s=1800, util_s=1800, util_data_s=1800, sm_active_s=450,
                   sm_data_s=1800, ecc_dbe=1, first_ts=t + 3600 + 2700)  # fmt: skip
    rows = pd.DataFrame([first, second])
    sums = health_sums(conform(rows, HEALTH_COLUMNS)).iloc[0]
    assert sums["data_s"] == 5400
    assert sums["throttled_data_s"] == pytest.approx(3600 * 0.25)
    assert sums["low_sm_data_s"] == pytest.approx(3600 * 0.25)
    assert sums["inefficient_data_s"] == pytest.approx(3600 * 0.5)
    assert sums["fail_s"] == pytest.approx(900)  # min(1800 s of data, hour end − event)
    assert sums["sm_active_weighted_s"] == pytest.approx(3600 * 0.5 + 1800 * 0.25)
    assert sums["sm_active_weight_s"] == 5400 and sums["sm_active_hours"] == 2
    assert sums["pcie_bytes_per_s_sum"] == 10.0 and sums["pcie_bytes_per_s_hours"] == 1
    eff = efficiency_of_sums(health_sums(conform(rows, HEALTH_COLUMNS)), BOOK).iloc[0]
    assert eff["allocated_gpu_hours"] == pytest.approx(1.5)
    assert eff["throttled_gpu_hours"] == pytest.approx(0.25)
    assert eff["inefficient_gpu_hours"] == pytest.approx(0.5)  # H100: tensor cores count
    assert eff["failing_gpu_hours"] == pytest.approx(0.25)
    assert eff["sm_active_pct"] == pytest.approx(100 * (1800 + 450) / 5400)
    assert eff["engine_active_pct"] == pytest.approx(100.0)
    assert np.isnan(eff["tensor_active_pct"])


def _physical_units(engine: Engine, gpu_ids: set[int]) -> set[int]:
    """Every unit of the physical GPUs of ``gpu_ids``, from the GPU facts."""
    units = repository.load_gpus(engine)
    chosen = units[units["gpu_id"].isin(gpu_ids)]
    keys = set(zip(chosen["cluster"], chosen["gpu_uuid"], strict=True))
    mask = [k in keys for k in zip(units["cluster"], units["gpu_uuid"], strict=True)]
    return set(units.loc[mask, "gpu_id"].astype(int))


def test_the_units_of_a_pod_or_with_evidence_come_with_their_siblings(engine: Engine) -> None:
    rows = repository.load_health_hourly(engine, START_TS, END_TS + 3600)
    counted = ["ecc_sbe", "ecc_dbe", "pcie_replays", "nvlink_errors", "row_remap_failure",
               "fail_first_ts", "fail_xid", "app_xid", "other_xid"]  # fmt: skip
    evidence = rows[rows[counted].notna().any(axis=1) | (rows["throttled_s"] > 0)]
    want = _physical_units(engine, set(evidence["gpu_id"].astype(int)))
    got = repository.units_with_health_events(engine, START_TS, END_TS + 3600)
    assert got == sorted(want)
    assert 0 < len(got) < rows["gpu_id"].nunique()
    shared = rows[rows["mig_profile"].notna() & rows["pod_id"].notna()]
    pod = int(shared["pod_id"].iloc[0])
    held = set(rows.loc[rows["pod_id"].eq(pod), "gpu_id"].astype(int))
    got = repository.units_held_by(engine, START_TS, END_TS + 3600, [pod])
    assert got == sorted(_physical_units(engine, held))
    assert len(got) > len(held)  # a MIG instance brings its GPU's other instances


FAIL_DAY = 1_794_355_200  # 2026-11-10: the fleet's one failing GPU's first event
SUMS = [c.name for c in HEALTH_SUM_COLUMNS if c.dtype == "float64"]


def _health_daily_days(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT DISTINCT day_ts FROM gpu_health_daily ORDER BY 1"))
        return [int(r[0]) for r in rows]


def _assert_same_sums(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert got[PAIR].astype("float64").equals(want[PAIR].astype("float64"))
    np.testing.assert_allclose(got[SUMS].to_numpy(), want[SUMS].to_numpy(), rtol=1e-12)


def test_the_loader_builds_each_finished_days_health_sums(engine: Engine) -> None:
    days = _health_daily_days(engine)
    assert days == list(range(END_TS - END_TS % DAY_S - 10 * DAY_S, END_TS - END_TS % DAY_S, DAY_S))
    with engine.connect() as conn:
        onset = conn.execute(sa.text("SELECT MIN(fail_since_ts) FROM gpu_health_daily"))
        assert FAIL_DAY <= int(onset.scalar_one()) < FAIL_DAY + DAY_S


def test_built_days_are_read_from_their_health_sums(engine: Engine) -> None:
    before = _by_pair(repository.load_health_sums(engine, START_TS, END_TS + 3600))
    with engine.begin() as conn:  # a planted sum: read from the hourly rows, it would not show
        pair = conn.execute(
            sa.text("SELECT gpu_id, pod_id FROM gpu_health_daily WHERE day_ts = :d LIMIT 1"),
            {"d": FAIL_DAY + DAY_S},
        ).one()
        conn.execute(
            sa.text(
                "UPDATE gpu_health_daily SET data_s = data_s + 1000"
                " WHERE day_ts = :d AND gpu_id = :g AND pod_id = :p"
            ),
            {"d": FAIL_DAY + DAY_S, "g": pair[0], "p": pair[1]},
        )
    after = _by_pair(repository.load_health_sums(engine, START_TS, END_TS + 3600))
    assert (after["data_s"] - before["data_s"]).tolist().count(1000.0) == 1
    assert after["data_s"].sum() - before["data_s"].sum() == 1000


def test_days_not_built_are_summed_from_their_hourly_rows(engine: Engine) -> None:
    built = _by_pair(repository.load_health_sums(engine, START_TS, END_TS + 3600))
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE gpu_daily_state SET built_version = NULL"))
    hourly = _by_pair(repository.load_health_sums(engine, START_TS, END_TS + 3600))
    _assert_same_sums(built, hourly)
    assert built["fail_s"].gt(0).sum() >= 1  # counted across days read from their sums


def test_a_write_drops_its_days_health_sums_until_the_next_build(engine: Engine) -> None:
    with engine.begin() as conn:
        rollup.roll_up(conn, FAIL_DAY + 5 * 3600, FAIL_DAY + 6 * 3600)
    assert FAIL_DAY not in _health_daily_days(engine)
    stored, summed = _both(engine, START_TS, END_TS + 3600)
    _assert_same_sums(stored, summed)
    assert daily.build_pending(engine, END_TS) == 1
    assert FAIL_DAY in _health_daily_days(engine)
    stored, summed = _both(engine, START_TS, END_TS + 3600)
    _assert_same_sums(stored, summed)
    assert stored["fail_s"].gt(0).any()


def test_compaction_drops_the_health_sums_before_its_cut(engine: Engine) -> None:
    with engine.begin() as conn:
        rollup.compact(conn, END_TS, raw_keep_s=DAY_S, hourly_keep_s=END_TS - FAIL_DAY)
    assert _health_daily_days(engine)[0] == FAIL_DAY
