"""Groupings, time series, coverage against the inventory, pending demand, and large frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.build import gpus_frame, pods_frame, samples_frame
from gpuwatch.analytics.costing import prepare
from gpuwatch.analytics.demand import pending_gpu_demand, pending_gpu_timeseries
from gpuwatch.analytics.grouping import group_sum
from gpuwatch.analytics.summary import capacity_timeseries, summarize, unit_coverage
from gpuwatch.domain.frames import SAMPLE_COLUMNS, conform
from gpuwatch.domain.pricing import build_price_book

BOOK = build_price_book(1.0, 0.5, {}, {})
MODEL = "NVIDIA Test GPU"


def _two_gpus() -> pd.DataFrame:
    held = {"pod_id": 1, "pod": "p", "namespace": "ns", "team": "t", "gpu_model": MODEL}
    rows = [
        {"gpu_id": 1, "ts": ts, "step_s": 900, "util_ratio": 0.5, **held}
        for ts in range(0, 7200, 900)
    ] + [
        {"gpu_id": 2, "ts": ts, "step_s": 900, "util_ratio": 0.0, "gpu_model": MODEL}
        for ts in range(0, 3600, 900)
    ]
    return samples_frame(rows)


def test_timeseries_counts_gpus_per_bucket() -> None:
    series = capacity_timeseries(prepare(_two_gpus(), None, BOOK), 3600)
    assert series[c.BUCKET_TS].tolist() == [0, 3600]
    assert series[c.CAPACITY_GPUS].tolist() == [2.0, 1.0]
    assert series[c.ALLOCATED_GPUS].tolist() == [1.0, 1.0]
    assert series[c.USED_GPUS].tolist() == [0.5, 0.5]


def test_timeseries_by_team_keeps_text_keys() -> None:
    series = capacity_timeseries(prepare(_two_gpus(), None, BOOK), 7200, ["team"])
    assert series["team"].dtype == "string"
    assert series.set_index("team")[c.CAPACITY_GPU_HOURS].to_dict() == {"t": 2.0, pd.NA: 1.0}


def test_timeseries_rejects_a_zero_bucket() -> None:
    with pytest.raises(ValueError, match="positive"):
        capacity_timeseries(prepare(_two_gpus(), None, BOOK), 0)


def test_unit_coverage_against_the_inventory() -> None:
    gpus = gpus_frame(
        [
            {"gpu_id": 1, "first_seen_ts": 0, "last_seen_ts": 6300},
            {"gpu_id": 2, "first_seen_ts": 0, "last_seen_ts": 6300},  # samples stop at 2700
        ]
    )
    cover = unit_coverage(prepare(_two_gpus(), None, BOOK), gpus, 0, 7200).set_index("gpu_id")
    assert cover.loc[1, c.COVERAGE_RATIO] == 1.0
    assert cover.loc[2, c.COVERAGE_RATIO] == 0.5
    assert cover.loc[2, c.OBSERVED_HOURS] == 2.0


def test_summary_of_an_empty_frame_is_one_zero_row() -> None:
    total = summarize(prepare(_two_gpus().iloc[:0], None, BOOK), [], 0.05)
    assert len(total) == 1
    assert total[c.ALLOCATED_GPU_HOURS].iloc[0] == 0.0
    assert summarize(prepare(_two_gpus().iloc[:0], None, BOOK), ["team"], 0.05).empty


def test_group_sum_matches_pandas_groupby() -> None:
    rng = np.random.default_rng(3)
    keys = pd.DataFrame(
        {
            "a": pd.Categorical(rng.choice(["x", "y", None], 500)),
            "b": pd.array(rng.choice(["p", "q", "r"], 500), dtype="string"),
            "n": rng.integers(0, 4, 500),
        }
    )
    values = rng.random(500)
    ours = group_sum(keys, {"v": values})
    theirs = keys.assign(v=values).groupby(["a", "b", "n"], dropna=False, observed=True)["v"].sum()

    def table(frame: pd.DataFrame) -> dict[tuple[str, ...], float]:
        keyed = frame.astype({"a": object, "b": object}).fillna({"a": "NA", "b": "NA"})
        return {(str(r.a), str(r.b), str(r.n)): round(r.v, 9) for r in keyed.itertuples()}

    assert table(ours) == table(theirs.reset_index())


def test_pending_demand_at_an_instant() -> None:
    pods = pods_frame(
        [
            {"pod_id": 1, "pod": "a-1", "workload": "a", "gpu_count": 2, "created_ts": 100,
             "started_ts": None, "phase": "Pending", "node": None},
            {"pod_id": 2, "pod": "a-2", "workload": "a", "gpu_count": 2, "created_ts": 50,
             "started_ts": 400},
            {"pod_id": 3, "pod": "b-1", "workload": "b", "gpu_count": 0, "created_ts": 10},
            {"pod_id": 4, "pod": "c-1", "workload": "c", "gpu_count": 1, "created_ts": 10,
             "started_ts": 20},
        ]
    )  # fmt: skip
    demand = pending_gpu_demand(pods, 300)
    assert demand[["workload", c.PENDING_PODS, c.PENDING_GPUS, c.OLDEST_PENDING_TS]].to_dict(
        "records"
    ) == [{"workload": "a", c.PENDING_PODS: 2, c.PENDING_GPUS: 4, c.OLDEST_PENDING_TS: 50}]
    assert pending_gpu_demand(pods, 500)[c.PENDING_GPUS].tolist() == [2]
    assert pending_gpu_demand(pods, 0).empty
    series = pending_gpu_timeseries(pods, 0, 600, 200)
    assert series[[c.BUCKET_TS, c.PENDING_GPUS]].values.tolist() == [[200, 4], [400, 2]]


def test_a_pod_known_from_dcgm_only_is_never_pending() -> None:
    # DCGM showed it holding a GPU; the API never listed it, so no creation or start time
    pods = pods_frame([{"pod_id": 1, "pod": "job-x", "gpu_count": 1, "created_ts": None,
                        "started_ts": None, "phase": None, "dcgm_only": True}])  # fmt: skip
    assert pending_gpu_demand(pods, 300).empty
    listed = pods.assign(dcgm_only=False)  # the same row listed by the API, never started
    assert pending_gpu_demand(listed, 300)[c.PENDING_GPUS].tolist() == [1]


def _big(n_units: int, n_steps: int) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    gpu = np.repeat(np.arange(n_units), n_steps)
    held = rng.random(len(gpu)) < 0.7
    pod = gpu // 2
    names = np.array([f"pod-{i}" for i in range(n_units)], dtype=object)
    frame = pd.DataFrame(
        {
            "cluster": "c1",
            "node": np.array([f"n{i // 8}" for i in range(n_units)], dtype=object)[gpu],
            "gpu_id": gpu,
            "gpu_uuid": np.array([f"GPU-{i}" for i in range(n_units)], dtype=object)[gpu],
            "mig_profile": None,
            "slot": 0,
            "timeslice_replicas": 1,
            "gpu_model": "Tesla T4",
            "capacity_type": "on_demand",
            "ts": np.tile(np.arange(n_steps) * 60, n_units),
            "step_s": 60,
            "pod_id": pd.array(np.where(held, pod, 0), dtype="Int64"),
            "namespace": np.where(held, "ns", None),
            "pod": np.where(held, names[pod], None),
            "workload_kind": np.where(held, "Deployment", None),
            "workload": np.where(held, names[pod // 3], None),
            "team": np.where(held, "t", None),
            "pod_gpu_count": 2,
            "attribution": np.where(held, "pod", None),
            "allocation": "device-plugin",
            "util_ratio": rng.random(len(gpu)),
            "util_signal": "dev_gpu_util",
            "fb_used_mib": 1000.0,
            "fb_total_mib": 15360.0,
            "power_w": 70.0,
            "temp_c": 50.0,
            "xid": 0,
        }
    )
    frame.loc[~held, "pod_id"] = pd.NA
    return conform(frame, SAMPLE_COLUMNS)


def test_a_million_samples_group_to_the_same_totals() -> None:
    costed = prepare(_big(100, 10_000), None, BOOK)
    total = summarize(costed, [], 0.05)
    for grouping in ("team", "workload", "gpu"):
        grouped = summarize(costed, c.GROUPINGS[grouping], 0.05)
        for column in (c.ALLOCATED_GPU_HOURS, c.USED_GPU_HOURS, c.IDLE_COST_USD):
            assert grouped[column].sum() == pytest.approx(total[column].sum(), rel=1e-9), grouping
