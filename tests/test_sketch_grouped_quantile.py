"""``sketch.grouped_quantile`` against the plain definition: per group, the nearest-rank
quantile of every value repeated by its count (numpy's ``inverted_cdf``), for many groups and
wide bins (the coarse first pass) as for few groups and narrow ones."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwatch.domain import sketch


def _plain(
    groups: np.ndarray, bins: np.ndarray, counts: np.ndarray, n: int, q: float
) -> list[float | None]:
    out: list[float | None] = []
    for group in range(n):
        mine = groups == group
        values = np.repeat(bins[mine], counts[mine])
        out.append(float(np.quantile(values, q, method="inverted_cdf")) if len(values) else None)
    return out


@st.composite
def histograms(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, float]:
    n_groups = draw(st.integers(min_value=1, max_value=30))
    size = draw(st.integers(min_value=0, max_value=300))
    rng = np.random.default_rng(draw(st.integers(min_value=0, max_value=2**32 - 1)))
    top = draw(st.sampled_from([1, 8, 201, 81_920, 2**31]))
    low = draw(st.sampled_from([0, 0, -40]))
    groups = rng.integers(0, n_groups, size)
    bins = rng.integers(low, top, size)
    counts = rng.integers(0, 6, size)
    q = draw(st.sampled_from([0.0, 0.05, 0.5, 0.95, 0.99, 1.0]))
    return groups, bins, counts, n_groups, q


@settings(max_examples=300, deadline=None)
@given(histograms())
def test_grouped_quantile_is_the_nearest_rank_of_the_repeated_values(
    case: tuple[np.ndarray, np.ndarray, np.ndarray, int, float],
) -> None:
    groups, bins, counts, n, q = case
    got = sketch.grouped_quantile(groups, bins, counts, n, q)
    want = _plain(groups, bins, counts, n, q)
    assert [None if np.isnan(v) else float(v) for v in got] == want


def test_rank_on_a_coarse_boundary_by_hand() -> None:
    # One group, framebuffer bins 0 .. 81,919 MiB: 32-MiB coarse bins. Values 31 (×3),
    # 32 (×1), 64 (×1): N = 5; p60 rank ⌈3⌉ = 3 → 31 (last of the first coarse bin),
    # p61 rank ⌈3.05⌉ = 4 → 32 (first of the next), p100 → 64.
    bins = np.array([64, 31, 32, 81_919, 0])
    counts = np.array([1, 3, 1, 0, 0])
    groups = np.zeros(5, np.int64)
    assert sketch.grouped_quantile(groups, bins, counts, 1, 0.6)[0] == 31
    assert sketch.grouped_quantile(groups, bins, counts, 1, 0.61)[0] == 32
    assert sketch.grouped_quantile(groups, bins, counts, 1, 1.0)[0] == 64


def test_groups_without_counts_are_nan_by_hand() -> None:
    # 3 groups; group 1 has only a zero count, group 2 nothing at all.
    got = sketch.grouped_quantile(
        np.array([0, 0, 1]), np.array([5, 9, 7]), np.array([1, 1, 0]), 3, 0.5
    )
    assert got[0] == 5
    assert np.isnan(got[1]) and np.isnan(got[2])


def test_many_groups_by_hand() -> None:
    # 3,000,000 groups leave one coarse bin per group: the answer still comes from the bins.
    groups = np.array([2_999_999, 2_999_999, 7])
    got = sketch.grouped_quantile(groups, np.array([80_000, 3, 12]), np.ones(3, np.int64),
                                  3_000_000, 0.99)  # fmt: skip
    assert got[2_999_999] == 80_000 and got[7] == 12
    assert int(np.isnan(got).sum()) == 3_000_000 - 2
