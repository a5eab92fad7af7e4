"""The simulated exporter's efficiency and health fields, and the scenarios the demo shows.

Expected values are worked out by hand from the declared scenarios (docs/simulation.md): event
instants, driver loads every 90 days from 2026-01-01, aggregate counts from 2025-01-01.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from gpuwatch.domain.health import decode_clock_events, throttle_reasons
from gpuwatch.simulate.exposition import PROF_UTIL, render
from gpuwatch.simulate.fleet import Fleet, GpuUnit, NodeSpec, build_fleet
from gpuwatch.simulate.generate import sample_at
from gpuwatch.simulate.pods import pod_instances
from tests.test_simulate_exposition import Sample, parse_exposition

PROD, RESEARCH = "prod-us-east", "research-eu"
EVENTS = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
THROTTLE = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"
SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"
TENSOR = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
DRAM = "DCGM_FI_PROF_DRAM_ACTIVE"
OCCUPANCY = "DCGM_FI_PROF_SM_OCCUPANCY"
SBE_VOL, SBE_AGG = "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL"
DBE_VOL, DBE_AGG = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"
REPLAYS = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
XID = "DCGM_FI_DEV_XID_ERRORS"
NVLINK_ERRORS = {
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
}
PROFILING = {
    SM_ACTIVE,
    OCCUPANCY,
    TENSOR,
    DRAM,
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
}
NVLINK_BYTES = {"DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES"}
ECC = {SBE_VOL, SBE_AGG, DBE_VOL, DBE_AGG}


def _ts(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


MONDAY_AFTERNOON = _ts("2026-11-16T14:10")  # 1794838200


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return build_fleet(7)


def _node(fleet: Fleet, cluster: str, alias: str) -> NodeSpec:
    return next(n for n in fleet.nodes if (n.cluster, n.alias) == (cluster, alias))


def _gpu(fleet: Fleet, cluster: str, alias: str, index: int) -> GpuUnit:
    name = _node(fleet, cluster, alias).name
    return next(
        u
        for u in fleet.units
        if (u.cluster, u.node, u.gpu_index, u.mig_gi_id) == (cluster, name, index, -1)
    )


def _samples(fleet: Fleet, ts: int, node: NodeSpec) -> list[Sample]:
    return parse_exposition(render(fleet, ts, sample_at(fleet, ts), node.cluster, node.name))


def _by_gpu(samples: list[Sample], family: str) -> dict[str, str]:
    """GPU index → the family's value, for whole-GPU series."""
    return {
        s.labels["gpu"]: s.text
        for s in samples
        if s.name == family and "GPU_I_ID" not in s.labels and "vgpu" not in s.labels
    }


def _reading(fleet: Fleet, ts: int, unit: GpuUnit, family: str) -> str | None:
    node = fleet.node(unit.cluster, unit.node)
    found = [
        s.text
        for s in _samples(fleet, ts, node)
        if s.name == family and s.labels.get("UUID", s.labels.get("uuid")) == unit.uuid
    ]
    assert len(found) <= 1
    return found[0] if found else None


# -- throttling ----------------------------------------------------------------------------


def test_the_hot_node_is_held_down_by_heat_in_the_afternoon(fleet: Fleet) -> None:
    samples = _samples(fleet, MONDAY_AFTERNOON, _node(fleet, PROD, "h1"))
    (pod,) = {s.labels.get("pod", "") for s in samples if s.name == EVENTS}
    assert pod.startswith("llm-sft-")
    assert _by_gpu(samples, EVENTS) == {str(i): "32" for i in range(8)}  # 0x20 SW thermal
    assert _by_gpu(samples, SM_CLOCK) == {str(i): "1584" for i in range(8)}  # 0.8 × 1980 MHz
    assert throttle_reasons(32) == ["thermal_throttle"]


def test_the_hot_node_is_held_down_by_the_power_cap_in_the_evening(fleet: Fleet) -> None:
    samples = _samples(fleet, _ts("2026-11-16T20:30"), _node(fleet, PROD, "h1"))
    assert _by_gpu(samples, EVENTS) == {str(i): "4" for i in range(8)}  # 0x4 SW power cap
    assert _by_gpu(samples, SM_CLOCK) == {str(i): "1723" for i in range(8)}  # 0.87 × 1980
    assert throttle_reasons(4) == ["power_throttle"]


def test_other_busy_gpus_run_at_boost_and_idle_ones_say_so(fleet: Fleet) -> None:
    samples = _samples(fleet, MONDAY_AFTERNOON, _node(fleet, PROD, "a2"))
    assert _by_gpu(samples, EVENTS) == {str(i): "0" for i in range(8)}
    assert _by_gpu(samples, SM_CLOCK) == {str(i): "1410" for i in range(8)}
    idle = _samples(fleet, MONDAY_AFTERNOON, _node(fleet, RESEARCH, "rh1"))
    # rlhf-train holds GPUs 0-3; 4-7 are free: idle clock and the GPU-idle bit only.
    assert {g: _by_gpu(idle, EVENTS)[g] for g in "4567"} == dict.fromkeys("4567", "1")
    assert {g: _by_gpu(idle, SM_CLOCK)[g] for g in "4567"} == dict.fromkeys("4567", "210")
    assert decode_clock_events(1) == ["gpu_idle"] and throttle_reasons(1) == []


def test_one_node_names_the_clock_events_by_the_older_name(fleet: Fleet) -> None:
    for cluster in (PROD, RESEARCH):
        text = render(fleet, MONDAY_AFTERNOON, sample_at(fleet, MONDAY_AFTERNOON), cluster)
        samples = parse_exposition(text)
        legacy = {s.labels.get("Hostname") for s in samples if s.name == THROTTLE}
        current = {s.labels.get("Hostname") for s in samples if s.name == EVENTS}
        if cluster == PROD:
            assert legacy == set() and len(current) > 20
        else:
            assert legacy == {_node(fleet, RESEARCH, "ra0").name}
            assert legacy.isdisjoint(current)
    ra0 = _samples(fleet, MONDAY_AFTERNOON, _node(fleet, RESEARCH, "ra0"))
    assert _by_gpu(ra0, THROTTLE) == {str(i): "1" for i in range(8)}  # vit-finetune not running


# -- the failing GPU -----------------------------------------------------------------------

# GPU 5 of a7 fails every Wednesday at 10:00 UTC: 2025-01-01 was a Wednesday, and 2026-11-18 is
# 686 days (98 weeks) later, so 98 failures lie before that morning and the 99th happens then.


def test_the_failing_gpu_reports_a_dbe_and_xid_79_while_its_pod_holds_it(fleet: Fleet) -> None:
    gpu = _gpu(fleet, PROD, "a7", 5)
    before, failed = _ts("2026-11-18T09:55"), _ts("2026-11-18T10:00")
    assert [_reading(fleet, before, gpu, f) for f in (DBE_VOL, DBE_AGG, XID)] == ["0", "98", "0"]
    assert [_reading(fleet, failed, gpu, f) for f in (DBE_VOL, DBE_AGG, XID)] == ["1", "99", "79"]
    late = _ts("2026-11-18T15:59")
    assert [_reading(fleet, late, gpu, f) for f in (DBE_VOL, DBE_AGG, XID)] == ["1", "99", "79"]
    node = fleet.node(gpu.cluster, gpu.node)
    holders = [s for s in _samples(fleet, failed, node) if s.name == XID and s.text == "79"]
    assert len(holders) == 1 and holders[0].labels["pod"].startswith("recsys-serving-")
    assert holders[0].labels["namespace"] == "recsys"


def test_the_failing_gpu_falls_silent_and_comes_back_reset(fleet: Fleet) -> None:
    gpu = _gpu(fleet, PROD, "a7", 5)
    node = fleet.node(gpu.cluster, gpu.node)
    for when in ("2026-11-18T16:00", "2026-11-19T09:59"):
        samples = _samples(fleet, _ts(when), node)
        assert {s.labels["gpu"] for s in samples if s.name == PROF_UTIL} == set("0123467")
        assert _reading(fleet, _ts(when), gpu, PROF_UTIL) is None
    back = _ts("2026-11-19T10:00")
    assert [_reading(fleet, back, gpu, f) for f in (DBE_VOL, DBE_AGG, XID)] == ["0", "99", "0"]


def test_the_demo_rows_follow_the_failure(fleet: Fleet) -> None:
    gpu = _gpu(fleet, PROD, "a7", 5)
    for when, present, xid in (
        ("2026-11-18T09:55", True, 0),
        ("2026-11-18T10:00", True, 79),
        ("2026-11-18T16:00", False, None),
        ("2026-11-19T10:00", True, 0),
    ):
        rows = sample_at(fleet, _ts(when), step_s=300)
        mine = rows[rows["uuid"] == gpu.uuid]
        assert len(mine) == int(present), when
        if present:
            assert int(mine["xid"].iloc[0]) == xid, when
    failed = sample_at(fleet, _ts("2026-11-18T10:00"), step_s=300)
    row = failed[failed["uuid"] == gpu.uuid].iloc[0]
    assert row["ecc_dbe_count"] == 1.0
    assert str(row["pod"]).startswith("recsys-serving-")
    later = sample_at(fleet, _ts("2026-11-18T10:05"), step_s=300)
    assert np.isnan(later[later["uuid"] == gpu.uuid]["ecc_dbe_count"].iloc[0])
    # Back after the silence: no reading a step earlier, so no increase (no data, never 0).
    back = sample_at(fleet, _ts("2026-11-19T10:00"), step_s=300)
    assert np.isnan(back[back["uuid"] == gpu.uuid]["ecc_dbe_count"].iloc[0])


# -- application XID -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("when", "expected"),
    [("2026-11-16T22:59", "0"), ("2026-11-16T23:02", "13"), ("2026-11-16T23:05", "0")],
)
def test_a_trial_hits_xid_13_every_night(fleet: Fleet, when: str, expected: str) -> None:
    ts = _ts(when)
    samples = _samples(fleet, ts, _node(fleet, PROD, "a2"))
    trials = {
        s.labels["pod"]: s.text
        for s in samples
        if s.name == XID and s.labels.get("pod", "").startswith("hpo-trial-")
    }
    assert len(trials) == 4
    (second,) = [
        i.name
        for i in pod_instances(fleet, ts, ts + 1)
        if fleet.workloads[i.workload].name == "hpo-trial" and i.replica == 1
    ]
    assert trials[second] == expected
    assert all(v == "0" for pod, v in trials.items() if pod != second)


# -- counter noise -------------------------------------------------------------------------


def test_sbe_noise_counts_one_error_every_two_hours(fleet: Fleet) -> None:
    gpu = _gpu(fleet, PROD, "a3", 2)
    # Events at 00:17, 02:17, ...: 49 days of 12 since the driver load of 2026-09-28, then
    # 00:17 ... 12:17 on 2026-11-16; 684 days of 12 plus 7 since 2025-01-01.
    assert _reading(fleet, MONDAY_AFTERNOON, gpu, SBE_VOL) == "595"
    assert _reading(fleet, MONDAY_AFTERNOON, gpu, SBE_AGG) == "8215"
    # The driver loads again on 2026-12-27: the volatile count restarts, the aggregate goes on.
    assert _reading(fleet, _ts("2026-12-26T23:59"), gpu, SBE_VOL) == "1080"
    assert _reading(fleet, _ts("2026-12-27T00:20"), gpu, SBE_VOL) == "1"
    assert (
        _reading(fleet, _ts("2026-12-27T00:20"), gpu, SBE_AGG) == "8701"
    )  # 5 more on 11-16, 40 days of 12, then 00:17
    neighbour = _gpu(fleet, PROD, "a3", 3)
    assert _reading(fleet, MONDAY_AFTERNOON, neighbour, SBE_VOL) == "0"


def test_pcie_replay_noise_counts_four_an_hour(fleet: Fleet) -> None:
    gpu = _gpu(fleet, PROD, "l0", 1)
    # Events at :07, :22, :37, :52: 49 days of 96, then 57 on 2026-11-16 up to 14:07.
    assert _reading(fleet, MONDAY_AFTERNOON, gpu, REPLAYS) == "4761"
    assert _reading(fleet, MONDAY_AFTERNOON, gpu, SBE_VOL) is None  # L4 nodes run ECC off


def test_demo_increases_are_what_the_collector_computes_from_the_counters(fleet: Fleet) -> None:
    gpu = _gpu(fleet, PROD, "a3", 2)
    steps = {}
    for when in ("2026-11-16T12:15", "2026-11-16T12:20", "2026-11-16T12:25"):
        rows = sample_at(fleet, _ts(when), step_s=300)
        steps[when] = rows[rows["uuid"] == gpu.uuid]["ecc_sbe_count"].iloc[0]
    # The 12:17 error falls in the step (12:15, 12:20]: one increase, the other steps none.
    assert np.isnan(steps["2026-11-16T12:15"]) and np.isnan(steps["2026-11-16T12:25"])
    assert steps["2026-11-16T12:20"] == 1.0
    first = int(_reading(fleet, _ts("2026-11-16T12:15"), gpu, SBE_VOL) or "")
    second = int(_reading(fleet, _ts("2026-11-16T12:20"), gpu, SBE_VOL) or "")
    assert (first, second) == (594, 595)


# -- profiling fields ----------------------------------------------------------------------


def _profiling(fleet: Fleet, alias: str, cluster: str = PROD) -> dict[str, dict[str, float]]:
    """Per held whole GPU of the node: engine, SM, tensor and DRAM activity at Monday 14:10."""
    out: dict[str, dict[str, float]] = {}
    for s in _samples(fleet, MONDAY_AFTERNOON, _node(fleet, cluster, alias)):
        if s.name in (PROF_UTIL, SM_ACTIVE, TENSOR, DRAM) and "pod" in s.labels:
            out.setdefault(s.labels["pod"] + "/" + s.labels["gpu"], {})[s.name] = s.value
    return out


def test_the_input_bound_job_is_busy_with_few_sms_working(fleet: Fleet) -> None:
    gpus = _profiling(fleet, "a4")
    assert len(gpus) == 8 and all(k.startswith("vision-train-sweep-") for k in gpus)
    for v in gpus.values():
        assert v[PROF_UTIL] >= 0.5 and v[SM_ACTIVE] < 0.25 and v[DRAM] < 0.1
        assert v[SM_ACTIVE] == pytest.approx(round(v[PROF_UTIL] * 0.28, 6), abs=1e-12)


def test_the_fp32_job_never_touches_the_tensor_cores(fleet: Fleet) -> None:
    gpus = {k: v for k, v in _profiling(fleet, "a2").items() if "feature-backfill" in k}
    assert len(gpus) == 4
    for v in gpus.values():
        assert v[PROF_UTIL] >= 0.5 and v[SM_ACTIVE] >= 0.4 and v[TENSOR] == 0.0


def test_the_healthy_training_job_uses_sms_and_tensor_cores(fleet: Fleet) -> None:
    gpus = {k: v for k, v in _profiling(fleet, "a2").items() if "recsys-train" in k}
    assert len(gpus) == 4
    for v in gpus.values():
        assert v[SM_ACTIVE] >= 0.75 and v[TENSOR] >= 0.4
        assert v[TENSOR] == pytest.approx(round(v[SM_ACTIVE] * 0.6, 6), abs=1e-12)


def test_the_memory_bound_job_keeps_dram_busy_with_few_sms(fleet: Fleet) -> None:
    gpus = _profiling(fleet, "rh1", RESEARCH)
    assert len(gpus) == 4 and all(k.startswith("rlhf-train-") for k in gpus)
    for v in gpus.values():
        assert v[PROF_UTIL] >= 0.5 and v[SM_ACTIVE] < 0.25 and v[DRAM] >= 0.5


@pytest.mark.parametrize("cluster", [PROD, RESEARCH])
def test_profiling_gauges_are_consistent_with_utilization(fleet: Fleet, cluster: str) -> None:
    text = render(fleet, MONDAY_AFTERNOON, sample_at(fleet, MONDAY_AFTERNOON), cluster)
    series: dict[tuple[tuple[str, str], ...], dict[str, float]] = {}
    for s in parse_exposition(text):
        key = tuple(sorted(s.labels.items()))
        series.setdefault(key, {})[s.name] = s.value
    checked = 0
    for values in series.values():
        if SM_ACTIVE not in values:
            assert PROFILING.isdisjoint(values)
            continue
        engine = values[PROF_UTIL]
        if engine > 1.0:
            continue  # the blank sentinel
        assert 0.0 <= values[SM_ACTIVE] <= engine
        assert 0.0 <= values[TENSOR] <= values[SM_ACTIVE]
        assert 0.0 <= values[OCCUPANCY] <= 1.0 and 0.0 <= values[DRAM] <= 1.0
        checked += 1
    assert checked > 80


# -- which series carry which fields -------------------------------------------------------


@pytest.mark.parametrize(
    ("cluster", "alias", "present", "absent"),
    [
        (PROD, "a0", PROFILING | NVLINK_BYTES | ECC | NVLINK_ERRORS, set()),
        (PROD, "l0", PROFILING | {REPLAYS}, ECC | NVLINK_BYTES | NVLINK_ERRORS),
        (PROD, "t0", ECC | {REPLAYS}, PROFILING | NVLINK_BYTES | NVLINK_ERRORS),
        (PROD, "h3", PROFILING | ECC, NVLINK_BYTES | NVLINK_ERRORS),
    ],
)
def test_fields_exist_only_where_the_gpu_provides_them(
    fleet: Fleet, cluster: str, alias: str, present: set[str], absent: set[str]
) -> None:
    node = _node(fleet, cluster, alias)
    samples = _samples(fleet, MONDAY_AFTERNOON, node)
    names = {s.name for s in samples}
    assert present <= names and not absent & names
    units = sum(1 for u in fleet.units if u.node == node.name)
    for family in present:
        assert sum(1 for s in samples if s.name == family) == units, family
    remap = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
    assert (remap in names) == (alias[0] in "ah")


def test_counters_are_typed_as_counters(fleet: Fleet) -> None:
    text = render(fleet, MONDAY_AFTERNOON, sample_at(fleet, MONDAY_AFTERNOON), PROD)
    types = dict(line.split(" ")[2:4] for line in text.splitlines() if line.startswith("# TYPE "))
    for family in ECC | NVLINK_ERRORS | {REPLAYS}:
        assert types[family] == "counter", family
    for family in PROFILING | NVLINK_BYTES | {EVENTS, SM_CLOCK}:
        assert types[family] == "gauge", family
