"""Recommendations rendered as JSON, a table and CSV (``gpuwatch recommend --format``)."""

from __future__ import annotations

import csv
import io
import json

import pandas as pd

from gpuwatch.analytics.columns import RECOMMENDATION_COLUMNS
from gpuwatch.analytics.recommend import empty_recommendations
from gpuwatch.analytics.render import render_csv, render_json, render_table, to_json_records


def _recs() -> pd.DataFrame:
    rows = [
        {"cluster": "c1", "namespace": "ml", "team": "research", "workload_kind": "Job",
         "workload": "train", "gpu_model": "Tesla T4", "kind": "reclaim_idle",
         "current": "1 × nvidia.com/gpu", "suggested": "0 × nvidia.com/gpu", "confidence": "medium",
         "evidence": {"hours_observed": 24.0, "p99_memory_mib": float("nan")},
         "est_monthly_savings_usd": 1234.5678, "allocation": "device-plugin"},
        {"cluster": "c1", "namespace": "ml", "team": pd.NA, "workload_kind": "Pod",
         "workload": "=cmd", "gpu_model": "Tesla T4", "kind": "memory_risk",
         "current": "15000 MiB used of 15360 MiB",
         "suggested": "a GPU or MIG profile with more memory",
         "confidence": "low", "evidence": {}, "est_monthly_savings_usd": 0.0,
         "allocation": "+mig"},
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=list(RECOMMENDATION_COLUMNS))


def test_json_records_have_the_contract_keys_in_order() -> None:
    records = json.loads(render_json(_recs()))
    assert [list(r) for r in records] == [list(RECOMMENDATION_COLUMNS)] * 2
    assert records[0]["est_monthly_savings_usd"] == 1234.57
    assert records[0]["evidence"] == {"hours_observed": 24.0, "p99_memory_mib": None}
    assert records[1]["team"] is None


def test_json_of_nothing_is_an_empty_array() -> None:
    assert json.loads(render_json(empty_recommendations())) == []
    assert to_json_records(empty_recommendations()) == []


def test_csv_has_evidence_as_json_and_neutralised_text() -> None:
    rows = list(csv.reader(io.StringIO(render_csv(_recs()))))
    assert rows[0] == list(RECOMMENDATION_COLUMNS)
    assert rows[1][-2:] == ["1234.57", "device-plugin"]
    assert rows[2][-1] == "'+mig"  # a text cell starting with + is neutralised
    assert json.loads(rows[1][10]) == {"hours_observed": 24.0, "p99_memory_mib": None}
    assert rows[2][4] == "'=cmd"
    assert "\r" not in render_csv(_recs())


def test_table_lists_every_recommendation_and_the_total() -> None:
    text = render_table(_recs())
    assert text.splitlines() == [
        "SAVINGS $/MONTH  KIND          CONFIDENCE  CLUSTER  TEAM      NAMESPACE/WORKLOAD",
        "       1,234.57  reclaim_idle  medium      c1       research  ml/train",
        "                 Tesla T4: 1 × nvidia.com/gpu → 0 × nvidia.com/gpu",
        "           0.00  memory_risk   low         c1                 ml/=cmd",
        "                 Tesla T4: 15000 MiB used of 15360 MiB → a GPU or MIG profile with more "
        "memory",
        "",
        "2 recommendations for 2 workloads",
        "potential savings $1,234.57 per month (the largest recommendation per workload)",
    ]


def test_table_fits_120_columns_whatever_the_names() -> None:
    recs = (
        _recs()
        .iloc[[0]]
        .assign(
            cluster="production-us-east-1-primary",
            team="machine-learning-platform",
            namespace="research-notebooks-2",
            workload="hyperparameter-sweep-" * 3,
            suggested="x " * 150,
        )
    )
    lines = render_table(recs).splitlines()
    assert max(len(line) for line in lines) <= 120
    # 120 - (15 + 12 + 10 + 16 + 16 + 5 gaps × 2) = 41 characters for the workload
    assert lines[1].split("  ")[-3:] == [
        "production-us-e…",
        "machine-learnin…",
        "research-notebooks-2/hyperparameter-swee…",
    ]
    assert len(lines[1]) == 120
    change = lines[2 : lines.index("")]
    assert len(change) == 4  # the change wraps, indented under the kind, never cut
    assert all(line.startswith(" " * 17) for line in change)
    assert sum(line.count("x") for line in change) == 150


def test_table_footer_states_window_and_scope() -> None:
    start = 1_794_182_400  # 2026-11-09 00:00 UTC
    text = render_table(_recs(), None, (start, start + 7 * 86400), "cluster=c1, team=research")
    assert text.split("\n\n")[-1].splitlines()[0] == (
        "window 2026-11-09 00:00 UTC to 2026-11-16 00:00 UTC; showing cluster=c1, team=research"
    )
    empty = render_table(empty_recommendations(), None, (start, start + 86400), "team=x")
    assert empty.splitlines() == [
        "No recommendations for this window.",
        "window 2026-11-09 00:00 UTC to 2026-11-10 00:00 UTC; showing team=x",
    ]


def test_table_total_is_the_largest_saving_per_workload_with_its_basis() -> None:
    recs = _recs()
    spot = recs.iloc[[0]].assign(kind="use_spot", est_monthly_savings_usd=500.0)
    frame = pd.concat([recs, spot], ignore_index=True)
    start = 1_794_182_400  # 2026-11-09 00:00 UTC
    lines = render_table(frame, (start, start + 30 * 3600)).splitlines()
    # train's two suggestions are alternatives: $1,234.57 counts, $500 does not
    assert lines[-3:] == [
        "3 recommendations for 2 workloads",
        "potential savings $1,234.57 per month (the largest recommendation per workload, "
        "per 730 h from 30 h of data:",
        "  2026-11-09 00:00 UTC to 2026-11-10 06:00 UTC)",  # never inside an instant
    ]


def test_table_of_nothing_says_so() -> None:
    assert render_table(empty_recommendations()) == "No recommendations for this window.\n"
