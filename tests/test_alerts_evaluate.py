"""The core alerts evaluated over stored samples agree with the rendered rules.

The scenarios are the promtool unit tests of ``alerts/tests/``: their input series are turned
into stored samples and evaluated at the same instants, and the alerts that fire must be the
ones promtool expects (which ``tests/test_alerts_promtool.py`` checks against Prometheus' own
rule engine). Where the store cannot see what Prometheus sees (staleness markers, ``up``,
kube-state-metrics) the difference is spelled out in its own test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from gpuwatch.alerts.definitions import (
    AlertDefinition,
    Timing,
    alert_table,
    duration,
    span_text,
)
from gpuwatch.alerts.evaluate import (
    KINDS,
    evaluate,
    evaluate_core,
    evaluation_grid,
    prepare_samples,
)
from gpuwatch.alerts.params import RuleParams
from gpuwatch.alerts.render import PLAIN_FILE, render_rules
from tests.support.promtool_fixture import eval_seconds, expand, stored_samples

ROOT = Path(__file__).resolve().parents[1]
UNIT_TESTS = ROOT / "alerts" / "tests"
TABLE = alert_table(RuleParams())
EXPORTER_NAMESPACES = ("gpu-operator",)
#: promtool unit-test files whose scenarios the store evaluation must reproduce exactly.
SHARED = {
    "gpu_allocated_idle.yaml": "GPUAllocatedIdle",
    "gpu_namespace_low_efficiency.yaml": "GPUNamespaceLowEfficiency",
    "gpu_memory_near_full.yaml": "GPUMemoryNearFull",
    "gpu_high_temperature.yaml": "GPUHighTemperature",
    "gpu_xid_error.yaml": "GPUXidError",
    "gpu_xid_hardware_error.yaml": "GPUXidHardwareError",
}


def _checks() -> list[tuple[str, int, int, dict[str, Any], dict[str, Any], int]]:
    out = []
    for name in SHARED:
        doc = yaml.safe_load((UNIT_TESTS / name).read_text(encoding="utf-8"))
        interval = eval_seconds(doc.get("evaluation_interval", "1m"))
        for number, case in enumerate(doc["tests"]):
            for check in case["alert_rule_test"]:
                out.append((name, number, interval, case, check, eval_seconds(check["eval_time"])))
    return out


CHECKS = _checks()


def _subject(labels: dict[str, str], alert: str) -> tuple[str, ...]:
    if alert == "GPUNamespaceLowEfficiency":
        return (labels["namespace"],)
    return (labels["gpu"], labels.get("namespace", ""), labels.get("pod", ""))


def _firing(case: dict[str, Any], alert: str, at_ts: int, interval: int) -> set[tuple[str, ...]]:
    samples, gpu_labels = stored_samples(case)
    d = TABLE.by_name(alert)
    found = evaluate_core(samples, TABLE, at_ts, EXPORTER_NAMESPACES, interval)
    firing = next(e for e in found if e.definition == d).firing
    if alert == "GPUNamespaceLowEfficiency":
        return {(ns,) for ns in firing["namespace"]}
    return {
        (gpu_labels[int(row.gpu_id)], row.namespace or "", row.pod or "")
        for row in firing.itertuples()
    }


@pytest.mark.parametrize(
    ("name", "number", "interval", "case", "check", "at_ts"),
    CHECKS,
    ids=[f"{c[0].removesuffix('.yaml')}-{c[1]}-{c[4]['eval_time']}" for c in CHECKS],
)
def test_store_evaluation_fires_as_promtool_expects(
    name: str, number: int, interval: int, case: dict[str, Any], check: dict[str, Any], at_ts: int
) -> None:
    alert = check["alertname"]
    assert alert == SHARED[name]
    expected = {_subject(a["exp_labels"], alert) for a in check["exp_alerts"]}
    assert _firing(case, alert, at_ts, interval) == expected


def test_every_shared_alert_has_early_and_firing_checks() -> None:
    for name, alert in SHARED.items():
        checks = [c[4] for c in CHECKS if c[0] == name]
        assert any(not c["exp_alerts"] for c in checks), f"{alert}: no check that must not fire"
        assert any(c["exp_alerts"] for c in checks), f"{alert}: no check that fires"


def _exporter_case() -> dict[str, Any]:
    doc = yaml.safe_load((UNIT_TESTS / "gpu_exporter_down.yaml").read_text(encoding="utf-8"))
    case: dict[str, Any] = doc["tests"][0]
    return case


def _exporter_states(at_ts: int) -> dict[str, str]:
    samples, _ = stored_samples(_exporter_case())
    d = TABLE.exporter_down
    found = evaluate(KINDS[d.name], d, _prepared(samples), at_ts)
    return dict(zip(found.subjects["node"], found.subjects["state"], strict=True))


def _prepared(samples: pd.DataFrame) -> pd.DataFrame:
    return prepare_samples(samples, EXPORTER_NAMESPACES)


def test_exporter_down_from_the_store() -> None:
    """promtool's GPUExporterDown scenario, as the store sees it.

    Node gpu-node-2 (target B: series stop at 30m without staleness markers) behaves exactly as
    in Prometheus: silent once its last sample leaves the 5-minute lookback (36m), firing 5
    minutes later. Node gpu-node-1 (target A: up == 0 and staleness markers from 30m in
    Prometheus, which fires at 35m) has its last stored sample at 29m: silent from 35m, firing
    at 40m. gpu-node-3's GPU moves to a new exporter address and never alerts. gpu-node-9 was
    removed from the cluster (kube-state-metrics), which the samples cannot tell: it alerts
    like gpu-node-1.
    """
    assert _exporter_states(34 * 60) == {}
    assert _exporter_states(35 * 60) == {"gpu-node-1": "pending", "gpu-node-9": "pending"}
    pending = {"gpu-node-1": "pending", "gpu-node-2": "pending", "gpu-node-9": "pending"}
    assert _exporter_states(39 * 60) == pending
    firing = {"gpu-node-1": "firing", "gpu-node-9": "firing"}
    assert _exporter_states(40 * 60) == {**firing, "gpu-node-2": "pending"}
    assert _exporter_states(41 * 60) == {**firing, "gpu-node-2": "firing"}
    assert _exporter_states(60 * 60) == {**firing, "gpu-node-2": "firing"}
    # An hour after their last samples (29m and 30m) the nodes are forgotten.
    assert _exporter_states(89 * 60) == {**firing, "gpu-node-2": "firing"}
    assert _exporter_states(90 * 60) == {"gpu-node-2": "firing"}
    assert _exporter_states(91 * 60) == {}


def _idle_case() -> dict[str, Any]:
    doc = yaml.safe_load((UNIT_TESTS / "gpu_allocated_idle.yaml").read_text(encoding="utf-8"))
    case: dict[str, Any] = doc["tests"][0]
    return case


def test_pending_before_firing_and_values() -> None:
    """trainer-0 (1% from 11m) and trainer-1 (2% from 11m) are clear of their busy samples at
    10m from 41m: both pending. trainer-1's busy sample at 45m ends its run; trainer-0 fires
    20 minutes after 41m, at 61m."""
    samples, labels = stored_samples(_idle_case())
    d = TABLE.allocated_idle
    prepared = _prepared(samples)

    def at(minute: int) -> pd.DataFrame:
        return evaluate(KINDS[d.name], d, prepared, minute * 60).subjects

    assert at(40).empty
    pending = at(41)
    assert [labels[int(g)] for g in pending["gpu_id"]] == ["GPU-5d3e8a0c-0001", "GPU-5d3e8a0c-0003"]
    assert pending["pod"].tolist() == ["trainer-0", "trainer-1"]
    assert pending["state"].tolist() == ["pending", "pending"]
    assert pending["peak_util_ratio"].tolist() == [pytest.approx(0.01), pytest.approx(0.02)]
    assert at(60)["state"].tolist() == ["pending"]
    fired = at(61)
    assert fired["pod"].tolist() == ["trainer-0"]
    assert fired["state"].tolist() == ["firing"]


def test_namespace_mean_and_memory_ratio_values() -> None:
    doc = yaml.safe_load(
        (UNIT_TESTS / "gpu_namespace_low_efficiency.yaml").read_text(encoding="utf-8")
    )
    samples, _ = stored_samples(doc["tests"][0])
    found = evaluate_core(samples, TABLE, 6 * 3600, EXPORTER_NAMESPACES, 300)
    low = next(e for e in found if e.definition.name == "GPUNamespaceLowEfficiency").firing
    # research: a whole GPU at 20% (DEV) and a MIG instance at 0.2 (PROF); vision at 80%.
    assert low["namespace"].tolist() == ["research"]
    assert low["mean_util_ratio"].tolist() == [pytest.approx(0.2)]
    doc = yaml.safe_load((UNIT_TESTS / "gpu_memory_near_full.yaml").read_text(encoding="utf-8"))
    samples, _ = stored_samples(doc["tests"][1])
    found = evaluate_core(samples, TABLE, 10 * 60, EXPORTER_NAMESPACES)
    full = next(e for e in found if e.definition.name == "GPUMemoryNearFull").firing
    # 9800 / (9800 + 200) and 78000 / (78000 + 2000): no FB_RESERVED.
    assert sorted(full["fb_used_ratio"].round(4).tolist()) == [0.975, 0.98]


def test_thresholds_come_from_the_definition() -> None:
    """The same trainer-0 scenario at a 0.5% idle threshold: 1% is not idle any more."""
    samples, _ = stored_samples(_idle_case())
    strict = alert_table(RuleParams(idle_util_pct=0.5))
    found = evaluate_core(samples, strict, 61 * 60, EXPORTER_NAMESPACES)
    assert next(e for e in found if e.definition.name == "GPUAllocatedIdle").subjects.empty


def test_evaluation_grid_reaches_back_to_for() -> None:
    assert evaluation_grid(3600, 0).tolist() == [3600]
    assert evaluation_grid(3600, 300).tolist() == [3600, 3540, 3480, 3420, 3360, 3300]
    # A for: between two evaluations needs the one before it.
    assert evaluation_grid(3600, 90).tolist() == [3600, 3540, 3480]


def test_a_shorter_for_fires_sooner() -> None:
    samples, _ = stored_samples(_idle_case())
    base = TABLE.allocated_idle
    quick = AlertDefinition(base.name, base.severity, base.threshold, Timing(base.timing.window_s))
    prepared = _prepared(samples)
    # Without for:, trainer-0 and trainer-1 fire as soon as their window is clear (41m).
    found = evaluate(KINDS[base.name], quick, prepared, 41 * 60).subjects
    assert found["state"].tolist() == ["firing", "firing"]


def test_rendered_rules_carry_the_definitions() -> None:
    """Every alert's ``for:`` and severity in the rule file are its definition's."""
    groups = yaml.safe_load(render_rules(RuleParams())[PLAIN_FILE])["groups"]
    rules = {r["alert"]: r for g in groups for r in g["rules"] if "alert" in r}
    assert list(rules) == [d.name for d in TABLE.all()]
    for d in TABLE.all():
        assert rules[d.name].get("for", "") == d.timing.for_
        assert rules[d.name]["labels"]["severity"] == d.severity
    idle = rules["GPUAllocatedIdle"]["expr"]
    assert "gpuwatch:gpu_util_max30m:ratio" in idle
    assert "< 0.05" in idle
    efficiency = rules["GPUNamespaceLowEfficiency"]["expr"]
    assert "[6h]" in efficiency
    assert "[1h] offset 5h" in efficiency
    assert "< 0.3" in efficiency


def test_durations_and_spans_as_text() -> None:
    assert [duration(s) for s in (60, 1800, 3600, 19800)] == ["1m", "30m", "1h", "5h30m"]
    assert [span_text(s) for s in (3600, 1800, 21600, 600)] == [
        "hour",
        "30 minutes",
        "6 hours",
        "10 minutes",
    ]


def test_promtool_notation_expands_as_promtool_does() -> None:
    assert expand("1x2 _ 3 _x2 stale") == [1.0, 1.0, 1.0, None, 3.0, None, None, None]
    assert expand("0+5x2 9223372036854775794") == [0.0, 5.0, 10.0, None]


def test_no_samples_no_subjects() -> None:
    empty = pd.DataFrame(
        {
            name: pd.Series(dtype=dtype)
            for name, dtype in (
                ("cluster", object),
                ("node", object),
                ("gpu_id", "int64"),
                ("gpu_model", object),
                ("ts", "int64"),
                ("pod_id", "Int64"),
                ("namespace", object),
                ("pod", object),
                ("util_ratio", "float64"),
                ("fb_used_mib", "float64"),
                ("fb_total_mib", "float64"),
                ("temp_c", "float64"),
                ("xid", "Int64"),
            )
        }
    )
    found = evaluate_core(empty, TABLE, 3600)
    assert [e.definition.name for e in found] == list(KINDS)
    assert all(e.subjects.empty for e in found)
    assert np.all([e.value_name in e.subjects.columns for e in found])


def test_a_sample_stands_for_its_whole_step() -> None:
    """Samples every 30 minutes (a coarse collection step): each stays a GPU's latest reading
    for its step, so an idle GPU held for two hours fires, and a node whose last sample is
    one step old is not silent yet."""
    rows = [
        {
            "cluster": "c",
            "node": "n1",
            "gpu_id": 1,
            "gpu_model": "Tesla T4",
            "ts": ts,
            "step_s": 1800,
            "pod_id": 7,
            "namespace": "ml",
            "pod": "p-0",
            "util_ratio": 0.0,
            "fb_used_mib": 100.0,
            "fb_total_mib": 15000.0,
            "temp_c": 40.0,
            "xid": 0,
        }
        for ts in range(0, 7201, 1800)
    ]
    samples = pd.DataFrame(rows).astype({"pod_id": "Int64", "xid": "Int64"})
    found = {e.definition.name: e for e in evaluate_core(samples, TABLE, 7200)}
    assert found["GPUAllocatedIdle"].subjects["state"].tolist() == ["firing"]
    assert found["GPUExporterDown"].subjects.empty
    # Half an hour and one second after the last sample, node n1 is silent (pending).
    later = {e.definition.name: e for e in evaluate_core(samples, TABLE, 9001)}
    assert later["GPUExporterDown"].subjects["state"].tolist() == ["pending"]
    assert later["GPUExporterDown"].subjects["silent_gpu_units"].tolist() == [1.0]
