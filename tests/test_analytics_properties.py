"""Properties of the cost model that hold for any fleet (hypothesis)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.build import samples_frame
from gpuwatch.analytics.costing import prepare
from gpuwatch.analytics.summary import summarize
from gpuwatch.domain.pricing import build_price_book

MODELS = ["NVIDIA A100-SXM4-80GB", "Tesla T4", "NVIDIA Unknown"]
PODS = [None, ("ml", "a", "team-x"), ("ml", "b", "team-y"), ("web", "c", None)]
PROFILES = [None, "1g.10gb", "3g.40gb"]

unit = st.fixed_dictionaries(
    {
        "model": st.sampled_from(MODELS),
        "node": st.sampled_from(["n1", "n2", "n3"]),
        "capacity": st.sampled_from(["on_demand", "spot"]),
        "profile": st.sampled_from(PROFILES),
        "replicas": st.sampled_from([1, 1, 2, 4]),
    }
)
sample = st.tuples(
    st.integers(0, 3),  # unit
    st.integers(0, 20),  # time step
    st.sampled_from(PODS),
    st.one_of(st.none(), st.floats(0.0, 1.0)),  # util (None: no reading)
)


def _frame(units: list[dict[str, Any]], draws: list[tuple[Any, ...]]) -> pd.DataFrame:
    rows = []
    seen = set()
    for index, step, pod, util in draws:
        u = units[index % len(units)]
        if (index, step) in seen:
            continue
        seen.add((index, step))
        row: dict[str, Any] = {
            "gpu_id": index, "node": u["node"], "gpu_model": u["model"],
            "capacity_type": u["capacity"], "mig_profile": u["profile"],
            "timeslice_replicas": u["replicas"], "ts": step * 60, "util_ratio": util,
        }  # fmt: skip
        if pod is not None:
            row |= {"namespace": pod[0], "pod": pod[1], "team": pod[2], "pod_id": ord(pod[1])}
        rows.append(row)
    return samples_frame(rows)


fleets = st.builds(
    _frame, st.lists(unit, min_size=4, max_size=4), st.lists(sample, min_size=1, max_size=60)
)
PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BOOK = build_price_book(2.0, 0.6, {"Tesla T4": (1.0, 0.5)}, {"n3": 3.0})


@PROPS
@given(fleets, st.floats(0.0, 1.0))
def test_idle_and_used_never_exceed_allocated(samples: pd.DataFrame, threshold: float) -> None:
    frame = summarize(prepare(samples, None, BOOK), ["namespace", "pod"], threshold)
    tolerance = 1e-9
    assert (frame[c.IDLE_GPU_HOURS] <= frame[c.ALLOCATED_GPU_HOURS] + tolerance).all()
    assert (frame[c.USED_GPU_HOURS] <= frame[c.ALLOCATED_GPU_HOURS] + tolerance).all()
    assert (frame[c.UNUSED_COST_USD] <= frame[c.ALLOCATED_COST_USD] + tolerance).all()


def _share(profile: Any, model: str, replicas: int) -> float:
    """GPU-equivalent share written out from the contract: g of 7 slices (A30: 4), / R."""
    slices = 4 if "A30" in model else 7
    g = int(profile.split("g.")[0]) / slices if isinstance(profile, str) else 1.0
    return g / replicas


@PROPS
@given(fleets)
def test_allocated_plus_unallocated_is_capacity_with_data(samples: pd.DataFrame) -> None:
    total = summarize(prepare(samples, None, BOOK), [], 0.05).iloc[0]
    with_data = samples[samples["util_ratio"].notna()]
    hours = sum(
        step / 3600 * _share(profile, model, replicas)
        for step, profile, model, replicas in with_data[
            ["step_s", "mig_profile", "gpu_model", "timeslice_replicas"]
        ].itertuples(index=False)
    )
    assert total[c.ALLOCATED_GPU_HOURS] + total[c.UNALLOCATED_GPU_HOURS] == pytest.approx(hours)
    assert total[c.CAPACITY_GPU_HOURS] == pytest.approx(hours)


@PROPS
@given(fleets, st.sampled_from(list(c.GROUPINGS)))
def test_group_sums_equal_totals(samples: pd.DataFrame, grouping: str) -> None:
    costed = prepare(samples, None, BOOK)
    groups = summarize(costed, c.GROUPINGS[grouping], 0.05)
    total = summarize(costed, [], 0.05).iloc[0]
    for name in c.SUM_COLUMNS:
        assert groups[name].sum() == pytest.approx(total[name], abs=1e-9), name


@PROPS
@given(fleets, st.floats(0.1, 10.0))
def test_costs_scale_linearly_with_prices(samples: pd.DataFrame, factor: float) -> None:
    base = build_price_book(2.0, 0.6, {"Tesla T4": (1.0, 0.5)}, {"n3": 3.0})
    scaled = build_price_book(
        2.0 * factor,
        0.6,
        {
            **{
                m.model: (m.on_demand_usd_per_gpu_hour * factor, m.spot_usd_per_gpu_hour * factor)
                for m in base.models.values()
            },
        },
        {"n3": 3.0 * factor},
    )
    a = summarize(prepare(samples, None, base), [], 0.05).iloc[0]
    b = summarize(prepare(samples, None, scaled), [], 0.05).iloc[0]
    for name in (c.ALLOCATED_COST_USD, c.IDLE_COST_USD, c.UNUSED_COST_USD, c.UNALLOCATED_COST_USD):
        assert b[name] == pytest.approx(a[name] * factor, rel=1e-9, abs=1e-9), name
    assert b[c.ALLOCATED_GPU_HOURS] == pytest.approx(a[c.ALLOCATED_GPU_HOURS])


@PROPS
@given(fleets)
def test_coverage_is_a_ratio(samples: pd.DataFrame) -> None:
    frame = summarize(prepare(samples, None, BOOK), c.GROUPINGS["gpu"], 0.05)
    coverage = frame[c.COVERAGE_RATIO].dropna()
    assert ((coverage >= 0) & (coverage <= 1 + 1e-9)).all()
