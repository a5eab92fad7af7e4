"""A window's recommendation detail summed per pod and per workload as it is read gives every
measure the hourly detail gives, from one row of histograms per pod."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import Engine

from gpuwatch.analytics.recommend import recommend
from gpuwatch.config import Settings
from gpuwatch.domain import detail_sums
from gpuwatch.domain.detail_sums import summed_detail, summed_parts
from gpuwatch.domain.series import Histograms, StoredDetail
from gpuwatch.report.inputs import load_inputs, policy_from, price_book_from
from gpuwatch.store import repository_detail
from tests.support.demo_fleet import DEMO_NOW_TS

H = 3600
WORKLOAD = {"cluster": "c", "namespace": "n", "workload_kind": "Job", "gpu_model": "A100"}


def _hist(rows: list[int], bins: list[int], counts: list[int]) -> Histograms:
    return Histograms(*(np.array(v, dtype=np.int64) for v in (rows, bins, counts)))


def _pods(hours: list[int], pods: list[int], models: list[str], data_s: list[int],
          held: list[int]) -> pd.DataFrame:  # fmt: skip
    frame = {"hour_ts": hours, "pod_id": pods, "gpu_model": models, "data_s": data_s}
    return pd.DataFrame(frame | {"held_max": held}).astype({"gpu_model": object})


def _loads(hours: list[int], names: list[str]) -> pd.DataFrame:
    rows = [{"hour_ts": h, **WORKLOAD, "workload": w} for h, w in zip(hours, names, strict=True)]
    frame = pd.DataFrame(rows).assign(data_s=3600, util_sum_bin_s=0)
    columns = ["hour_ts", "cluster", "namespace", "workload_kind", "workload", "gpu_model"]
    return frame[[*columns, "data_s", "util_sum_bin_s"]]


# Pod 7 (two hours), pod 9 (one); workload a (two hours), b (one). Day one, then day two.
DAY_ONE = StoredDetail(
    pods=_pods([0, 0], [7, 9], ["A100", "L4"], [3600, 3600], [2, 1]),
    pod_busy=_hist([0, 0, 1], [1, 2, 0], [5, 7, 12]),
    pod_util=_hist([0, 1], [10, 0], [12, 12]),
    pod_fb_used=_hist([0], [40000], [12]),
    workloads=_loads([0, 0], ["a", "b"]),
    held=_hist([0, 1], [2, 1], [12, 12]),
    util_sum=_hist([0], [300], [12]),
)
DAY_TWO = StoredDetail(
    pods=_pods([H], [7], ["A100"], [1800], [4]),
    pod_busy=_hist([0], [2], [6]),
    pod_util=_hist([0, 0], [10, 200], [3, 3]),
    pod_fb_used=_hist([0], [39000], [6]),
    workloads=_loads([H], ["a"]),
    held=_hist([0], [4], [6]),
    util_sum=_hist([0, 0], [300, 700], [3, 3]),
)


def _same_hist(got: Histograms, rows: list[int], bins: list[int], counts: list[int]) -> None:
    assert (got.rows.tolist(), got.bins.tolist(), got.counts.tolist()) == (rows, bins, counts)


@pytest.mark.parametrize("block", [1, 1 << 20])
def test_two_days_summed_by_hand(monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    monkeypatch.setattr(detail_sums, "MERGE_BLOCK_ENTRIES", block)  # 1: a block per pod
    got = summed_parts([summed_detail(DAY_ONE), summed_detail(DAY_TWO)])
    want_pods = _pods([0, 0], [7, 9], ["A100", "L4"], [5400, 3600], [4, 1])
    pd.testing.assert_frame_equal(got.pods, want_pods)
    _same_hist(got.pod_busy, [0, 0, 1], [1, 2, 0], [5, 13, 12])
    _same_hist(got.pod_util, [0, 0, 1], [10, 200, 0], [15, 3, 12])
    _same_hist(got.pod_fb_used, [0, 0], [39000, 40000], [6, 12])
    # Workload-hour rows stay (hours are counted); histograms go to each workload's first row.
    assert got.workloads[["hour_ts", "workload"]].values.tolist() == [[0, "a"], [0, "b"], [H, "a"]]
    _same_hist(got.held, [0, 0, 1], [2, 4, 1], [12, 6, 12])
    _same_hist(got.util_sum, [0, 0], [300, 700], [15, 3])


@pytest.mark.parametrize(
    ("first_ts", "hours", "block"),
    [
        (DEMO_NOW_TS - 7 * 24 * H, 7 * 24, 1 << 20),  # the default week: days and hours
        (DEMO_NOW_TS - 10 * 24 * H, 10 * 24 + 1, 1 << 20),  # all of it
        (DEMO_NOW_TS - 50 * H, 50, 500),  # 50 hours, merged 500 entries at a time
    ],
)
def test_the_window_detail_gives_the_hourly_detail_s_recommendations(
    demo_fleet: Engine, monkeypatch: pytest.MonkeyPatch, first_ts: int, hours: int, block: int
) -> None:
    monkeypatch.setattr(detail_sums, "MERGE_BLOCK_ENTRIES", block)
    end_ts = first_ts + hours * H
    inputs = load_inputs(demo_fleet, first_ts, end_ts, resolution="hourly")
    hourly = repository_detail.load_detail(demo_fleet, first_ts, end_ts)
    summed = repository_detail.load_window_detail(demo_fleet, first_ts, end_ts)
    pairs = hourly.pods[["pod_id", "gpu_model"]].drop_duplicates()
    assert len(summed.pods) == len(pairs) < len(hourly.pods) // 4  # one row per pod
    pd.testing.assert_frame_equal(summed.workloads, hourly.workloads)
    assert len(summed.pod_util.rows) < len(hourly.pod_util.rows)
    settings = Settings()
    book, policy = price_book_from(settings), policy_from(settings)

    def recommendations(detail: StoredDetail) -> pd.DataFrame:
        return recommend(inputs.samples, inputs.pods, book, policy, first_ts, end_ts,
                         gpus=inputs.gpus, nodes=inputs.nodes, detail=detail)  # fmt: skip

    want = recommendations(hourly)
    quantile_kinds = {"reduce_gpu_count", "reduce_replicas", "use_mig", "share_gpu", "memory_risk"}
    assert len(want) >= 10 and len(set(want["kind"]) & quantile_kinds) >= 3, set(want["kind"])
    pd.testing.assert_frame_equal(recommendations(summed), want, check_exact=True)
