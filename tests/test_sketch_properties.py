"""Properties of the mergeable detail: quantiles from hourly histograms, merged in any order,
equal the exact quantiles over every sample within 1 utilization point and 1 % of memory."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwatch.domain import series, sketch

HOUR = 3600


@st.composite
def bursty(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-sample instants (57 s apart, with gaps), bursty utilization and memory readings."""
    n = draw(st.integers(min_value=1, max_value=400))
    seed = draw(st.integers(min_value=0, max_value=2**32 - 1))
    rng = np.random.default_rng(seed)
    gaps = rng.random(n) < 0.1
    ts = 1_794_182_400 + np.cumsum(np.where(gaps, rng.integers(60, 7200, n), 57))
    burst = rng.random(n) < draw(st.floats(min_value=0.0, max_value=0.5))
    util = np.where(burst, rng.uniform(0.2, 1.0, n), rng.uniform(0.0, 0.05, n))
    if draw(st.booleans()):  # DCGM_FI_DEV_GPU_UTIL: whole percent
        util = np.round(util * 100) / 100
    fb = np.round(rng.uniform(500, 4000, n) + burst * rng.uniform(0, 70000, n))
    return ts.astype(np.int64), util, fb


def _hourly(ts: np.ndarray, util: np.ndarray, fb: np.ndarray) -> series.PodHours:
    pod = np.zeros(len(ts), np.int64)
    return series.pod_hours(pod, ts, np.full(len(ts), 57), util, fb, 0.05)


def _merged(hist: series.Histograms, order: np.ndarray, q: float) -> float:
    """The quantile of all rows' histograms, fed in the row order ``order``."""
    position = np.argsort(order)[hist.rows]
    shuffled = np.argsort(position, kind="stable")
    groups = np.zeros(len(hist.rows), np.int64)
    bins, counts = hist.bins[shuffled], hist.counts[shuffled]
    return float(sketch.grouped_quantile(groups, bins, counts, 1, q)[0])


@settings(max_examples=200, deadline=None)
@given(bursty(), st.randoms(use_true_random=False))
def test_hourly_quantiles_match_the_raw_ones(
    case: tuple[np.ndarray, np.ndarray, np.ndarray], rnd: object
) -> None:
    ts, util, fb = case
    hours = _hourly(ts, util, fb)
    order = np.arange(len(hours.pod))
    rnd.shuffle(order)  # type: ignore[attr-defined]
    p95 = sketch.util_value(np.array([_merged(hours.util, order, 0.95)]))[0]
    p99 = sketch.fb_value(np.array([_merged(hours.fb_used, order, 0.99)]))[0]
    exact_util = np.quantile(util, 0.95, method="inverted_cdf")
    exact_fb = np.quantile(fb, 0.99, method="inverted_cdf")
    assert abs(p95 - exact_util) <= 0.01
    assert abs(p99 - exact_fb) <= 0.01 * exact_fb
    # The same from one histogram of every raw sample: the merge loses nothing.
    whole = sketch.grouped_quantile(np.zeros(len(util), np.int64), sketch.util_bin(util),
                                    np.ones(len(util), np.int64), 1, 0.95)  # fmt: skip
    assert sketch.util_value(whole)[0] == p95


@settings(max_examples=100, deadline=None)
@given(bursty())
def test_blobs_round_trip(case: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    ts, util, fb = case
    hours = _hourly(ts, util, fb)
    n = len(hours.pod)
    blobs = sketch.encode_rows(n, hours.util.rows, hours.util.bins, hours.util.counts)
    rows, bins, counts = sketch.decode_many(blobs)
    np.testing.assert_array_equal(rows, hours.util.rows)
    np.testing.assert_array_equal(bins, hours.util.bins)
    np.testing.assert_array_equal(counts, hours.util.counts)
    assert int(counts.sum()) == len(ts)


def test_nearest_rank_by_hand() -> None:
    # 20 values: 19 at 0 %, one at 100 %. Nearest rank ⌈0.95 × 20⌉ = 19 → 0 %; at q 0.96,
    # ⌈19.2⌉ = 20 → 100 %. (numpy's linear interpolation would say 5 % and 24 %.)
    bins = sketch.util_bin(np.array([0.0] * 19 + [1.0]))
    ones = np.ones(20, np.int64)
    zeros = np.zeros(20, np.int64)
    assert sketch.grouped_quantile(zeros, bins, ones, 1, 0.95)[0] == 0
    assert sketch.grouped_quantile(zeros, bins, ones, 1, 0.96)[0] == 200


def test_busy_and_held_counts_by_hand() -> None:
    # Pod 0 holds 2 units: at t0 one busy (50 %, 2 %), at t0+60 both (10 %, 20 %).
    # Pod 1 holds 1 unit: 2 % at t0 (idle); in the next hour 30 % (busy).
    ts = np.array([0, 0, 60, 60, 3600, 0])
    pod = np.array([0, 0, 0, 0, 1, 1])
    util = np.array([0.5, 0.02, 0.1, 0.2, 0.3, 0.02])
    fb = np.full(6, 1000.0)
    hours = series.pod_hours(pod, ts, np.full(6, 60), util, fb, 0.05)
    assert hours.pod.tolist() == [0, 1, 1]
    assert hours.hour_ts.tolist() == [0, 0, 3600]
    assert hours.held_max.tolist() == [2, 1, 1]
    assert hours.data_s.tolist() == [120, 60, 60]
    busy = list(zip(hours.busy.rows.tolist(), hours.busy.bins.tolist(), strict=True))
    assert busy == [(0, 1), (0, 2), (1, 0), (2, 1)]
    # One workload of both pods; pod 1's spec asks for 1 GPU, pod 0's is unknown (units count).
    loads = series.workload_hours(np.zeros(6, np.int64), pod, ts, np.full(6, 60), util,
                                  np.array([0.0, 1.0]))  # fmt: skip
    held = list(zip(loads.held.rows.tolist(), loads.held.bins.tolist(), strict=True))
    assert held == [(0, 2), (0, 3), (1, 1)]  # t0: 2 + 1; t0+60: 2; next hour: 1
    # Summed utilization bins: t0 100 + 4 + 4 = 108, t0+60 20 + 40 = 60; × 60 s each.
    assert loads.util_sum_bin_s.tolist() == [(108 + 60) * 60, 60 * 60]
