"""The alert rule renderer: committed files, structure, configuration, documentation."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuwatch.alerts import promql
from gpuwatch.alerts.params import PriceEntry, RuleParams
from gpuwatch.alerts.render import (
    OPERATOR_FILE,
    PLAIN_FILE,
    render_rules,
    rule_params_from_settings,
    write_rules,
)
from gpuwatch.config import ConfigError, Settings, load_settings
from gpuwatch.domain.labels import LabelVariants

ROOT = Path(__file__).resolve().parents[1]
ALERTS_DIR = ROOT / "alerts"
CORE_ALERTS = {
    "GPUAllocatedIdle",
    "GPUNamespaceLowEfficiency",
    "GPUMemoryNearFull",
    "GPUHighTemperature",
    "GPUXidError",
    "GPUExporterDown",
}
REFRESH_HINT = "the committed rules are out of date: run `gpuwatch alerts render` to refresh them"


def _default_files() -> dict[str, str]:
    return render_rules(rule_params_from_settings(Settings()))


def _rules(text: str) -> list[dict[str, Any]]:
    groups = yaml.safe_load(text)["groups"]
    return [rule for group in groups for rule in group["rules"]]


def _alerts(text: str) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for r in _rules(text) if "alert" in r}


@pytest.mark.parametrize("name", [OPERATOR_FILE, PLAIN_FILE])
def test_committed_files_equal_the_default_render(name: str) -> None:
    committed = (ALERTS_DIR / name).read_text(encoding="utf-8")
    assert committed == _default_files()[name], REFRESH_HINT


def test_render_is_deterministic() -> None:
    first, second = _default_files(), _default_files()
    assert first == second
    assert not re.search(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}", first[PLAIN_FILE])


def test_operator_file_wraps_the_same_groups() -> None:
    files = _default_files()
    operator = yaml.safe_load(files[OPERATOR_FILE])
    assert operator["apiVersion"] == "monitoring.coreos.com/v1"
    assert operator["kind"] == "PrometheusRule"
    assert operator["metadata"]["name"] == "gpuwatch"
    assert operator["metadata"]["namespace"] == "monitoring"
    assert operator["metadata"]["labels"]["app.kubernetes.io/name"] == "gpuwatch"
    assert operator["spec"]["groups"] == yaml.safe_load(files[PLAIN_FILE])["groups"]


def test_every_alert_has_severity_annotations_and_runbook() -> None:
    alerts = _alerts(_default_files()[PLAIN_FILE])
    assert set(alerts) >= CORE_ALERTS
    base = Settings().alerts.runbook_base_url
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, name
        annotations = rule["annotations"]
        assert set(annotations) == {"summary", "description", "runbook_url"}, name
        assert annotations["runbook_url"] == f"{base}#{name.lower()}"
        assert "{{" in annotations["description"], f"{name}: description has no numbers"


def _markdown_anchors(path: Path) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), flags=re.M)
    return {re.sub(r"[^a-z0-9 _-]", "", h.lower()).replace(" ", "-") for h in headings}


def test_runbook_has_a_section_per_alert() -> None:
    anchors = _markdown_anchors(ROOT / "docs" / "runbook.md")
    for name in _alerts(_default_files()[PLAIN_FILE]):
        assert name.lower() in anchors, f"docs/runbook.md has no section for {name}"


def test_alerts_doc_names_every_rule() -> None:
    doc = (ROOT / "docs" / "alerts.md").read_text(encoding="utf-8")
    for rule in _rules(_default_files()[PLAIN_FILE]):
        name = rule.get("alert") or rule["record"]
        assert f"`{name}`" in doc, f"docs/alerts.md does not mention {name}"


def test_every_alert_has_promtool_cases_that_fire_and_that_do_not() -> None:
    fires: set[str] = set()
    silent: set[str] = set()
    for path in sorted((ALERTS_DIR / "tests").glob("*.yaml")):
        suite = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert suite["rule_files"] == [f"../{PLAIN_FILE}"], path.name
        for case in suite["tests"]:
            for check in case.get("alert_rule_test", []):
                (fires if check.get("exp_alerts") else silent).add(check["alertname"])
    names = set(_alerts(_default_files()[PLAIN_FILE]))
    assert names - fires == set(), "alerts never shown firing"
    assert names - silent == set(), "alerts never shown not firing"


def test_configuration_reaches_the_rules() -> None:
    settings = load_settings(
        environ={},
        overrides={
            "thresholds": {"idle_util_pct": 10, "temperature_c": 80, "memory_full_pct": 90},
            "alerts": {"labels": {"release": "kube-prometheus-stack"}, "name": "gpu-rules"},
            "prometheus": {"matchers": ['job="dcgm"'], "cluster_label": "cluster"},
            "pricing": {"models": {"Tesla T4": {"on_demand": 0.5}}, "nodes": {"n1": 1.25}},
        },
    )
    files = render_rules(rule_params_from_settings(settings))
    plain = files[PLAIN_FILE]
    alerts = _alerts(plain)
    assert alerts["GPUHighTemperature"]["expr"] == "gpuwatch:gpu_temp:celsius >= 80"
    assert alerts["GPUMemoryNearFull"]["expr"] == "gpuwatch:gpu_fb_used:ratio >= 0.9"
    assert "< 0.1\n" in alerts["GPUAllocatedIdle"]["expr"]
    assert "above 10%" in alerts["GPUAllocatedIdle"]["annotations"]["description"]
    assert 'DCGM_FI_DEV_GPU_UTIL{job="dcgm"}' in plain
    assert "on (cluster, gpu, namespace, pod)" in plain
    assert 'node="n1"} * 0 + 1.25' in plain
    assert 'Tesla[- ]T4|NVIDIA[- ]T4|NVIDIA[- ]Tesla[- ]T4"} * 0 + 0.5\n' in plain
    metadata = yaml.safe_load(files[OPERATOR_FILE])["metadata"]
    assert metadata["name"] == "gpu-rules"
    assert metadata["labels"]["release"] == "kube-prometheus-stack"


def test_params_from_default_settings() -> None:
    params = rule_params_from_settings(Settings())
    assert params.labels == LabelVariants()
    assert params.idle_ratio == 0.05
    assert params.exporter_namespaces == ("gpu-operator",)
    a30 = next(p for p in params.prices if "NVIDIA A30" in p.aliases)
    assert a30.compute_slices == 4
    a100 = next(p for p in params.prices if "NVIDIA A100-SXM4-80GB" in p.aliases)
    assert a100.compute_slices == 7
    assert a100.usd_per_gpu_hour == pytest.approx(5.12071875)


def test_price_table_renders_first_match_in_order() -> None:
    params = RuleParams(
        prices=(PriceEntry(("Model A", "Model-A"), 3.0), PriceEntry(("B (x)",), 1.5)),
        node_prices=(("node-1", 0.75),),
        default_usd_per_gpu_hour=2.5,
    )
    price = next(
        r for r in _rules(render_rules(params)[PLAIN_FILE]) if "price" in r.get("record", "")
    )
    terms = [line.strip() for line in price["expr"].splitlines() if "* 0 +" in line]
    assert terms == [
        'gpuwatch:gpu_util:ratio{node="node-1"} * 0 + 0.75',
        'gpuwatch:gpu_util:ratio{modelName=~"(?i)Model[- ]A"} * 0 + 3',
        'gpuwatch:gpu_util:ratio{modelName=~"(?i)B[- ]\\\\x{28}x\\\\x{29}"} * 0 + 1.5',
        "gpuwatch:gpu_util:ratio * 0 + 2.5",
    ]


def test_write_rules_creates_the_folder(tmp_path: Path) -> None:
    files = _default_files()
    written = write_rules(tmp_path / "out", files)
    assert [p.name for p in written] == sorted(files)
    for path in written:
        assert path.read_text(encoding="utf-8") == files[path.name]


@pytest.mark.parametrize(
    ("value", "text"),
    [(5.0, "5"), (0.05, "0.05"), (0.1 + 0.2, "0.3"), (5.12071875, "5.12071875"), (1e-12, "1e-12")],
)
def test_number_formatting(value: float, text: str) -> None:
    assert promql.number(value) == text


def test_regex_literal_escapes_everything_but_plain_characters() -> None:
    assert promql.regex_literal('a.b"c\\d') == "a\\x{2e}b\\x{22}c\\x{5c}d"
    assert promql.regex_literal("NVIDIA A100-SXM4", fold_separators=True) == (
        "NVIDIA[- ]A100[- ]SXM4"
    )
    assert promql.alternation(["x y", "x-y"], fold_separators=True) == "x[- ]y"


def test_coalesce_orders_label_variants() -> None:
    # Target last: higher-priority variants override it.
    assert promql.coalesce("m", "pod", ["exported_pod", "pod"]).count("label_replace") == 1
    # Target alone: nothing to do.
    assert promql.coalesce("m", "pod", ["pod"]) == "m"
    # Target in the middle: lower-priority variants only fill it in when empty.
    middle = promql.coalesce("m", "pod", ["exported_pod", "pod", "k8s_pod"])
    assert '"gpuwatch_tmp", ";", "pod", "k8s_pod"' in middle
    assert middle.rstrip().endswith('"pod", "$1", "exported_pod", "(.+)"\n)')


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("thresholds:\n  idle_util_pct: 150\n", "thresholds.idle_util_pct"),
        ("thresholds:\n  memory_full_pct: 0\n", "thresholds.memory_full_pct"),
        ("prometheus:\n  labels:\n    pod: [exported_pod, pod-name]\n", "prometheus.labels.pod.1"),
        ("prometheus:\n  labels:\n    uuid: []\n", "prometheus.labels.uuid"),
        ("prometheus:\n  cluster_label: 'my cluster'\n", "prometheus.cluster_label"),
        ("prometheus:\n  matchers: ['job=dcgm']\n", "prometheus.matchers"),
        ("prometheus:\n  step: 5 minutes\n", "prometheus.step"),
        ("alerts:\n  idle_cost_usd_per_hour: -1\n", "alerts.idle_cost_usd_per_hour"),
        ("alerts:\n  name: Not_A_Name\n", "alerts.name"),
    ],
)
def test_bad_alert_configuration_is_refused(tmp_path: Path, text: str, key: str) -> None:
    path = tmp_path / "gpuwatch.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_settings(str(path), environ={})
    message = str(raised.value)
    assert message.startswith(f"{key} in config file {path}"), message
    assert "\n" not in message
