"""The scheduling-waste alerts: ``scheduling.gang_stall_after`` in the rules, kube-state-metrics
label names, and a render with a cluster label under promtool (the same gang, node or queue
name in two clusters is two of them)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuwatch.alerts.grafana import FLEET_FILE, panel_queries, render_dashboards
from gpuwatch.alerts.grafana_scheduling import TITLES
from gpuwatch.alerts.params import RuleParams
from gpuwatch.alerts.recording_scheduling import ksm_label
from gpuwatch.alerts.render import PLAIN_FILE, render_rules, rule_params_from_settings, write_rules
from gpuwatch.config import load_settings
from gpuwatch.domain.scheduling import (
    JOBSET_NAME_LABEL,
    KUEUE_POD_GROUP_LABEL,
    VOLCANO_GROUP_ANNOTATION,
)
from tests.support.binaries import require_binary

CONFIG = {
    "prometheus": {"cluster_label": "cluster"},
    "scheduling": {"gang_stall_after": "30m"},
}
RUNBOOK = "https://github.com/gpuwatch/gpuwatch/blob/main/docs/runbook.md"


def _rules(params: RuleParams) -> dict[str, dict[str, Any]]:
    groups = yaml.safe_load(render_rules(params)[PLAIN_FILE])["groups"]
    return {r.get("alert") or r["record"]: r for g in groups for r in g["rules"]}


def test_kube_state_metrics_label_names() -> None:
    assert ksm_label(KUEUE_POD_GROUP_LABEL, "label") == "label_kueue_x_k8s_io_pod_group_name"
    assert ksm_label(JOBSET_NAME_LABEL, "label") == "label_jobset_sigs_k8s_io_jobset_name"
    assert ksm_label(VOLCANO_GROUP_ANNOTATION, "annotation") == (
        "annotation_scheduling_k8s_io_group_name"
    )


def test_gang_stall_after_reaches_the_rules() -> None:
    rules = _rules(rule_params_from_settings(load_settings(environ={}, overrides=CONFIG)))
    stalled = rules["gpuwatch:gang_pods_stalled:count"]["expr"]
    assert "(time() - label_replace(" in stalled and ") > 1800\n" in stalled
    alert = rules["GPUGangStalled"]
    assert "Pending for more than 30 minutes" in alert["annotations"]["description"]
    assert "cluster=%q, namespace=%q, gang_kind=%q" in alert["annotations"]["description"]
    assert alert["expr"].splitlines()[1] == "and on (cluster, namespace, gang_kind, gang_name)"
    assert "for" not in alert
    assert rules["GPUCapacityFragmented"]["for"] == "30m"
    assert rules["GPUQuotaIdleWhilePending"]["for"] == "30m"
    default = _rules(RuleParams())["gpuwatch:gang_pods_stalled:count"]["expr"]
    assert ") > 600\n" in default


def test_scheduling_row_reads_the_recorded_series() -> None:
    board = json.loads(render_dashboards(RuleParams(cluster_label="k8s"))[FLEET_FILE])
    rows = [p["title"] for p in board["panels"] if p["type"] == "row"]
    assert rows[-1] == "Scheduling"
    found: dict[str, list[str]] = {}
    for title, expr in panel_queries(board):
        found.setdefault(title, []).append(expr)
    assert set(TITLES) <= set(found)
    quota = "\n".join(found["GPU quota and usage per ClusterQueue"])
    assert "sum by (k8s, cluster_queue, resource) (gpuwatch:kueue_gpu_quota:sum{" in quota
    assert "gpuwatch:kueue_gpu_usage:sum" in quota and "gpuwatch:kueue_gpu_quota_idle:sum" in quota
    free = "\n".join(found["Free GPUs vs the largest unschedulable request"])
    assert "gpuwatch:cluster_gpus_free_one_node:max" in free
    assert "max by (k8s, resource) (gpuwatch:pod_gpu_requests_unschedulable:sum" in free
    wait = found["Admission wait, p90 over 1h"][0]
    assert wait.startswith("gpuwatch:kueue_admission_wait_seconds:p90_1h{")


def _series(metric: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ", ".join(f'{key}="{value}"' for key, value in labels.items())
    return {"series": f"{metric}{{{inner}}}", "values": values}


def _ksm_pod(cluster: str, pod: str, phase: str, gpus: int, node: str) -> list[dict[str, str]]:
    labels = {"cluster": cluster, "namespace": "ml", "pod": pod}
    requests = {**labels, "container": "c", "resource": "nvidia_com_gpu"}
    if node:
        requests["node"] = node
    return [
        _series("kube_pod_status_phase", {**labels, "phase": phase}, "1x50"),
        _series("kube_pod_owner", {**labels, "owner_kind": "Job", "owner_name": "train"}, "1x50"),
        _series("kube_pod_created", labels, "0x50"),
        _series("kube_pod_container_resource_requests", requests, f"{gpus}x50"),
    ]


def _unit_test() -> dict[str, Any]:
    """Job ml/train in two clusters: in east one pod runs with 2 GPUs and one waits; in west
    both wait. Only east's gang is stalled, from 31m (more than 30 minutes old)."""
    series = [
        _series(
            "kube_job_spec_parallelism",
            {"cluster": c, "namespace": "ml", "job_name": "train"},
            "2x50",
        )
        for c in ("east", "west")
    ]
    series += _ksm_pod("east", "train-0", "Running", 2, "node-a")
    series += _ksm_pod("east", "train-1", "Pending", 2, "")
    series += _ksm_pod("west", "train-0", "Pending", 2, "")
    series += _ksm_pod("west", "train-1", "Pending", 2, "")
    description = (
        "The running pods of gang job train in namespace ml hold 2 GPU(s) while 1 of its pods "
        "have been Pending for more than 30 minutes: the gang cannot run until they start, so "
        "those GPUs wait idle (stalled)."
    )
    fired = {
        "exp_labels": {
            "severity": "warning",
            "cluster": "east",
            "namespace": "ml",
            "gang_kind": "job",
            "gang_name": "train",
        },
        "exp_annotations": {
            "summary": "Gang train holds GPUs while some of its pods cannot start.",
            "description": description,
            "runbook_url": f"{RUNBOOK}#gpugangstalled",
        },
    }
    case = {
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            {"eval_time": "30m", "alertname": "GPUGangStalled", "exp_alerts": []},
            {"eval_time": "31m", "alertname": "GPUGangStalled", "exp_alerts": [fired]},
        ],
    }
    return {"rule_files": [PLAIN_FILE], "evaluation_interval": "1m", "tests": [case]}


@pytest.mark.prometheus
def test_non_default_scheduling_render_behaves(tmp_path: Path) -> None:
    promtool = require_binary("promtool", "prometheus")
    settings = load_settings(environ={}, overrides=CONFIG)
    write_rules(tmp_path, render_rules(rule_params_from_settings(settings)))
    unit_test = tmp_path / "scheduling_test.yaml"
    unit_test.write_text(yaml.safe_dump(_unit_test(), sort_keys=False), encoding="utf-8")
    done = subprocess.run(
        [promtool, "test", "rules", str(unit_test)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


# --- the Scheduling row's queries under promtool ----------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
UNIT_TESTS = ROOT / "alerts" / "tests"


def _input(name: str) -> list[dict[str, str]]:
    """The input series of the first case of a committed promtool unit test."""
    doc = yaml.safe_load((UNIT_TESTS / name).read_text(encoding="utf-8"))
    series: list[dict[str, str]] = doc["tests"][0]["input_series"]
    return series


def _panel(board: dict[str, Any], title: str, number: int) -> str:
    exprs = [expr for t, expr in panel_queries(board) if t == title]
    return exprs[number].replace("$cluster", ".*").replace("$namespace", ".*")


#: (panel title, query number, expected samples at 16m), values counted by hand from the
#: scenarios of gpu_quota_idle_while_pending.yaml, gpu_capacity_fragmented.yaml (case A) and
#: gpu_gang_stalled.yaml (case B).
CASE_A = [
    (
        "Pending workloads per ClusterQueue",
        0,
        [
            ('gpuwatch:kueue_pending_workloads:sum{cluster_queue="team-a"}', 0),
            ('gpuwatch:kueue_pending_workloads:sum{cluster_queue="team-b"}', 3),
            ('gpuwatch:kueue_pending_workloads:sum{cluster_queue="team-c"}', 0),
            ('gpuwatch:kueue_pending_workloads:sum{cluster_queue="solo"}', 0),
        ],
    ),
    (
        "GPU quota and usage per ClusterQueue",
        0,
        [
            ('{cluster_queue="team-a", resource="nvidia.com/gpu"}', 10),
            ('{cluster_queue="team-b", resource="nvidia.com/gpu"}', 4),
            ('{cluster_queue="team-c", resource="nvidia.com/gpu"}', 4),
            ('{cluster_queue="solo", resource="nvidia.com/gpu"}', 2),
        ],
    ),
    (
        "GPU quota and usage per ClusterQueue",
        2,
        [
            ('{cluster_queue="team-a", resource="nvidia.com/gpu"}', 8),
            ('{cluster_queue="team-b", resource="nvidia.com/gpu"}', 0),
            ('{cluster_queue="team-c", resource="nvidia.com/gpu"}', 4),
            ('{cluster_queue="solo", resource="nvidia.com/gpu"}', 2),
        ],
    ),
    (
        "Free GPUs vs the largest unschedulable request",
        0,
        [('gpuwatch:cluster_gpus_free:sum{resource="nvidia_com_gpu"}', 4)],
    ),
    (
        "Free GPUs vs the largest unschedulable request",
        1,
        [('gpuwatch:cluster_gpus_free_one_node:max{resource="nvidia_com_gpu"}', 2)],
    ),
    ("Free GPUs vs the largest unschedulable request", 2, [('{resource="nvidia_com_gpu"}', 8)]),
]
CASE_B = [
    (
        "Stalled gangs",
        0,
        [
            (
                'gpuwatch:gang_gpus_running:sum{namespace="ml", gang_kind="job", '
                'gang_name="train-a"}',
                4,
            ),
            (
                'gpuwatch:gang_gpus_running:sum{namespace="ml", gang_kind="jobset", '
                'gang_name="sweep"}',
                1,
            ),
        ],
    ),
]


def _case(board: dict[str, Any], series: list[dict[str, str]], checks: list[Any]) -> dict[str, Any]:
    tests = [
        {
            "expr": _panel(board, title, number),
            "eval_time": "16m",
            "exp_samples": [{"labels": labels, "value": value} for labels, value in samples],
        }
        for title, number, samples in checks
    ]
    return {"interval": "1m", "input_series": series, "promql_expr_test": tests}


@pytest.mark.prometheus
def test_scheduling_panels_evaluate_to_the_counted_values(tmp_path: Path) -> None:
    promtool = require_binary("promtool", "prometheus")
    board = json.loads(render_dashboards(RuleParams())[FLEET_FILE])
    quota_and_capacity = _input("gpu_quota_idle_while_pending.yaml")
    quota_and_capacity += _input("gpu_capacity_fragmented.yaml")
    doc = {
        "rule_files": [str(ROOT / "alerts" / PLAIN_FILE)],
        "evaluation_interval": "1m",
        "tests": [
            _case(board, quota_and_capacity, CASE_A),
            _case(board, _input("gpu_gang_stalled.yaml"), CASE_B),
        ],
    }
    unit_test = tmp_path / "panels_test.yaml"
    unit_test.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    done = subprocess.run(
        [promtool, "test", "rules", str(unit_test)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
