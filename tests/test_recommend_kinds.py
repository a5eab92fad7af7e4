"""Waste or pricing, effort and risk: one definition per kind, the same in the docs."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from gpuwatch.analytics.columns import RECOMMENDATION_COLUMNS
from gpuwatch.analytics.kinds import KIND_FACTS, PRICING, WASTE, group_savings_usd, kinds_of
from gpuwatch.analytics.rules import KINDS

DOCS = Path(__file__).resolve().parents[1] / "docs" / "recommendations.md"


def test_every_kind_has_its_facts_in_rank_order() -> None:
    assert tuple(KIND_FACTS) == KINDS
    assert kinds_of(WASTE) == (
        "reclaim_idle", "reduce_gpu_count", "reduce_replicas", "use_mig", "share_gpu",
    )  # fmt: skip
    assert kinds_of(PRICING) == ("cheaper_model", "use_spot")


def test_the_docs_state_each_kind_as_defined() -> None:
    rows = re.findall(r"^\| `([a-z_]+)` \| (\w+) \| (.+?) \| (.+?) \|$", DOCS.read_text(), re.M)
    documented = {kind: (group, effort, risk) for kind, group, effort, risk in rows}
    assert documented == {k: (f.group, f.effort, f.risk) for k, f in KIND_FACTS.items()}


def _rec(workload: str, kind: str, usd: float) -> dict[str, object]:
    return {"cluster": "c1", "namespace": "ml", "team": "t", "workload_kind": "Job",
            "workload": workload, "gpu_model": "m", "kind": kind, "current": "",
            "suggested": "", "confidence": "low", "evidence": {},
            "est_monthly_savings_usd": usd, "allocation": "device-plugin"}  # fmt: skip


def test_group_savings_take_the_largest_of_the_group_per_workload() -> None:
    recs = pd.DataFrame(
        [
            _rec("a", "reduce_gpu_count", 300.0),
            _rec("a", "use_mig", 200.0),  # an alternative to a's 300: not added
            _rec("a", "use_spot", 500.0),
            _rec("b", "share_gpu", 40.0),
            _rec("b", "cheaper_model", 70.0),
            _rec("c", "memory_risk", 0.0),
        ],
        columns=list(RECOMMENDATION_COLUMNS),
    )
    assert group_savings_usd(recs, WASTE) == 340.0
    assert group_savings_usd(recs, PRICING) == 570.0
    assert group_savings_usd(recs.iloc[:0], WASTE) == 0.0
