"""Real efficiency per workload: the worked example of docs/cost-model.md#health-and-efficiency
counted by hand, unavailable readings staying unavailable, and bounds that hold for any fleet."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwatch.analytics.efficiency import (
    EFFICIENCY_COLUMNS,
    efficiency_cause,
    efficiency_timeline,
    workload_efficiency,
)
from gpuwatch.analytics.health import gpu_health
from gpuwatch.domain.frames import HEALTH_COLUMNS, empty_frame
from gpuwatch.domain.health import HealthPolicy
from tests.health_rows import H0, H1, H2, PRICES, example, frame, hrow


def _rows(health: pd.DataFrame, **kw: Any) -> dict[str, dict[str, Any]]:
    out = workload_efficiency(health, PRICES, **kw)
    assert list(out.columns) == list(EFFICIENCY_COLUMNS)
    return {str(r["workload"]): r for r in out.to_dict("records")}


def test_example_input_bound_training_job() -> None:
    train = _rows(example())["train"]
    assert (train["team"], train["gpu_model"]) == ("team-ml", "NVIDIA A100-SXM4-80GB")
    assert train["allocated_gpu_hours"] == pytest.approx(3.0)
    assert train["engine_active_pct"] == pytest.approx(70.0)
    assert train["sm_active_pct"] == pytest.approx(20.0)
    assert train["tensor_active_pct"] == pytest.approx(5.0)
    assert train["dram_active_pct"] == pytest.approx(10.0)
    assert math.isnan(train["sm_occupancy_pct"])  # not exported: unavailable
    assert math.isnan(train["throttled_gpu_hours"])  # no clock-event readings: unavailable
    assert train["failing_gpu_hours"] == pytest.approx(1.75)
    assert train["failing_cost_usd"] == pytest.approx(7.00)
    assert train["inefficient_gpu_hours"] == pytest.approx(3.0)  # busy with SM < 25 % throughout
    assert train["inefficient_cost_usd"] == pytest.approx(12.0)
    assert train["cause"] == "input-bound"  # DRAM 10 % < 50 %


def test_example_memory_bound_and_no_tensor_cores() -> None:
    rows = _rows(example())
    serve = rows["serve"]
    assert serve["allocated_gpu_hours"] == pytest.approx(3.0)
    activity = [serve[f"{n}_active_pct"] for n in ("engine", "sm", "tensor", "dram")]
    assert activity == pytest.approx([80.0, 10.0, 0.0, 60.0])
    assert serve["throttled_gpu_hours"] == pytest.approx(0.5)  # half of one hour
    assert serve["failing_gpu_hours"] == 0.0
    assert serve["inefficient_cost_usd"] == pytest.approx(12.0)
    # low SM and no tensor in the same seconds: counted once.
    assert serve["inefficient_gpu_hours"] == pytest.approx(3.0)
    assert serve["cause"] == "memory-bound"  # DRAM 60 %, throttled 1/6 < 25 %
    batch = rows["batch"]
    assert batch["allocated_gpu_hours"] == pytest.approx(2.0)  # the exporter's hour is not held
    activity = [batch[f"{n}_active_pct"] for n in ("engine", "sm", "tensor", "dram")]
    assert activity == pytest.approx([90.0, 60.0, 0.0, 30.0])
    assert math.isnan(batch["throttled_gpu_hours"])
    assert batch["failing_gpu_hours"] == 0.0
    assert batch["inefficient_gpu_hours"] == pytest.approx(2.0)
    assert batch["inefficient_cost_usd"] == pytest.approx(6.0)  # 2 h × $3
    assert batch["cause"] == "no tensor cores used"


def test_utilization_only_workload_has_no_profiling_figures() -> None:
    notebook = _rows(example())["notebook"]
    assert notebook["allocated_gpu_hours"] == pytest.approx(1.5)  # 3 h of half a GPU
    for name in ("engine_active_pct", "sm_active_pct", "tensor_active_pct", "dram_active_pct"):
        assert math.isnan(notebook[name])
    assert notebook["inefficient_gpu_hours"] == 0.0
    assert math.isnan(notebook["throttled_gpu_hours"])
    assert (notebook["failing_gpu_hours"], notebook["failing_cost_usd"]) == (0.0, 0.0)
    assert notebook["cause"] is None


def test_throttled_cause_wins_from_a_quarter_of_the_hours() -> None:
    rows = example()
    hour = (rows["gpu_uuid"] == "GPU-2") & (rows["ts"] == H1)
    rows.loc[hour, "throttled_s"] = 3600.0
    serve = _rows(rows)["serve"]
    assert serve["throttled_gpu_hours"] == pytest.approx(1.5)
    assert serve["cause"] == "throttled"


def test_tensor_rule_only_on_gpus_with_tensor_cores() -> None:
    rows = example()
    rows.loc[rows["gpu_id"] == 3, "gpu_model"] = "Tesla P100-PCIE-16GB"
    batch = _rows(rows)["batch"]
    assert batch["inefficient_gpu_hours"] == 0.0
    assert batch["cause"] is None


def test_failing_since_from_an_earlier_window() -> None:
    index = pd.MultiIndex.from_tuples([("c1", "GPU-3")], names=["cluster", "gpu_uuid"])
    since = pd.Series([float(H0 - 100)], index=index)
    rows = _rows(example(), failing_since=since)
    assert rows["batch"]["failing_gpu_hours"] == pytest.approx(2.0)
    assert rows["batch"]["failing_cost_usd"] == pytest.approx(6.0)
    assert rows["train"]["failing_gpu_hours"] == 0.0  # only the GPUs given


def test_healthy_busy_job_has_no_cause() -> None:
    busy = {"util_s": 3240.0, "util_data_s": 3600.0, "sm_active_s": 2520.0, "sm_data_s": 3600.0,
            "tensor_active_s": 1440.0, "tensor_data_s": 3600.0, "busy_sm_data_s": 3600.0,
            "busy_tensor_data_s": 3600.0}  # fmt: skip
    row = _rows(frame([hrow("g1", H0, "train-0", **busy)]))["train"]
    assert (row["engine_active_pct"], row["sm_active_pct"]) == (90.0, 70.0)
    assert row["cause"] is None and row["inefficient_gpu_hours"] == 0.0


def test_cause_rule() -> None:
    assert efficiency_cause(49.9, 10, 0, 90, 0.0, True) is None  # not busy
    assert efficiency_cause(50, 30, 5, 0, 0.0, True) is None  # efficient
    assert efficiency_cause(50, 30, 0.5, 0, 0.0, True) == "no tensor cores used"
    assert efficiency_cause(50, 30, 0.5, 0, 0.0, False) is None
    assert efficiency_cause(80, 10, 0, 50, 0.25, True) == "throttled"
    assert efficiency_cause(80, 10, 0, 50, 0.2, True) == "memory-bound"
    assert efficiency_cause(80, math.nan, math.nan, math.nan, 0.0, True) is None


def test_timeline_weights_by_gpu_hours() -> None:
    line = efficiency_timeline(example()).set_index("ts")
    assert line.loc[H0, "engine_active_pct"] == pytest.approx(75.0)
    assert line.loc[H1, "sm_active_pct"] == pytest.approx(30.0)  # (20 + 10 + 60) / 3
    assert line.loc[H1, "tensor_active_pct"] == pytest.approx(5 / 3)
    assert line.loc[H2, "dram_active_pct"] == pytest.approx(100 / 3)
    # Half a GPU at 80 % SM beside a whole one at 20 %: (0.5 × 80 + 1 × 20) / 1.5 = 40.
    mixed = frame([hrow("g1", H0, "train-0", sm_active_s=720.0, sm_data_s=3600.0),
                   hrow("g4s0", H0, "nb-0", sm_active_s=2880.0, sm_data_s=3600.0)])  # fmt: skip
    assert efficiency_timeline(mixed)["sm_active_pct"].tolist() == pytest.approx([40.0])
    assert math.isnan(efficiency_timeline(mixed)["tensor_active_pct"].iloc[0])


def test_empty_frames() -> None:
    assert workload_efficiency(empty_frame(HEALTH_COLUMNS), PRICES).empty
    assert efficiency_timeline(empty_frame(HEALTH_COLUMNS)).empty
    unheld = frame([hrow("g4s1", H0)])
    assert workload_efficiency(unheld, PRICES).empty


UNITS = ["g1", "g2", "g3", "g4s0", "g4s1"]
PODS = [None, "train-0", "serve-a", "batch-0", "nb-0", "dcgm-exporter-x"]
_draw = st.tuples(
    st.sampled_from(UNITS),
    st.integers(0, 5),
    st.sampled_from(PODS),
    st.floats(60, 3600),  # data seconds
    st.floats(0, 1),  # throttled share of the clock data
    st.floats(0, 1),  # busy low-SM share of the utilization data
    st.one_of(st.none(), st.integers(0, 3599)),  # a failing event's second in the hour
)


def _random_frame(draws: list[tuple[Any, ...]]) -> pd.DataFrame:
    seen: dict[tuple[str, int, str | None], dict[str, Any]] = {}
    for unit, hour, pod, data_s, throttled, low, fail in draws:
        ts = H0 + hour * 3600
        values: dict[str, Any] = {
            "data_s": data_s, "util_data_s": data_s, "util_s": 0.9 * data_s,
            "sm_data_s": data_s, "sm_active_s": 0.1 * data_s, "busy_low_sm_s": low * data_s,
            "clock_data_s": data_s, "throttled_s": throttled * data_s,
        }  # fmt: skip
        if fail is not None:
            values |= {"fail_first_ts": ts + fail, "fail_xid": 79}
        seen[unit, ts, pod] = hrow(unit, ts, pod, **values)
    return frame(list(seen.values()))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_draw, min_size=1, max_size=25))
def test_failing_throttled_and_inefficient_hours_within_allocated(draws: list[Any]) -> None:
    health = _random_frame(draws)
    out = workload_efficiency(health, PRICES)
    allocated = out["allocated_gpu_hours"].to_numpy(dtype=float) + 1e-9
    for name in ("failing_gpu_hours", "throttled_gpu_hours", "inefficient_gpu_hours"):
        values = out[name].to_numpy(dtype=float)
        assert (values[~np.isnan(values)] <= allocated[~np.isnan(values)]).all(), name
    entries = gpu_health(health, PRICES, HealthPolicy(), H0 + 6 * 3600)
    total = float(out["allocated_gpu_hours"].sum()) + 1e-9
    assert float(entries["failing_gpu_hours"].sum()) <= total if len(entries) else True
    if len(entries):
        assert float(entries["failing_gpu_hours"].sum()) == pytest.approx(
            float(out["failing_gpu_hours"].sum())
        )
        assert (entries["state_hours"].to_numpy(dtype=float) <= 6 + 1e-9).all()
