"""The totals every surface shows: potential savings, the span of data, the monthly basis."""

from __future__ import annotations

from typing import Any

import pandas as pd

from gpuwatch.analytics.totals import (
    HOURS_PER_MONTH,
    data_span,
    hours_with_data,
    monthly_basis,
    potential_savings_usd,
)


def _rec(workload: str, kind: str, saving: float, **keys: Any) -> dict[str, Any]:
    return {"cluster": "c1", "namespace": "ml", "workload_kind": "Job", "workload": workload,
            "gpu_model": "NVIDIA A100-SXM4-80GB", "kind": kind,
            "est_monthly_savings_usd": saving} | keys  # fmt: skip


def test_a_month_is_730_hours() -> None:
    assert HOURS_PER_MONTH == 365 * 24 / 12


def test_potential_savings_count_the_largest_per_workload() -> None:
    recs = pd.DataFrame(
        [
            _rec("train", "use_spot", 876.0),
            _rec("train", "reclaim_idle", 1460.0),  # train: alternatives, 1,460 counts
            _rec("train", "use_mig", 500.0, gpu_model="NVIDIA H100 80GB HBM3"),  # another model
            _rec("train", "use_spot", 100.0, namespace="dev"),  # another namespace
            _rec("api", "memory_risk", 0.0, workload_kind="Deployment"),
            _rec("nb", "share_gpu", 40.0, namespace=pd.NA),  # missing keys: still a workload
            _rec("nb", "cheaper_model", 60.0, namespace=pd.NA),
        ]
    )
    assert potential_savings_usd(recs) == 1460.0 + 500.0 + 100.0 + 0.0 + 60.0
    assert recs["est_monthly_savings_usd"].sum() == 3036.0  # what summing every row gave


def test_potential_savings_of_nothing() -> None:
    empty = pd.DataFrame(columns=list(_rec("x", "k", 0.0)))
    assert potential_savings_usd(empty) == 0.0


def _samples(ts: list[int], step_s: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"ts": ts, "step_s": step_s})


def test_data_span_is_the_whole_hours_from_the_first_sample_to_the_last() -> None:
    hour = 1_794_182_400
    samples = _samples([hour + 220, hour + 100, hour + 3700], [60, 60, 60])
    assert data_span(samples) == (hour, hour + 7200)
    # samples outside the window are ignored
    assert data_span(samples, hour + 150, hour + 250) == (hour, hour + 3600)
    assert data_span(samples, hour + 7200, hour + 9000) is None
    assert data_span(_samples([], [])) is None


def test_raw_samples_and_hourly_rows_of_the_same_data_span_the_same_hours() -> None:
    hour = 1_794_182_400
    raw = _samples([hour + 600, hour + 3600 + 2340], [60, 60])  # 10:10 … 11:39
    rows = _samples([hour, hour + 3600], [3000, 2400])  # their roll-ups: ts is the hour
    assert data_span(raw) == data_span(rows) == (hour, hour + 7200)
    assert hours_with_data(rows, hour - 7 * 86400, hour + 86400) == 2.0


def test_hours_with_data_of_a_window_without_data_is_zero() -> None:
    assert hours_with_data(_samples([100], [60]), 200, 300) == 0.0


def test_monthly_basis_says_how_a_figure_was_extrapolated() -> None:
    assert monthly_basis(168.0) == "per 730 h from 168 h of data"
    assert monthly_basis(168.66) == "per 730 h from 168.7 h of data"
    assert monthly_basis(1234.0) == "per 730 h from 1,234 h of data"


def test_the_worked_examples_of_the_docs() -> None:
    # docs/cost-model.md, "Potential savings"
    recs = pd.DataFrame(
        [
            _rec("job", "cheaper_model", 4526.0),
            _rec("job", "use_mig", 3650.0),
            _rec("job", "use_spot", 2920.0),
            _rec("other", "reclaim_idle", 1460.0),
            _rec("other", "memory_risk", 0.0),
        ]
    )
    assert potential_savings_usd(recs) == 5986.0
    assert recs["est_monthly_savings_usd"].sum() == 12556.0
    # docs/cost-model.md, "Hours with data": 60 s samples, 14:00 on 2026-11-10 to 14:39 on the 24th
    first = 1_794_319_200  # 2026-11-10 14:00 UTC
    last = first + 14 * 86400 + 39 * 60
    samples = _samples(list(range(first, last + 1, 60)), [60] * (14 * 1440 + 40))
    now = first + 14 * 86400 + 3600  # 2026-11-24 15:00 UTC
    assert data_span(samples, now - 30 * 86400, now) == (first, now)
    hours = hours_with_data(samples, now - 30 * 86400, now)
    assert hours == 337.0
    assert monthly_basis(hours) == "per 730 h from 337 h of data"
    assert round(3370.0 / hours * 730, 2) == 7300.0
    assert round(3370.0 / 720 * 730, 2) == 3416.81
