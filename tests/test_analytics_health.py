"""GPU health over a window: the worked example of docs/cost-model.md#health-and-efficiency
(two nodes, four GPUs, three hours), counted by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from gpuwatch.analytics.health import (
    HEALTH_ENTRY_KEYS,
    drain_candidates,
    failing_since,
    gpu_health,
    health_timeline,
)
from gpuwatch.domain.frames import HEALTH_COLUMNS, empty_frame
from gpuwatch.domain.health import HealthPolicy
from tests.health_rows import END, H0, H1, H2, PRICES, example, frame, hrow

POLICY = HealthPolicy()


def _by_gpu(entries: pd.DataFrame) -> dict[str, dict[str, object]]:
    return {str(r["gpu_uuid"]): dict(r) for r in entries.to_dict("records")}


def test_example_entries_worst_state_first() -> None:
    entries = gpu_health(example(), PRICES, POLICY, END)
    assert list(entries.columns[: len(HEALTH_ENTRY_KEYS)]) == list(HEALTH_ENTRY_KEYS)
    assert list(entries["gpu_uuid"]) == ["GPU-1", "GPU-3", "GPU-2", "GPU-4"]
    assert list(entries["state"]) == ["failing", "app_error", "degraded", "degraded"]
    assert list(entries["node"]) == ["n1", "n2", "n1", "n2"]


def test_example_failing_gpu() -> None:
    gpu = _by_gpu(gpu_health(example(), PRICES, POLICY, END))["GPU-1"]
    assert gpu["reasons"] == ["xid:79"]
    assert gpu["first_seen"] == H1 + 900  # the XID's instant
    assert gpu["last_seen"] == H2 + 3540
    # 45 minutes of the second hour and the whole third: 2,700 s + 3,600 s.
    assert gpu["state_hours"] == pytest.approx(1.75)
    assert gpu["failing_gpu_hours"] == pytest.approx(1.75)
    assert gpu["allocated_cost_while_failing_usd"] == pytest.approx(7.00)  # 1.75 h × $4
    assert gpu["pods"] == ["train-0"]
    assert gpu["allocated"] is True
    assert math.isnan(float(gpu["throttled_pct"]))  # type: ignore[arg-type]


def test_example_app_error_and_degraded_gpus() -> None:
    gpus = _by_gpu(gpu_health(example(), PRICES, POLICY, END))
    app = gpus["GPU-3"]
    assert (app["reasons"], app["first_seen"], app["last_seen"]) == (["xid:13"], H2, H2 + 3540)
    assert app["state_hours"] == pytest.approx(1.0)
    assert app["pods"] == ["batch-0"]
    assert app["allocated_cost_while_failing_usd"] == 0.0
    hot = gpus["GPU-2"]
    assert hot["reasons"] == ["thermal_throttle"]
    assert hot["throttled_pct"] == pytest.approx(100 / 6)  # 1,800 s of 10,800 s
    assert (hot["first_seen"], hot["last_seen"], hot["state_hours"]) == (H0, H0 + 3540, 1.0)
    sbe = gpus["GPU-4"]
    assert sbe["reasons"] == ["ecc_sbe_burst"]
    assert (sbe["first_seen"], sbe["state_hours"], sbe["pods"]) == (H1, 1.0, ["nb-0"])


def test_policy_limits_decide_degraded() -> None:
    # 16.7 % throttled is under 20 %; 12 SBE (on both slots: the GPU's, not 24) under 13.
    policy = HealthPolicy(throttle_degraded_pct=20.0, sbe_burst_per_hour=13)
    entries = gpu_health(example(), PRICES, policy, END)
    assert list(entries["gpu_uuid"]) == ["GPU-1", "GPU-3"]


def test_failing_stops_with_the_series() -> None:
    rows = [hrow("g1", H0, "train-0"), hrow("g1", H1, "train-0", fail_first_ts=H1 + 900)]
    gpu = gpu_health(frame(rows), PRICES, POLICY, END).iloc[0]
    assert gpu["state_hours"] == pytest.approx(0.75)
    assert gpu["allocated_cost_while_failing_usd"] == pytest.approx(3.00)
    assert gpu["reasons"] == []  # an event without a code: fail_first_ts alone


def test_dbe_without_instant_counts_from_the_rows_first_sample() -> None:
    rows = example()
    dbe = (rows["gpu_uuid"] == "GPU-2") & (rows["ts"] == H1)
    rows.loc[dbe, "ecc_dbe"] = 1
    rows.loc[dbe, "first_ts"] = H1 + 600
    gpu = _by_gpu(gpu_health(rows, PRICES, POLICY, END))["GPU-2"]
    assert gpu["state"] == "failing"
    assert gpu["reasons"] == ["ecc_dbe", "thermal_throttle"]
    assert gpu["first_seen"] == H1 + 600
    # 3,000 s + 3,600 s = 6,600 s = 1.8333 h, at $4.
    assert gpu["failing_gpu_hours"] == pytest.approx(6600 / 3600)
    assert gpu["allocated_cost_while_failing_usd"] == pytest.approx(6600 / 3600 * 4)


def test_failing_slot_fails_the_gpu_and_charges_the_held_slot_by_its_share() -> None:
    rows = example()
    free = (rows["gpu_id"] == 5) & (rows["ts"] == H1)
    rows.loc[free, "fail_first_ts"] = H1 + 1800
    rows.loc[free, "fail_xid"] = 48
    gpu = _by_gpu(gpu_health(rows, PRICES, POLICY, END))["GPU-4"]
    assert (gpu["state"], gpu["reasons"]) == ("failing", ["ecc_sbe_burst", "xid:48"])
    # Wall clock: 1,800 s + 3,600 s. Held slot (1/2 of the GPU): 0.25 h + 0.5 h, at $3.
    assert gpu["state_hours"] == pytest.approx(1.5)
    assert gpu["failing_gpu_hours"] == pytest.approx(0.75)
    assert gpu["allocated_cost_while_failing_usd"] == pytest.approx(2.25)
    assert gpu["pods"] == ["nb-0"]


def test_exporter_pod_is_not_a_holder() -> None:
    rows = [hrow("g3", H0, "dcgm-exporter-x", fail_first_ts=H0 + 60, fail_xid=79)]
    gpu = gpu_health(frame(rows), PRICES, POLICY, END).iloc[0]
    assert gpu["state"] == "failing"
    assert (gpu["pods"], gpu["allocated"], gpu["failing_gpu_hours"]) == ([], False, 0.0)


def test_rows_at_or_after_the_end_are_left_out() -> None:
    rows = [hrow("g3", H2, "batch-0", app_xid=13)]
    assert gpu_health(frame(rows), PRICES, POLICY, H2).empty
    assert list(gpu_health(frame(rows), PRICES, POLICY, END)["state"]) == ["app_error"]


def test_healthy_and_empty_frames_give_no_entries() -> None:
    healthy = frame([hrow("g1", h, "train-0") for h in (H0, H1)])
    assert gpu_health(healthy, PRICES, POLICY, END).empty
    empty = gpu_health(empty_frame(HEALTH_COLUMNS), PRICES, POLICY, END)
    assert empty.empty and list(empty.columns[:11]) == list(HEALTH_ENTRY_KEYS)
    assert drain_candidates(empty).empty
    assert health_timeline(empty_frame(HEALTH_COLUMNS), POLICY).empty


def test_timeline_hour_by_hour() -> None:
    line = health_timeline(example(), POLICY)
    assert len(line) == 12  # 4 GPUs × 3 hours
    got = {(r.gpu_uuid, r.ts): (r.state, r.reasons) for r in line.itertuples()}
    assert got["GPU-1", H0] == ("healthy", "")
    assert got["GPU-1", H1] == ("failing", "xid:79")
    assert got["GPU-1", H2] == ("failing", "xid:79")  # stays failing, names why
    assert got["GPU-2", H0] == ("degraded", "thermal_throttle")
    assert got["GPU-2", H1] == ("healthy", "")
    assert got["GPU-3", H2] == ("app_error", "xid:13")
    assert got["GPU-4", H1] == ("degraded", "ecc_sbe_burst")
    assert list(line["ts"]) == sorted(line["ts"])


def test_drain_candidates_are_the_failing_gpus_by_cost() -> None:
    rows = example()
    free = (rows["gpu_id"] == 5) & (rows["ts"] == H1)
    rows.loc[free, "fail_first_ts"] = H1 + 1800
    drain = drain_candidates(gpu_health(rows, PRICES, POLICY, END))
    assert list(drain["gpu_uuid"]) == ["GPU-1", "GPU-4"]  # $7.00, then $2.25
    assert list(drain["first_seen"]) == [H1 + 900, H1 + 1800]


def test_failing_since_per_physical_gpu() -> None:
    since = failing_since(example())
    assert since.to_dict() == {("c1", "GPU-1"): H1 + 900}
