"""The rendered rules under Prometheus' own checker: ``promtool check rules`` and ``test rules``.

Needs Debian's ``promtool`` (package ``prometheus``): skipped without it, failed in CI.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuwatch.alerts.render import (
    OPERATOR_FILE,
    PLAIN_FILE,
    render_rules,
    rule_params_from_settings,
    write_rules,
)
from gpuwatch.config import load_settings
from tests.support.binaries import require_binary

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).resolve().parents[1]
ALERTS_DIR = ROOT / "alerts"
UNIT_TESTS = sorted((ALERTS_DIR / "tests").glob("*.yaml"))

CUSTOM_CONFIG = {
    "thresholds": {"idle_util_pct": 10, "low_efficiency_pct": 50, "temperature_c": 80},
    "prometheus": {
        "matchers": ['job="dcgm"'],
        "cluster_label": "cluster",
        "labels": {
            "pod": ["exported_pod", "pod", "kubernetes_pod_name"],
            "namespace": ["kubernetes_namespace"],
            "container": ["container"],
            "uuid": ["gpu_uuid"],
            "hostname": ["node", "Hostname"],
        },
    },
    "alerts": {
        "name": "gpu-rules",
        "namespace": "observability",
        "labels": {"release": "kube-prometheus-stack", "team": "platform"},
        "runbook_base_url": "https://runbooks.example.com/gpu",
        "exporter_namespaces": ["nvidia-system", "monitoring"],
        "idle_cost_usd_per_hour": 25,
    },
    "pricing": {
        "default_usd_per_gpu_hour": 1.5,
        "models": {
            "NVIDIA A100-SXM4-80GB": {"on_demand": 3.9},
            "Custom GPU (v2)": {"on_demand": 7},
        },
        "nodes": {"gpu-node-9": 0.5},
    },
}


def promtool() -> str:
    """The promtool binary; skips the test without it (fails instead when $CI is set)."""
    return require_binary("promtool", "prometheus")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], capture_output=True, text=True, timeout=120, check=False
    )


def _check(path: Path) -> None:
    result = _run("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def _plain_from_operator(operator_text: str, out: Path) -> Path:
    """promtool reads plain rule files only: extract ``spec.groups`` from the PrometheusRule."""
    groups = yaml.safe_load(operator_text)["spec"]["groups"]
    out.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False), encoding="utf-8")
    return out


def test_committed_plain_file_passes_check() -> None:
    _check(ALERTS_DIR / PLAIN_FILE)


def test_committed_operator_file_passes_check(tmp_path: Path) -> None:
    text = (ALERTS_DIR / OPERATOR_FILE).read_text(encoding="utf-8")
    _check(_plain_from_operator(text, tmp_path / "operator-groups.yaml"))


@pytest.mark.parametrize("unit_test", UNIT_TESTS, ids=[p.stem for p in UNIT_TESTS])
def test_promtool_unit_tests_pass(unit_test: Path) -> None:
    result = _run("test", "rules", str(unit_test))
    assert result.returncode == 0, result.stdout + result.stderr


def test_unit_tests_exist() -> None:
    assert len(UNIT_TESTS) >= 6


def _custom_render(tmp_path: Path) -> dict[str, str]:
    files = render_rules(
        rule_params_from_settings(load_settings(environ={}, overrides=CUSTOM_CONFIG))
    )
    write_rules(tmp_path, files)
    return files


def test_non_default_render_passes_check(tmp_path: Path) -> None:
    files = _custom_render(tmp_path)
    _check(tmp_path / PLAIN_FILE)
    _check(_plain_from_operator(files[OPERATOR_FILE], tmp_path / "operator-groups.yaml"))
    metadata = yaml.safe_load(files[OPERATOR_FILE])["metadata"]
    assert metadata["namespace"] == "observability"
    assert metadata["labels"]["team"] == "platform"


def _series(labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ", ".join(f'{key}="{value}"' for key, value in labels.items())
    return {"series": f"DCGM_FI_DEV_GPU_UTIL{{{inner}}}", "values": values}


def _idle_alert(pod: str, gpu: str, node: str, peak: str, labels: dict[str, str]) -> dict[str, Any]:
    description = (
        f"Pod ml/{pod} holds GPU {gpu} (Tesla T4) on node {node} but has not used it above 10% "
        f"in the last 30 minutes (peak {peak})."
    )
    return {
        "exp_labels": {"severity": "warning", **labels, "util_signal": "dev"},
        "exp_annotations": {
            "summary": f"Pod ml/{pod} holds an idle GPU.",
            "description": description,
            "runbook_url": "https://runbooks.example.com/gpu#gpuallocatedidle",
        },
    }


def _custom_schema_test() -> dict[str, Any]:
    """A promtool unit test of CUSTOM_CONFIG's label schema, matchers and exporter namespaces."""
    base = {"job": "dcgm", "cluster": "east", "kubernetes_namespace": "ml"}
    # No plain pod: kubernetes_pod_name fills it in; a node label already set beats Hostname.
    first = {
        **base,
        "gpu_uuid": "GPU-1",
        "kubernetes_pod_name": "trainer-0",
        "Hostname": "exporter-pod-a",
        "node": "gpu-node-1",
        "modelName": "Tesla T4",
    }
    # pod is preferred over kubernetes_pod_name; without a node label, Hostname fills it in.
    fourth = {
        **base,
        "gpu_uuid": "GPU-4",
        "pod": "real-pod",
        "kubernetes_pod_name": "not-this-one",
        "Hostname": "gpu-node-3",
        "modelName": "Tesla T4",
    }
    other_job = {**first, "job": "other", "gpu_uuid": "GPU-2", "kubernetes_pod_name": "t-1"}
    exporter = {
        **base,
        "gpu_uuid": "GPU-3",
        "kubernetes_namespace": "nvidia-system",
        "pod": "dcgm-exporter-abc",
        "Hostname": "gpu-node-2",
    }
    # 12% is above this configuration's 10% idle threshold.
    busy = {**base, "gpu_uuid": "GPU-5", "pod": "busy-pod", "Hostname": "gpu-node-3"}
    first_out = {**first, "gpu": "GPU-1", "namespace": "ml", "pod": "trainer-0"}
    fourth_out = {**fourth, "gpu": "GPU-4", "namespace": "ml", "node": "gpu-node-3"}
    unallocated = 'gpuwatch:node_gpus_unallocated:sum{cluster="east", node="gpu-node-2"}'
    case = {
        "interval": "1m",
        "input_series": [
            _series(first, "8x30"),
            _series(other_job, "0x30"),
            _series(exporter, "0x30"),
            _series(fourth, "0x30"),
            _series(busy, "12x30"),
        ],
        "alert_rule_test": [
            {"eval_time": "19m", "alertname": "GPUAllocatedIdle", "exp_alerts": []},
            {
                "eval_time": "20m",
                "alertname": "GPUAllocatedIdle",
                "exp_alerts": [
                    _idle_alert("trainer-0", "GPU-1", "gpu-node-1", "8%", first_out),
                    _idle_alert("real-pod", "GPU-4", "gpu-node-3", "0%", fourth_out),
                ],
            },
        ],
        "promql_expr_test": [
            {
                "expr": "gpuwatch:node_gpus_unallocated:sum",
                "eval_time": "5m",
                "exp_samples": [{"labels": unallocated, "value": 1}],
            }
        ],
    }
    return {"rule_files": [PLAIN_FILE], "evaluation_interval": "1m", "tests": [case]}


def test_non_default_label_schema_behaves(tmp_path: Path) -> None:
    _custom_render(tmp_path)
    unit_test = tmp_path / "custom_schema_test.yaml"
    unit_test.write_text(yaml.safe_dump(_custom_schema_test(), sort_keys=False), encoding="utf-8")
    result = _run("test", "rules", str(unit_test))
    assert result.returncode == 0, result.stdout + result.stderr


def test_missing_promtool_skips_or_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="promtool not found"):
        promtool()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="promtool not found: install Debian's"):
        promtool()
