"""Team budgets in the rendered rules: ``showback.monthly_budget_usd`` becomes one series per
team, teams come from a configured label, and clusters add up (promtool on a custom render)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuwatch.alerts.render import PLAIN_FILE, render_rules, rule_params_from_settings, write_rules
from gpuwatch.config import load_settings
from tests.test_alerts_promtool import promtool

pytestmark = pytest.mark.prometheus

CONFIG = {
    "labels": {"team": "cost_team"},
    "prometheus": {"cluster_label": "cluster"},
    "showback": {"monthly_budget_usd": {"ml": 500, 'odd "team"': 12.5}},
}
#: What kube-state-metrics calls the pod label ``cost_team``.
KSM_LABEL = "label_cost_team"


def _gpu(cluster: str, uuid: str, pod: str) -> dict[str, str]:
    labels = (
        f'cluster="{cluster}", job="dcgm", UUID="{uuid}", modelName="Tesla T4", '
        f'Hostname="node-{uuid}", namespace="ml", pod="{pod}"'
    )
    return {"series": f"DCGM_FI_DEV_GPU_UTIL{{{labels}}}", "values": "0x660"}


def _team(cluster: str, pod: str, team: str) -> dict[str, str]:
    labels = f'cluster="{cluster}", namespace="ml", pod="{pod}", {KSM_LABEL}="{team}"'
    return {"series": f"kube_pod_labels{{{labels}}}", "values": "1x660"}


def _unit_test() -> dict[str, Any]:
    # ml holds a T4 ($0.978/h) in each of two clusters: $1.956/h; at 10:00 on 1 January, 11
    # hourly samples this month, 734 hours left: 21.516 + 21.516 / 168 × 734 = $115.52.
    budgets = 'gpuwatch:team_budget:usd_per_month{team="%s"}'
    case = {
        "interval": "1m",
        "input_series": [
            _gpu("east", "GPU-1", "a-0"),
            _gpu("west", "GPU-2", "b-0"),
            _team("east", "a-0", "ml"),
            _team("west", "b-0", "ml"),
        ],
        "promql_expr_test": [
            {
                "expr": "gpuwatch:team_budget:usd_per_month",
                "eval_time": "1m",
                "exp_samples": [
                    {"labels": budgets % "ml", "value": 500},
                    {"labels": budgets % 'odd \\"team\\"', "value": 12.5},
                ],
            },
            {
                "expr": "gpuwatch:team_allocated_cost:usd_per_hour",
                "eval_time": "5m",
                "exp_samples": [
                    {
                        "labels": f'gpuwatch:team_allocated_cost:usd_per_hour{{cluster="{c}", '
                        'team="ml"}',
                        "value": 0.978,
                    }
                    for c in ("east", "west")
                ],
            },
            {
                "expr": "gpuwatch:team_allocated_cost:usd_month_forecast",
                "eval_time": "10h",
                "exp_samples": [
                    {
                        "labels": 'gpuwatch:team_allocated_cost:usd_month_forecast{team="ml"}',
                        "value": 115.52042857142857,
                    }
                ],
            },
        ],
        # Below the $500 budget: nothing fires.
        "alert_rule_test": [
            {"eval_time": "10h", "alertname": "GPUTeamBudgetForecastExceeded", "exp_alerts": []}
        ],
    }
    return {"rule_files": [PLAIN_FILE], "evaluation_interval": "1m", "tests": [case]}


def test_configured_budgets_and_team_label_render_and_evaluate(tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides=CONFIG)
    write_rules(tmp_path, render_rules(rule_params_from_settings(settings)))
    unit_test = tmp_path / "budgets_test.yaml"
    unit_test.write_text(yaml.safe_dump(_unit_test(), sort_keys=False), encoding="utf-8")
    result = subprocess.run(
        [promtool(), "test", "rules", str(unit_test)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_budget_series_without_budgets() -> None:
    files = render_rules(rule_params_from_settings(load_settings(environ={}, overrides={})))
    rules = yaml.safe_load(files[PLAIN_FILE])["groups"][0]["rules"]
    records = {rule.get("record") for rule in rules}
    assert "gpuwatch:team_allocated_cost:usd_month_forecast" in records
    assert "gpuwatch:team_budget:usd_per_month" not in records
