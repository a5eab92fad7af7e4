"""The GPU-health alerts: configuration, clock-event bits, the XID classes, and a non-default
render (cluster label, matchers, health thresholds) under promtool."""

from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuwatch.alerts import promql
from gpuwatch.alerts.definitions import alert_table
from gpuwatch.alerts.evaluate import evaluate_core
from gpuwatch.alerts.params import RuleParams
from gpuwatch.alerts.render import PLAIN_FILE, render_rules, rule_params_from_settings, write_rules
from gpuwatch.config import ConfigError, load_settings
from gpuwatch.domain.health import FAILING_XIDS, XID_CATALOGUE, HealthPolicy
from tests.support.binaries import require_binary
from tests.support.promtool_fixture import stored_samples

ROOT = Path(__file__).resolve().parents[1]
HEALTH_CONFIG = {
    "prometheus": {"matchers": ['job="dcgm"'], "cluster_label": "cluster"},
    "health": {
        "throttle_degraded_pct": 25,
        "pcie_replays_per_hour": 50,
        "nvlink_errors_per_hour": 4,
    },
}


def _alerts(params: RuleParams) -> dict[str, dict[str, Any]]:
    groups = yaml.safe_load(render_rules(params)[PLAIN_FILE])["groups"]
    return {r["alert"]: r for g in groups for r in g["rules"] if "alert" in r}


def _records(params: RuleParams) -> dict[str, str]:
    groups = yaml.safe_load(render_rules(params)[PLAIN_FILE])["groups"]
    return {r["record"]: r["expr"] for g in groups for r in g["rules"] if "record" in r}


def test_health_configuration_reaches_the_rules() -> None:
    settings = load_settings(environ={}, overrides=HEALTH_CONFIG)
    params = rule_params_from_settings(settings)
    assert params.health == HealthPolicy(25, 10, 50, 4)
    alerts = _alerts(params)
    throttled = alerts["GPUThrottledWhileAllocated"]
    assert ">= 0.25\n" in throttled["expr"] and throttled["for"] == "15m"
    assert "(threshold 25%)" in throttled["annotations"]["description"]
    assert alerts["GPUPCIeReplays"]["expr"] == "gpuwatch:gpu_pcie_replays:increase1h >= 50"
    assert alerts["GPUNVLinkErrors"]["expr"] == "gpuwatch:gpu_nvlink_errors:increase1h >= 4"
    assert "on (cluster, gpu_uuid)" in alerts["GPUAllocatedAndFailing"]["expr"]
    fell = alerts["GPUFellOffBus"]["expr"]
    assert fell.startswith("max by (cluster, job, instance, node, gpu, modelName) (")
    assert 'up{job="dcgm"} == 1' in fell
    records = _records(params)
    assert (
        'DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{job="dcgm"} < 9.2e18'
        in records["gpuwatch:gpu_clock_throttle:mask"]
    )


def test_default_health_alerts() -> None:
    alerts = _alerts(RuleParams())
    severities = {name: alerts[name]["labels"]["severity"] for name in alerts}
    assert severities["GPUXidHardwareError"] == "critical"
    assert severities["GPUEccDoubleBitError"] == "critical"
    assert severities["GPUAllocatedAndFailing"] == "critical"
    assert severities["GPUFellOffBus"] == "critical"
    assert severities["GPUThrottledWhileAllocated"] == "warning"
    assert alerts["GPUFellOffBus"]["for"] == "5m"
    assert "GPUPCIeReplaysRising" not in alerts
    assert ">= 0.1\n" in alerts["GPUThrottledWhileAllocated"]["expr"]
    assert alerts["GPUPCIeReplays"]["expr"].endswith(">= 100")


def test_hardware_xids_are_the_catalogue_s_failing_codes() -> None:
    expected = "8|32|38|48|61|62|63|64|74|79|92|94|95|119|120|121|140|143"
    hardware = _alerts(RuleParams())["GPUXidHardwareError"]["expr"]
    assert f'{{xid=~"{expected}"}}[1h]' in hardware
    assert "|".join(map(str, FAILING_XIDS)) == expected
    assert '{xid="79"}[1h]' in _alerts(RuleParams())["GPUFellOffBus"]["expr"]


def test_runbook_lists_every_failing_xid_with_its_meaning() -> None:
    runbook = (ROOT / "docs" / "runbook.md").read_text(encoding="utf-8")
    section = runbook.split("## GPUXidHardwareError", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| (\d+) \| \w+ \| (.+) \|$", section, flags=re.M))
    assert {int(code) for code in rows} == set(FAILING_XIDS)
    for code, meaning in rows.items():
        assert XID_CATALOGUE[int(code)].meaning == meaning


def test_bit_and_renders_each_run_of_bits_once() -> None:
    assert promql.bit_and("x", 0xEC) == "floor(x / 4) % 4 * 4 + floor(x / 32) % 8 * 32"
    assert promql.bit_and("x", 0x3) == "floor(x) % 4 * 1"
    assert promql.bit_and("x", 0x101) == "floor(x) % 2 * 1 + floor(x / 256) % 2 * 256"
    with pytest.raises(ValueError, match="a set bit"):
        promql.bit_and("x", 0)


def _evaluate(expr: str, x: int) -> float:
    """The rendered arithmetic with PromQL's meaning of floor and % (for non-negative x)."""
    python = expr.replace("floor(", "math.floor(")
    return float(eval(python, {"math": math, "x": x}))


@pytest.mark.parametrize("mask", [0xEC, 0x60, 0x4, 0x1FF])
def test_bit_and_equals_the_bitwise_and_for_every_nine_bit_value(mask: int) -> None:
    expr = promql.bit_and("x", mask)
    for x in range(1024):
        assert _evaluate(expr, x) == x & mask, (hex(mask), x)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("health:\n  throttle_degraded_pct: 0\n", "health.throttle_degraded_pct"),
        ("health:\n  pcie_replays_per_hour: 0\n", "health.pcie_replays_per_hour"),
        ("health:\n  nvlink_errors_per_hour: -1\n", "health.nvlink_errors_per_hour"),
    ],
)
def test_bad_health_thresholds_are_refused(tmp_path: Path, text: str, key: str) -> None:
    path = tmp_path / "gpuwatch.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_settings(str(path), environ={})
    assert str(raised.value).startswith(f"{key} in config file {path}")


# --- a non-default render under promtool ------------------------------------------------------


def _series(metric: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ", ".join(f'{key}="{value}"' for key, value in labels.items())
    return {"series": f"{metric}{{{inner}}}", "values": values}


RUNBOOK = "https://github.com/gpuwatch/gpuwatch/blob/main/docs/runbook.md"
REPLAYS_TEXT = (
    "GPU GPU-1 (Tesla T4) on node node-a replayed about 50 PCIe packets in the last hour "
    "(threshold 50): a failing link, riser or slot slows it down."
)
FELL_OFF_TEXT = (
    "GPU GPU-1 (Tesla T4) on node node-a stopped reporting while its exporter i-1 is still up, "
    "or reported XID 79 (GPU has fallen off the bus), in the last hour: the node has lost the "
    "GPU and its pods with it."
)


def _alert(name: str, labels: dict[str, str], summary: str, description: str) -> dict[str, Any]:
    severity = "warning" if name == "GPUPCIeReplays" else "critical"
    annotations = {
        "summary": summary,
        "description": description,
        "runbook_url": f"{RUNBOOK}#{name.lower()}",
    }
    return {"exp_labels": {"severity": severity, **labels}, "exp_annotations": annotations}


def _unit_test() -> dict[str, Any]:
    """GPUPCIeReplays at 50 an hour, GPUFellOffBus per cluster, GPUAllocatedAndFailing joined
    within a cluster: the same GPU UUID in two clusters is two GPUs."""
    gpu = {"job": "dcgm", "UUID": "GPU-1", "Hostname": "node-a", "modelName": "Tesla T4"}
    east, west = {**gpu, "cluster": "east"}, {**gpu, "cluster": "west"}
    held = {**west, "namespace": "ml", "pod": "p-0"}
    up = {"job": "dcgm", "instance": "i-1"}
    replays = {**east, "instance": "i-1"}
    case = {
        "interval": "1m",
        "input_series": [
            _series("up", {**up, "cluster": "east"}, "1x40"),
            _series("up", {**up, "cluster": "west"}, "1x40"),
            _series("DCGM_FI_DEV_GPU_UTIL", {**east, "instance": "i-1"}, "50x9 stale"),
            _series("DCGM_FI_DEV_GPU_UTIL", {**held, "instance": "i-1"}, "50x40"),
            _series("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", replays, "0+5x40"),
            # Another job: outside prometheus.matchers, never read.
            _series("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", {**replays, "job": "x"}, "0+50x40"),
            _series("DCGM_FI_DEV_ROW_REMAP_FAILURE", {**east, "instance": "i-1"}, "1x40"),
        ],
        "alert_rule_test": [
            {"eval_time": "9m", "alertname": "GPUPCIeReplays", "exp_alerts": []},
            {
                "eval_time": "10m",
                "alertname": "GPUPCIeReplays",
                "exp_alerts": [
                    _alert(
                        "GPUPCIeReplays",
                        {**replays, "gpu": "GPU-1", "node": "node-a"},
                        "GPU GPU-1 keeps retrying PCIe transfers.",
                        REPLAYS_TEXT,
                    )
                ],
            },
            {"eval_time": "14m", "alertname": "GPUFellOffBus", "exp_alerts": []},
            {
                "eval_time": "15m",
                "alertname": "GPUFellOffBus",
                "exp_alerts": [
                    _alert(
                        "GPUFellOffBus",
                        {
                            "cluster": "east",
                            "job": "dcgm",
                            "instance": "i-1",
                            "node": "node-a",
                            "gpu": "GPU-1",
                            "modelName": "Tesla T4",
                        },
                        "GPU GPU-1 fell off the bus.",
                        FELL_OFF_TEXT,
                    )
                ],
            },
            # The failing GPU-1 of east is not the held GPU-1 of west.
            {"eval_time": "15m", "alertname": "GPUAllocatedAndFailing", "exp_alerts": []},
        ],
    }
    return {"rule_files": [PLAIN_FILE], "evaluation_interval": "1m", "tests": [case]}


@pytest.mark.prometheus
def test_non_default_health_render_behaves(tmp_path: Path) -> None:
    promtool = require_binary("promtool", "prometheus")
    settings = load_settings(environ={}, overrides=HEALTH_CONFIG)
    write_rules(tmp_path, render_rules(rule_params_from_settings(settings)))
    unit_test = tmp_path / "health_test.yaml"
    unit_test.write_text(yaml.safe_dump(_unit_test(), sort_keys=False), encoding="utf-8")
    done = subprocess.run(
        [promtool, "test", "rules", str(unit_test)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


# --- the store's evaluation -------------------------------------------------------------------


def test_store_reads_hardware_xids_only_and_keeps_the_highest() -> None:
    """An application XID above a hardware one (109 after 48) is GPUXidError's value, not
    GPUXidHardwareError's; a GPU with only application XIDs is not failing."""
    labels = 'UUID="GPU-{n}", Hostname="node-a", namespace="ml", pod="p-{n}"'
    case = {
        "interval": "1m",
        "input_series": [
            {"series": f"DCGM_FI_DEV_XID_ERRORS{{{labels.format(n=1)}}}", "values": "0 48 109 0x5"},
            {"series": f"DCGM_FI_DEV_XID_ERRORS{{{labels.format(n=2)}}}", "values": "0 13 43 0x5"},
        ],
    }
    samples, gpus = stored_samples(case)
    table = alert_table(RuleParams())
    found = {e.definition.name: e for e in evaluate_core(samples, table, 5 * 60)}

    def codes(name: str) -> list[tuple[str, float]]:
        firing = found[name].firing
        return [(gpus[int(row.gpu_id)], float(row.xid)) for row in firing.itertuples()]

    assert codes("GPUXidHardwareError") == [("GPU-1", 48.0)]
    assert codes("GPUXidError") == [("GPU-1", 109.0), ("GPU-2", 43.0)]
