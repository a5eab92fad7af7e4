"""Efficiency and health readings from a real Prometheus to the store and back: every field of
the catalogue into ``gpu_samples``, the hourly ``gpu_health_hourly`` rows, and the health frame.

The exposition is written here, minute by minute, so that every stored value and every hourly
sum below can be worked out by hand: two hours (H0 = the ISO week's first hour, H1 the next), a
60 s step, one scrape exactly on each grid instant (minute m is instant H0 + 60 m).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd
import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.collectors.collect import Window, collect
from gpuwatch.collectors.dcgm import page_samples
from gpuwatch.collectors.prometheus import PrometheusSource
from gpuwatch.collectors.promql import Catalogue
from gpuwatch.collectors.slots import fill_free_slots
from gpuwatch.domain.labels import LabelVariants
from gpuwatch.report.weekly import iso_week_bounds
from gpuwatch.store import repository, rollup
from gpuwatch.store.engine import make_engine, upgrade
from gpuwatch.store.models import HEALTH_SAMPLE_FIELDS
from tests.support import dcgm_fixture as fx
from tests.support.prometheus import PrometheusProcess, Series, prometheus_with_blocks

H0 = iso_week_bounds("2026-W46")[0]
H1 = H0 + 3600
END = H0 + 7200
MINUTES = range(120)

H100 = fx.Unit("gpu-node-h", "GPU-h0000000", 0, "NVIDIA H100 80GB HBM3", namespace="ml",
               pod="train-h-0")  # fmt: skip
T4 = fx.Unit("gpu-node-t", "GPU-t0000000", 0, "Tesla T4")
L40S = fx.Unit("gpu-node-l", "GPU-l0000000", 0, "NVIDIA L40S", namespace="web", pod="chat-0")
#: A GPU whose only pod-labelled series is a profiling one, and one with profiling series only.
STRAY = fx.Unit("gpu-node-l", "GPU-l0000001", 1, "NVIDIA L40S")
ONLY_PROFILING = fx.Unit("gpu-node-l", "GPU-l0000002", 2, "NVIDIA L40S")


def _series(metric: str, unit: fx.Unit, value: Callable[[int], float], **labels: str) -> Series:
    return Series(metric, fx.labels(unit) | labels, [(H0 + 60 * m, value(m)) for m in MINUTES])


def _sbe(m: int) -> float:
    """A volatile SBE counter: +3 at minute 10, +2 at 20, reset to 0 at 70, then 2 at 80."""
    return 0 if m < 10 else 3 if m < 20 else 5 if m < 70 else 0 if m < 80 else 2


def _h100() -> list[Series]:
    """Busy (0.8) with few SMs and no tensor work in H0; 0.3 busy with SMs and tensors in H1,
    power-capped and thermally throttled its first 15 minutes. A DRAM blank sentinel at minute
    30, an occupancy of 5 (no ratio) at 31; XID 13 at minute 5 and 79 at 95; NVLink CRC and
    replay errors (4 + 1) at minute 100; a PCIe replay counter that never moves."""
    return [
        _series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", H100, lambda m: 0.8 if m < 60 else 0.3),
        _series("DCGM_FI_DEV_FB_USED", H100, lambda m: 1000),
        _series("DCGM_FI_DEV_FB_FREE", H100, lambda m: 80000),
        _series("DCGM_FI_DEV_GPU_TEMP", H100, lambda m: 60),
        _series("DCGM_FI_DEV_XID_ERRORS", H100, lambda m: {5: 13, 95: 79}.get(m, 0)),
        _series("DCGM_FI_PROF_SM_ACTIVE", H100, lambda m: 0.2 if m < 60 else 0.6),
        _series("DCGM_FI_PROF_SM_OCCUPANCY", H100, lambda m: 5.0 if m == 31 else 0.1),
        _series("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", H100, lambda m: 0.0 if m < 60 else 0.4),
        _series("DCGM_FI_PROF_DRAM_ACTIVE", H100, lambda m: fx.SENTINEL if m == 30 else 0.7),
        _series("DCGM_FI_DEV_SM_CLOCK", H100, lambda m: 1980 if m < 60 else 1500),
        _series("DCGM_FI_PROF_PCIE_TX_BYTES", H100, lambda m: 1e9),
        _series("DCGM_FI_PROF_PCIE_RX_BYTES", H100, lambda m: 5e8),
        _series("DCGM_FI_PROF_NVLINK_TX_BYTES", H100, lambda m: 2e9),
        _series("DCGM_FI_PROF_NVLINK_RX_BYTES", H100, lambda m: 2.5e9),
        _series("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", H100, lambda m: 0x44 if 60 <= m < 75 else 1),
        _series("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", H100, _sbe),
        _series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", H100, lambda m: 0),
        _series("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", H100, lambda m: 7),
        _series("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", H100, lambda m: 4 * (m >= 100)),
        _series("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", H100, lambda m: 1 * (m >= 100)),
        _series("DCGM_FI_DEV_ROW_REMAP_FAILURE", H100, lambda m: 0),
    ]


def _t4() -> list[Series]:
    """No profiling fields; the clock-event metric under its old name only: thermal slowdown
    (0x20) the first 30 minutes, then none. A DBE (aggregate counter) at minute 40, a row-remap
    failure from minute 45. Held by nobody."""
    return [
        _series("DCGM_FI_DEV_GPU_UTIL", T4, lambda m: 90),
        _series("DCGM_FI_DEV_FB_USED", T4, lambda m: 500),
        _series("DCGM_FI_DEV_FB_FREE", T4, lambda m: 14000),
        _series("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", T4, lambda m: 0x20 if m < 30 else 0),
        _series("DCGM_FI_DEV_SM_CLOCK", T4, lambda m: 1590),
        _series("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", T4, lambda m: 1 * (m >= 40)),
        _series("DCGM_FI_DEV_ROW_REMAP_FAILURE", T4, lambda m: 1 * (m >= 45)),
    ]


def _others() -> list[Series]:
    """An L40S without any of the new fields; one whose temperature series names no pod while
    its SM-active series does; one with an SM-active series alone."""
    ghost = {"pod": "ghost-0", "namespace": "web"}
    return [
        _series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", L40S, lambda m: 0.5),
        _series("DCGM_FI_DEV_FB_USED", L40S, lambda m: 2000),
        _series("DCGM_FI_DEV_GPU_TEMP", L40S, lambda m: 45),
        _series("DCGM_FI_DEV_GPU_TEMP", STRAY, lambda m: 40),
        _series("DCGM_FI_PROF_SM_ACTIVE", STRAY, lambda m: 0.5, **ghost),
        _series("DCGM_FI_PROF_SM_ACTIVE", ONLY_PROFILING, lambda m: 0.5),
    ]


pytestmark = pytest.mark.prometheus


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    folder = tmp_path_factory.mktemp("health-prometheus")
    with prometheus_with_blocks([*_h100(), *_t4(), *_others()], folder) as server:
        yield server


def _collect(engine: Engine, url: str, page_s: int = 7200) -> Any:
    source = PrometheusSource(url, Catalogue(), retries=1, backoff_s=0.01)
    window = Window(H0, END, 60, page_s)
    return collect(engine, "lab", window, source, None, LabelVariants(), now_ts=END)


SAMPLES = (
    f"SELECT g.uuid, s.ts, p.name AS pod, {', '.join(f's.{n}' for n in HEALTH_SAMPLE_FIELDS)} "
    "FROM gpu_samples s JOIN gpus g ON g.id = s.gpu_id LEFT JOIN pods p ON p.id = s.pod_id "
    "ORDER BY g.uuid, s.ts"
)


def _samples(engine: Engine) -> dict[tuple[str, int], tuple[Any, ...]]:
    """(GPU UUID, minute) → pod and the health readings in HEALTH_SAMPLE_FIELDS order."""
    with engine.connect() as conn:
        rows = conn.execute(sa.text(SAMPLES)).all()
    return {(r[0], (r[1] - H0) // 60): tuple(r[2:]) for r in rows}


HOURLY = (
    "SELECT g.uuid, h.* FROM gpu_health_hourly h JOIN gpus g ON g.id = h.gpu_id "
    "ORDER BY g.uuid, h.hour_ts, h.pod_id"
)


def _hourly(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text(HOURLY)).mappings().all()
    return [{k: v for k, v in row.items() if k not in ("gpu_id", "pod_id")} for row in rows]


NA = None  # a NULL, in the tables below
# HEALTH_SAMPLE_FIELDS: sm_active, sm_occupancy, tensor, dram, sm_clock_mhz, pcie_bytes_per_s,
# nvlink_bytes_per_s, clock_events, ecc_sbe, ecc_dbe, pcie_replay, nvlink_error, row_remap.
H100_AT: dict[int, tuple[Any, ...]] = {
    0: (0.2, 0.1, 0.0, 0.7, 1980.0, 1.5e9, 4.5e9, 1, NA, NA, NA, NA, NA),
    10: (0.2, 0.1, 0.0, 0.7, 1980.0, 1.5e9, 4.5e9, 1, 3, NA, NA, NA, NA),
    20: (0.2, 0.1, 0.0, 0.7, 1980.0, 1.5e9, 4.5e9, 1, 2, NA, NA, NA, NA),
    30: (0.2, 0.1, 0.0, NA, 1980.0, 1.5e9, 4.5e9, 1, NA, NA, NA, NA, NA),
    31: (0.2, NA, 0.0, 0.7, 1980.0, 1.5e9, 4.5e9, 1, NA, NA, NA, NA, NA),
    60: (0.6, 0.1, 0.4, 0.7, 1500.0, 1.5e9, 4.5e9, 0x44, NA, NA, NA, NA, NA),
    70: (0.6, 0.1, 0.4, 0.7, 1500.0, 1.5e9, 4.5e9, 0x44, NA, NA, NA, NA, NA),
    80: (0.6, 0.1, 0.4, 0.7, 1500.0, 1.5e9, 4.5e9, 1, 2, NA, NA, NA, NA),
    100: (0.6, 0.1, 0.4, 0.7, 1500.0, 1.5e9, 4.5e9, 1, NA, NA, NA, 5, NA),
}
T4_AT: dict[int, tuple[Any, ...]] = {
    0: (NA, NA, NA, NA, 1590.0, NA, NA, 0x20, NA, NA, NA, NA, NA),
    30: (NA, NA, NA, NA, 1590.0, NA, NA, 0, NA, NA, NA, NA, NA),
    40: (NA, NA, NA, NA, 1590.0, NA, NA, 0, NA, 1, NA, NA, NA),
    45: (NA, NA, NA, NA, 1590.0, NA, NA, 0, NA, NA, NA, NA, 1),
}
NO_READINGS = (NA,) * 13


def test_every_field_reaches_gpu_samples_exactly(collected: Engine) -> None:
    samples = _samples(collected)
    for minute, want in H100_AT.items():
        assert samples[("GPU-h0000000", minute)] == ("train-h-0", *want), minute
    for minute, want in T4_AT.items():
        assert samples[("GPU-t0000000", minute)] == (None, *want), minute
    assert {v for (uuid, _m), v in samples.items() if uuid == "GPU-l0000000"} == {
        ("chat-0", *NO_READINGS)
    }
    # counts only where they increased: the SBE counter's reset (minute 70) is no increase
    sbe = {m: v[9] for (uuid, m), v in samples.items() if uuid == "GPU-h0000000" and v[9]}
    assert sbe == {10: 3, 20: 2, 80: 2}
    assert [m for (uuid, m), v in samples.items() if uuid == "GPU-h0000000" and v[12]] == [100]
    throttled = [m for (u, m), v in samples.items() if u == "GPU-h0000000" and v[8] == 0x44]
    assert throttled == list(range(60, 75))
    remapped = [m for (u, m), v in samples.items() if u == "GPU-t0000000" and v[13] == 1]
    assert remapped == list(range(45, 120))
    assert all(type(v[8]) is int for v in samples.values() if v[8] is not None)


def test_health_series_never_decide_attribution_nor_make_rows(collected: Engine) -> None:
    samples = _samples(collected)
    stray = {v for (uuid, _m), v in samples.items() if uuid == "GPU-l0000001"}
    assert stray == {(None, 0.5, *NO_READINGS[1:])}, "its pod-labelled series is SM active"
    assert not [k for k in samples if k[0] == "GPU-l0000002"]
    with collected.connect() as conn:
        pods = {r[0] for r in conn.execute(sa.text("SELECT name FROM pods"))}
    assert pods == {"train-h-0", "chat-0"}


def _row(uuid: str, hour: int, **values: Any) -> dict[str, Any]:
    base = {"uuid": uuid, "hour_ts": hour, "data_s": 3600, "first_ts": hour,
            "last_ts": hour + 3540, "util_data_s": 3600, "busy_sm_data_s": 0, "busy_low_sm_s": 0,
            "busy_tensor_data_s": 0, "busy_no_tensor_s": 0, "clock_data_s": 3600,
            "throttled_s": 0, "thermal_s": 0, "power_cap_s": 0, "hw_slowdown_s": 0}  # fmt: skip
    nothing = {"sm_active_s": 0.0, "sm_data_s": 0, "sm_occupancy_s": 0.0,
               "sm_occupancy_data_s": 0, "tensor_active_s": 0.0, "tensor_data_s": 0,
               "dram_active_s": 0.0, "dram_data_s": 0, "sm_clock_mhz_sum": NA, "sm_clock_n": 0,
               "pcie_bytes_sum": NA, "pcie_bytes_n": 0, "nvlink_bytes_sum": NA,
               "nvlink_bytes_n": 0, "ecc_sbe": NA, "ecc_dbe": NA, "pcie_replays": NA,
               "nvlink_errors": NA, "row_remap_failure": NA, "fail_first_ts": NA, "fail_xid": NA,
               "app_xid": NA, "other_xid": NA}  # fmt: skip
    return base | nothing | values


#: The rows worked out by hand from the exposition (the L40S without the new fields has none;
#: the one with a stray SM-active series has its SM activity, held by nobody).
HOURLY_ROWS = [
    _row("GPU-h0000000", H0, util_s=0.8 * 3600, sm_active_s=0.2 * 3600, sm_data_s=3600,
         sm_occupancy_s=0.1 * 3540, sm_occupancy_data_s=3540, tensor_active_s=0.0,
         tensor_data_s=3600, dram_active_s=0.7 * 3540, dram_data_s=3540, busy_sm_data_s=3600,
         busy_low_sm_s=3600, busy_tensor_data_s=3600, busy_no_tensor_s=3600,
         sm_clock_mhz_sum=1980.0 * 60, sm_clock_n=60, pcie_bytes_sum=1.5e9 * 60,
         pcie_bytes_n=60, nvlink_bytes_sum=4.5e9 * 60, nvlink_bytes_n=60, ecc_sbe=5, app_xid=13),
    _row("GPU-h0000000", H1, util_s=0.3 * 3600, sm_active_s=0.6 * 3600, sm_data_s=3600,
         sm_occupancy_s=0.1 * 3600, sm_occupancy_data_s=3600, tensor_active_s=0.4 * 3600,
         tensor_data_s=3600, dram_active_s=0.7 * 3600, dram_data_s=3600, throttled_s=900,
         thermal_s=900, power_cap_s=900, sm_clock_mhz_sum=1500.0 * 60, sm_clock_n=60,
         pcie_bytes_sum=1.5e9 * 60, pcie_bytes_n=60, nvlink_bytes_sum=4.5e9 * 60,
         nvlink_bytes_n=60, ecc_sbe=2, nvlink_errors=5, fail_first_ts=H0 + 95 * 60,
         fail_xid=79),
    *(
        _row("GPU-l0000001", hour, util_s=0.0, util_data_s=0, sm_active_s=0.5 * 3600,
             sm_data_s=3600, clock_data_s=0)
        for hour in (H0, H1)
    ),
    _row("GPU-t0000000", H0, util_s=0.9 * 3600, throttled_s=1800, thermal_s=1800,
         sm_clock_mhz_sum=1590.0 * 60, sm_clock_n=60, ecc_dbe=1, row_remap_failure=1,
         fail_first_ts=H0 + 40 * 60),
    _row("GPU-t0000000", H1, util_s=0.9 * 3600, sm_clock_mhz_sum=1590.0 * 60, sm_clock_n=60,
         row_remap_failure=1, fail_first_ts=H1),
]  # fmt: skip


def _assert_rows(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert [(r["uuid"], r["hour_ts"]) for r in got] == [(r["uuid"], r["hour_ts"]) for r in want]
    for mine, theirs in zip(got, want, strict=True):
        assert set(mine) == set(theirs)
        for name, value in theirs.items():
            if isinstance(value, float):
                assert mine[name] == pytest.approx(value, rel=1e-12), (mine["uuid"], name)
            else:
                assert mine[name] == value, (mine["uuid"], mine["hour_ts"], name)


@pytest.fixture(scope="module")
def collected(prometheus: PrometheusProcess, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('health') / 'gw.db'}")
    upgrade(engine)
    _collect(engine, prometheus.url)
    return engine


@pytest.mark.parametrize("page_s", [7200, 50 * 60], ids=["one page", "pages across hours"])
def test_collect_rolls_up_the_hand_computed_hours_and_again_changes_nothing(
    prometheus: PrometheusProcess, store_url: str, page_s: int
) -> None:
    """In memory (hours first written by a page) or in SQL (hours a page adds to), and again
    with ``roll_up`` and a second collection: the same rows."""
    engine = make_engine(store_url)
    upgrade(engine)
    _collect(engine, prometheus.url, page_s)
    _assert_rows(_hourly(engine), HOURLY_ROWS)
    samples = _samples(engine)
    with engine.begin() as conn:
        rollup.roll_up(conn, H0, END)
    _assert_rows(_hourly(engine), HOURLY_ROWS)
    _collect(engine, prometheus.url, page_s)
    assert _samples(engine) == samples
    _assert_rows(_hourly(engine), HOURLY_ROWS)
    engine.dispose()


def test_the_health_frame_reads_the_hours_with_their_facts(collected: Engine) -> None:
    frame = repository.load_health_hourly(collected, H1, END)
    frame = frame.set_index("gpu_uuid")
    assert sorted(frame.index) == ["GPU-h0000000", "GPU-l0000001", "GPU-t0000000"]
    h100, t4 = frame.loc["GPU-h0000000"], frame.loc["GPU-t0000000"]
    assert (h100["cluster"], h100["node"], h100["gpu_model"]) == (
        "lab", "gpu-node-h", "NVIDIA H100 80GB HBM3")  # fmt: skip
    assert (h100["namespace"], h100["pod"], h100["workload_kind"], h100["attribution"]) == (
        "ml", "train-h-0", "Pod", "dcgm-only")  # fmt: skip
    assert (h100["ts"], h100["step_s"], h100["data_s"]) == (H1, 3600, 3600.0)
    assert h100["sm_clock_mhz"] == 1500.0
    assert h100["pcie_bytes_per_s"] == pytest.approx(1.5e9, rel=1e-12)
    assert h100["nvlink_bytes_per_s"] == pytest.approx(4.5e9, rel=1e-12)
    assert (h100["ecc_sbe"], h100["nvlink_errors"], h100["fail_xid"]) == (2, 5, 79)
    assert h100["fail_first_ts"] == H0 + 95 * 60
    assert pd.isna(h100["ecc_dbe"]) and pd.isna(h100["app_xid"])
    assert pd.isna(t4["pod"]) and pd.isna(t4["attribution"])
    assert math.isnan(t4["pcie_bytes_per_s"]) and t4["sm_clock_mhz"] == 1590.0
    assert (t4["row_remap_failure"], t4["fail_first_ts"]) == (1, H1)
    assert t4["sm_data_s"] == 0.0 and t4["clock_data_s"] == 3600.0
    assert len(repository.load_health_hourly(collected, H0, END)) == 6


# -- shared GPUs: the free-slot filler and GPUs seen whole ---------------------------------


def _metric(uuid: str, node: str, **labels: str) -> dict[str, str]:
    return {"UUID": uuid, "Hostname": node, "modelName": "NVIDIA L4", **labels}


def _point(metric: dict[str, str], value: str) -> dict[str, Any]:
    return {"metric": metric, "values": [[H0, value]]}


def test_free_slots_do_no_work_and_carry_the_gpus_state() -> None:
    """Per-pod (vgpu) series for slot 0; the device series fills slots 1-3, held by nobody:
    SM/tensor/DRAM activity and PCIe bytes 0 (the held slot carries the work), clock events
    and error counts as the GPU's."""
    held = _metric("GPU-v", "n-ts", vgpu="GPU-v::0", pod="nb-0", namespace="lab")
    device = _metric("GPU-v", "n-ts")
    results = {
        "util_prof": [_point(held, "0.6"), _point(device, "0.6")],
        "sm_active_ratio": [_point(held, "0.3"), _point(device, "0.3")],
        "pcie_bytes_per_s": [_point(held, "2e9"), _point(device, "2e9")],
        "clock_events": [_point(held, "64"), _point(device, "64")],
        "ecc_sbe_count": [_point(held, "2"), _point(device, "2")],
    }
    page = page_samples(results, LabelVariants(), 60, keep_device_slots=True)
    filled = fill_free_slots(page, {"n-ts": 4})
    slots = filled.units["slot"].to_numpy()[filled.unit].tolist()
    names = ("util_ratio", "sm_active_ratio", "pcie_bytes_per_s", "clock_events", "ecc_sbe_count")
    got = sorted(zip(slots, *(filled.values[n].tolist() for n in names), strict=True))
    assert got == [
        (0, 0.6, 0.3, 2e9, 64.0, 2.0),
        (1, 0.0, 0.0, 0.0, 64.0, 2.0),
        (2, 0.0, 0.0, 0.0, 64.0, 2.0),
        (3, 0.0, 0.0, 0.0, 64.0, 2.0),
    ]


def test_a_shared_gpu_seen_whole_gives_every_slot_its_readings() -> None:
    whole = _metric("GPU-m", "n-mps", pod="won-0", namespace="lab")
    results = {
        "util_prof": [_point(whole, "0.6")],
        "tensor_active_ratio": [_point(whole, "0.25")],
        "clock_events": [_point(whole, "4")],
    }
    page = page_samples(results, LabelVariants(), 60, keep_device_slots=True)
    filled = fill_free_slots(page, {"n-mps": 2})
    slots = filled.units["slot"].to_numpy()[filled.unit].tolist()
    names = ("tensor_active_ratio", "clock_events")
    got = sorted(zip(slots, *(filled.values[n].tolist() for n in names), strict=True))
    assert got == [(0, 0.25, 4.0), (1, 0.25, 4.0)]
    assert "sm_active_ratio" not in filled.values, "a field not read stays absent (NULL)"
