"""The worked example of docs/cost-model.md, computed and checked number by number."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.build import pods_frame, samples_frame
from gpuwatch.analytics.costing import prepare
from gpuwatch.analytics.summary import summarize
from gpuwatch.domain.allocation import gpu_share, unit_mode
from gpuwatch.domain.pricing import build_price_book

T0 = 1_794_218_400  # 2026-11-09 10:00 UTC
STEP = 900
A100 = "NVIDIA A100-SXM4-80GB"
T4 = "Tesla T4"


def _unit(
    gpu_id: int, node: str, model: str, utils: list[float | None], **extra: Any
) -> list[dict[str, Any]]:
    rows = []
    for i, util in enumerate(utils):
        if util is None:
            continue
        rows.append(
            {
                "gpu_id": gpu_id,
                "node": node,
                "gpu_model": model,
                "ts": T0 + i * STEP,
                "step_s": STEP,
                "util_ratio": util,
                **extra,
            }
        )
    return rows


def worked_example() -> pd.DataFrame:
    train = {
        "pod_id": 1,
        "pod": "train-0",
        "namespace": "ml",
        "workload_kind": "Job",
        "workload": "train",
        "team": "research",
        "pod_gpu_count": 1,
    }
    api = {
        "pod_id": 2,
        "pod": "api-0",
        "namespace": "web",
        "workload_kind": "Deployment",
        "workload": "api",
        "team": "product",
        "pod_gpu_count": 1,
    }
    nb = {
        "pod_id": 3,
        "pod": "nb-0",
        "namespace": "lab",
        "workload_kind": "Pod",
        "workload": "nb-0",
        "team": "research",
        "pod_gpu_count": 1,
    }
    shared = {"gpu_uuid": "GPU-c", "timeslice_replicas": 2}
    rows = [
        *_unit(1, "n1", A100, [0, 0, 0, 0, 0.5, 0.5, 0.5, 0.5], **train),
        *_unit(2, "n2", A100, [1.0] * 8, mig_profile="3g.40gb", gpu_uuid="GPU-b", **api),
        *_unit(3, "n2", A100, [0.0] * 8, mig_profile="4g.40gb", gpu_uuid="GPU-b"),
        *_unit(4, "n3", T4, [0.2] * 8, slot=0, **shared, **nb),
        *_unit(5, "n3", T4, [0.2] * 8, slot=1, **shared),
        *_unit(6, "n3", T4, [0, 0, 0, 0, None, 0, 0, 0]),
    ]
    return samples_frame(rows)


def example_book() -> Any:
    return build_price_book(2.0, 0.6, {A100: (4.0, None)}, {"n2": 7.0, "n3": 2.0})


@pytest.fixture
def costed() -> pd.DataFrame:
    return prepare(worked_example(), None, example_book())


def test_unit_prices_follow_the_pricing_rules(costed: pd.DataFrame) -> None:
    """``usd_per_hour`` is the price of the unit's whole GPU: node override, else model."""
    prices = costed.drop_duplicates("gpu_id").set_index("gpu_id")[c.USD_PER_HOUR]
    assert prices.round(10).to_dict() == {1: 4.0, 2: 7.0, 3: 7.0, 4: 2.0, 5: 2.0, 6: 2.0}


def test_hours_are_gpu_equivalent(costed: pd.DataFrame) -> None:
    """One 15-minute sample is 0.25 h of its unit: × 3/7 and 4/7 for the MIG instances, × 1/2
    for the slots of the 2-replica T4."""
    first = costed.drop_duplicates("gpu_id").set_index("gpu_id")
    expected = {1: 0.25, 2: 0.25 * 3 / 7, 3: 0.25 * 4 / 7, 4: 0.125, 5: 0.125, 6: 0.25}
    assert first[c.GPU_HOURS].to_dict() == pytest.approx(expected)
    assert set(first[c.DATA_HOURS]) == {0.25}


def test_each_node_adds_up_to_its_gpus_times_hours_with_data(costed: pd.DataFrame) -> None:
    """n1 and n2 each have one GPU for 2 h; n3 has two T4s, one missing a 15-minute sample."""
    per_node = summarize(costed, ["node"], 0.05).set_index("node")[c.CAPACITY_GPU_HOURS]
    assert per_node.to_dict() == pytest.approx({"n1": 2.0, "n2": 2.0, "n3": 3.75})


def test_a_fully_partitioned_mig_gpu_counts_once() -> None:
    """An H100 split into 3g + 2g + 1g + 1g instances, unheld for 4 hourly samples: 4
    GPU-hours of unallocated capacity at the GPU's price, not 16 instance-hours."""
    profiles = ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    h100 = "NVIDIA H100 80GB HBM3"
    rows = [
        {"gpu_id": n, "ts": T0 + i * 3600, "step_s": 3600, "util_ratio": 0.0,
         "gpu_model": h100, "mig_profile": profile, "gpu_uuid": "GPU-h"}
        for n, profile in enumerate(profiles, start=1)
        for i in range(4)
    ]  # fmt: skip
    book = build_price_book(2.0, 0.6, {h100: (7.0, None)}, {})
    total = summarize(prepare(samples_frame(rows), None, book), [], 0.05).iloc[0]
    assert total[c.UNALLOCATED_GPU_HOURS] == pytest.approx(4.0)
    assert total[c.UNALLOCATED_COST_USD] == pytest.approx(28.0)


def test_per_holder_numbers_match_the_tables(costed: pd.DataFrame) -> None:
    frame = summarize(costed, ["pod"], 0.05).set_index("pod")
    expected = {
        "train-0": (2.00, 0.50, 25.0, 1.00, 8.00, 4.00, 6.00),
        "api-0": (0.857143, 0.857143, 100.0, 0.00, 6.00, 0.00, 0.00),
        "nb-0": (1.00, 0.20, 20.0, 0.00, 2.00, 0.00, 1.60),
    }
    names = [
        c.ALLOCATED_GPU_HOURS,
        c.USED_GPU_HOURS,
        c.EFFICIENCY_PCT,
        c.IDLE_GPU_HOURS,
        c.ALLOCATED_COST_USD,
        c.IDLE_COST_USD,
        c.UNUSED_COST_USD,
    ]
    for pod, values in expected.items():
        got = tuple(round(float(frame.loc[pod, n]), 6) for n in names)
        assert got == values, pod


def test_totals_and_unallocated_capacity(costed: pd.DataFrame) -> None:
    total = summarize(costed, [], 0.05).iloc[0]
    assert round(total[c.ALLOCATED_GPU_HOURS], 6) == 3.857143
    assert round(total[c.USED_GPU_HOURS], 6) == 1.557143
    assert round(total[c.EFFICIENCY_PCT], 1) == 40.4
    assert round(total[c.ALLOCATED_COST_USD], 6) == 16.0
    assert round(total[c.IDLE_COST_USD], 6) == 4.0
    assert round(total[c.UNUSED_COST_USD], 6) == 7.6
    assert round(total[c.UNALLOCATED_GPU_HOURS], 6) == 3.892857
    assert round(total[c.UNALLOCATED_COST_USD], 6) == 13.5
    assert round(total[c.CAPACITY_GPU_HOURS], 6) == 7.75


def test_missing_sample_lowers_coverage_and_is_not_idle(costed: pd.DataFrame) -> None:
    per_gpu = summarize(costed, ["gpu_id"], 0.05).set_index("gpu_id")
    assert per_gpu.loc[6, c.COVERAGE_RATIO] == pytest.approx(7 / 8)
    assert per_gpu.loc[6, c.UNALLOCATED_GPU_HOURS] == pytest.approx(1.75)
    assert per_gpu.loc[1, c.COVERAGE_RATIO] == pytest.approx(1.0)


def test_gpu_share_for_mig_a30_and_slots() -> None:
    assert gpu_share("3g.40gb", A100, 1) == pytest.approx(3 / 7)
    assert gpu_share("1g.6gb", "NVIDIA A30", 1) == pytest.approx(1 / 4)
    assert gpu_share(pd.NA, T4, 4) == pytest.approx(1 / 4)
    assert gpu_share("1g.10gb", A100, 2) == pytest.approx(1 / 14)
    assert gpu_share(None, T4, pd.NA) == 1.0


def test_unit_mode_reads_the_stored_mode_else_the_unit() -> None:
    assert unit_mode("mps", None, 4) == "mps"
    assert unit_mode("dra", "1g.10gb", 1) == "dra"
    assert unit_mode(None, "1g.10gb", 1) == "mig"
    assert unit_mode(pd.NA, pd.NA, 2) == "time-slice"
    assert unit_mode(None, None, 1) == "device-plugin"


def test_spot_capacity_uses_the_spot_price() -> None:
    rows = _unit(1, "n9", T4, [0.5], capacity_type="spot")
    costed = prepare(samples_frame(rows), None, build_price_book(2.0, 0.6, {}, {}))
    assert costed[c.USD_PER_HOUR].iloc[0] == pytest.approx(0.36235)


def test_node_override_beats_model_and_spot() -> None:
    rows = _unit(1, "n2", T4, [0.5], capacity_type="spot")
    costed = prepare(samples_frame(rows), None, build_price_book(2.0, 0.6, {}, {"n2": 7.0}))
    assert costed[c.USD_PER_HOUR].iloc[0] == 7.0


def test_pod_requesting_no_gpu_never_holds_one() -> None:
    exporter = {
        "pod_id": 9,
        "pod": "dcgm-exporter-x",
        "namespace": "gpu-operator",
        "pod_gpu_count": 0,
    }
    costed = prepare(samples_frame(_unit(1, "n1", T4, [0.0], **exporter)), None, example_book())
    assert not costed[c.ALLOCATED].any()


def test_node_level_attribution_uses_node_mean_util() -> None:
    rows = [*_unit(1, "n1", T4, [0.2, 0.2]), *_unit(2, "n1", T4, [0.6, 0.6])]
    pods = pods_frame(
        [
            {
                "pod_id": 7,
                "pod": "job-a",
                "namespace": "ml",
                "node": "n1",
                "gpu_count": 1,
                "started_ts": T0 - 60,
                "workload_kind": "Job",
                "workload": "a",
                "team": "x",
            },
        ]
    )
    costed = prepare(samples_frame(rows), pods, example_book())
    held = costed[costed[c.ALLOCATED]]
    assert held["gpu_id"].tolist() == [1, 1]
    assert held["attribution"].astype(str).tolist() == ["node", "node"]
    assert held[c.UTIL].tolist() == pytest.approx([0.4, 0.4])
    assert held["workload"].astype(str).tolist() == ["a", "a"]
    assert costed.loc[~costed[c.ALLOCATED], "gpu_id"].tolist() == [2, 2]


def test_node_level_attribution_skips_nodes_with_pod_labels() -> None:
    labelled = {"pod_id": 1, "pod": "p", "namespace": "ns"}
    rows = [*_unit(1, "n1", T4, [0.2], **labelled), *_unit(2, "n1", T4, [0.6])]
    pods = pods_frame([{"pod_id": 7, "pod": "other", "node": "n1", "started_ts": T0 - 60}])
    costed = prepare(samples_frame(rows), pods, example_book())
    assert costed.loc[costed[c.ALLOCATED], "pod"].astype(str).tolist() == ["p"]


def test_node_level_attribution_follows_pod_start_and_finish() -> None:
    rows = _unit(1, "n1", T4, [0.3, 0.3, 0.3, 0.3])
    pods = pods_frame(
        [
            {"pod_id": 7, "pod": "a", "node": "n1", "started_ts": T0, "finished_ts": T0 + 2 * STEP},
            {"pod_id": 8, "pod": "b", "node": "n1", "started_ts": T0 + 3 * STEP},
        ]
    )
    costed = prepare(samples_frame(rows), pods, example_book())
    assert costed["pod"].astype(object).where(costed["pod"].notna(), None).tolist() == [
        "a",
        "a",
        None,
        "b",
    ]
