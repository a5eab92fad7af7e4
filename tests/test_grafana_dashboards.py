"""Grafana dashboards: committed files, structure, and every query run on a real Prometheus.

The live tests scrape the simulated dcgm-exporter once a second with the rendered rules loaded
and evaluated once a second, so the recording rules exist as real series (Prometheus only
evaluates rules in real time); then every panel query runs through ``/api/v1/query`` and
``/api/v1/query_range`` with the template variables at their "All" value.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gpuwatch.alerts.grafana import (
    FLEET_FILE,
    HEALTH_FILE,
    VARIABLES,
    panel_queries,
    render_dashboards,
    variable_queries,
)
from gpuwatch.alerts.grafana_scheduling import TITLES as SCHEDULING_TITLES
from gpuwatch.alerts.params import RuleParams
from gpuwatch.alerts.recording import (
    FB_USED,
    NAMESPACE_IDLE_COST,
    NODE_UNALLOCATED,
    TEMPERATURE,
    UTIL,
    XID_CODE,
)
from gpuwatch.alerts.recording_health import (
    CLOCK_THROTTLE,
    ECC_DBE,
    ECC_SBE,
    NVLINK_ERRORS_RECORD,
    PCIE_REPLAYS_RECORD,
)
from gpuwatch.alerts.render import PLAIN_FILE, render_rules, rule_params_from_settings
from gpuwatch.cli.main import cli
from gpuwatch.config import Settings
from gpuwatch.simulate.fleet import build_fleet
from gpuwatch.simulate.serve import ExporterServer
from tests.support.prometheus import PrometheusProcess, wait_until

ROOT = Path(__file__).resolve().parents[1]
DASHBOARDS_DIR = ROOT / "dashboards"
COMPOSE_PROMETHEUS = ROOT / "deploy" / "compose" / "prometheus.yml"
REFRESH_HINT = (
    "the committed dashboards are out of date: run `gpuwatch dashboards render` to refresh them"
)
#: Panels that list problems: empty while there is none.
PROBLEM_LISTS = {
    "GPUs with an XID error",
    "Idle GPUs by pod now",
    "Hardware XID errors",
    "GPUs that fell off the bus",
    "Row-remap failures",
}
#: Panels of readings the exporter sends only where enabled (clock events, ECC, PCIe, NVLink,
#: row remapping): no data without them (tests/test_alerts_health_panels.py runs them on data).
OPTIONAL_READINGS = {
    "GPUs with a double-bit ECC error in the last hour",
    "GPUs with a row-remap failure",
    "Throttle reasons",
    "Throttled share of the last hour",
    "ECC errors in the last hour",
    "PCIe replays in the last hour",
    "NVLink errors in the last hour",
}
#: The Scheduling row reads kube-state-metrics and Kueue, which the simulated exporter is not.
MAY_BE_EMPTY = PROBLEM_LISTS | OPTIONAL_READINGS | set(SCHEDULING_TITLES)
_VARIABLE = re.compile(r"\$\{?([A-Za-z_]\w*)\}?")


def _default_files() -> dict[str, str]:
    return render_dashboards(rule_params_from_settings(Settings()))


def _committed(name: str) -> dict[str, Any]:
    return dict(json.loads((DASHBOARDS_DIR / name).read_text(encoding="utf-8")))


def _all(expr: str) -> str:
    """The query as Grafana sends it with every template variable at "All" (``.*``)."""
    return _VARIABLE.sub(lambda m: ".*" if m[1] in VARIABLES else m[0], expr)


def _queries(board: dict[str, Any]) -> dict[str, str]:
    """Panel title → its queries, one per line."""
    found: dict[str, list[str]] = {}
    for title, expr in panel_queries(board):
        found.setdefault(title, []).append(expr)
    return {title: "\n".join(exprs) for title, exprs in found.items()}


def _recorded_names() -> set[str]:
    groups = yaml.safe_load((ROOT / "alerts" / PLAIN_FILE).read_text())["groups"]
    return {rule["record"] for group in groups for rule in group["rules"] if "record" in rule}


@pytest.mark.parametrize("name", [FLEET_FILE, HEALTH_FILE])
def test_committed_dashboards_equal_the_default_render(name: str) -> None:
    committed = (DASHBOARDS_DIR / name).read_text(encoding="utf-8")
    assert committed == _default_files()[name], REFRESH_HINT


def _render_in_a_process(hash_seed: str) -> dict[str, str]:
    code = (
        "import json; from gpuwatch.alerts.grafana import render_dashboards; "
        "from gpuwatch.alerts.params import RuleParams; "
        "print(json.dumps(render_dashboards(RuleParams())))"
    )
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120, check=True)  # fmt: skip
    rendered: dict[str, str] = json.loads(done.stdout)
    return rendered


def test_render_is_deterministic() -> None:
    """The same files from processes whose set and dict orders differ (other hash seeds)."""
    first, second = _render_in_a_process("1"), _render_in_a_process("2")
    assert sorted(first) == [FLEET_FILE, HEALTH_FILE]
    assert first == second


@pytest.mark.parametrize("name", [FLEET_FILE, HEALTH_FILE])
def test_dashboard_has_datasource_and_template_variables(name: str) -> None:
    board = _committed(name)
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for var in ("cluster", "namespace"):
        assert variables[var]["type"] == "query"
        assert variables[var]["includeAll"] and variables[var]["allValue"] == ".*"
        assert variables[var]["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    assert board["uid"].startswith("gpuwatch-") and board["id"] is None
    panels = [p for p in board["panels"] if p["type"] != "row"]
    assert panels
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])


@pytest.mark.parametrize("name", [FLEET_FILE, HEALTH_FILE])
def test_panels_fit_the_grid_without_overlapping(name: str) -> None:
    panels = _committed(name)["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    taken: set[tuple[int, int]] = set()
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        cells = {
            (x, y)
            for x in range(pos["x"], pos["x"] + pos["w"])
            for y in range(pos["y"], pos["y"] + pos["h"])
        }
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells


@pytest.mark.parametrize("name", [FLEET_FILE, HEALTH_FILE])
def test_queries_use_only_defined_variables_and_recorded_series(name: str) -> None:
    board = _committed(name)
    defined = {v["name"] for v in board["templating"]["list"]} - {"datasource"}
    recorded = _recorded_names()
    for title, expr in panel_queries(board):
        used = set(_VARIABLE.findall(expr))
        assert used <= defined, f"{title}: undefined variables {used - defined}"
        names = set(re.findall(r"gpuwatch:[a-z0-9_]+:[a-z0-9_]+", expr))
        assert names, f"{title} reads no gpuwatch recording rule"
        assert names <= recorded, f"{title}: not recorded by the rules: {names - recorded}"


def test_the_dashboards_show_what_they_promise() -> None:
    fleet = _queries(_committed(FLEET_FILE))
    assert NAMESPACE_IDLE_COST in fleet["Idle cost by namespace ($/h)"]
    assert "by (namespace)" in fleet["Idle cost by namespace ($/h)"]
    assert UTIL in fleet["Fleet utilization vs allocation"]
    health = _committed(HEALTH_FILE)
    queries = _queries(health)
    assert TEMPERATURE in queries["Temperature"]
    assert "DCGM_FI_DEV_POWER_USAGE" in queries["Power draw"]
    assert FB_USED in queries["Framebuffer memory used"]
    assert XID_CODE in queries["Last XID code in the last hour"]
    units = {
        p["title"]: p["fieldConfig"]["defaults"]["unit"]
        for p in health["panels"]
        if p["type"] != "row"
    }
    assert units["Temperature"] == "celsius" and units["Power draw"] == "watt"
    assert CLOCK_THROTTLE in queries["Throttle reasons"]
    assert "floor(" in queries["Throttle reasons"] and " % " in queries["Throttle reasons"]
    assert ECC_SBE in queries["ECC errors in the last hour"]
    assert ECC_DBE in queries["ECC errors in the last hour"]
    assert PCIE_REPLAYS_RECORD in queries["PCIe replays in the last hour"]
    assert NVLINK_ERRORS_RECORD in queries["NVLink errors in the last hour"]
    assert 'xid=~"8|32|' in queries["Hardware XID errors"]
    assert "up == 1" in queries["GPUs that fell off the bus"]
    assert 'xid="79"' in queries["GPUs fallen off the bus"]
    assert units["Throttled share of the last hour"] == "percentunit"
    assert {v["name"] for v in health["templating"]["list"]} >= {"cluster", "namespace", "node"}


def test_configuration_reaches_the_dashboards() -> None:
    params = RuleParams(cluster_label="k8s_cluster", temperature_c=80, idle_util_pct=10)
    files = render_dashboards(params)
    fleet, health = json.loads(files[FLEET_FILE]), json.loads(files[HEALTH_FILE])
    assert variable_queries(fleet)["cluster"] == (UTIL, "k8s_cluster")
    queries = _queries(fleet)
    idle = queries["Idle cost by namespace ($/h)"]
    assert 'k8s_cluster=~"$cluster"' in idle and "by (k8s_cluster, namespace)" in idle
    assert "< 0.1)" in queries["Idle GPUs by pod now"]
    titles = [title for title, _ in panel_queries(health)]
    assert "GPUs at or above 80 °C" in titles
    assert ">= 80" in _queries(health)["GPUs at or above 80 °C"]


def test_dashboards_render_command_writes_the_configured_dashboards(tmp_path: Path) -> None:
    config = tmp_path / "gpuwatch.yaml"
    config.write_text("prometheus:\n  cluster_label: k8s_cluster\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["--config", str(config), "dashboards", "render", "--out-dir", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [FLEET_FILE, HEALTH_FILE]
    assert f"wrote {out / FLEET_FILE}" in result.output
    fleet = json.loads((out / FLEET_FILE).read_text())
    assert variable_queries(fleet)["cluster"] == (UTIL, "k8s_cluster")


# --- live: the rules evaluated by a real Prometheus on scraped data ---------------------------


@dataclass(frozen=True)
class LiveStack:
    prometheus: PrometheusProcess
    params: RuleParams
    clusters: tuple[str, ...]

    def query(self, expr: str) -> dict[str, Any]:
        return _api(self.prometheus.url, "query", {"query": expr})

    def query_range(self, expr: str, seconds: int) -> dict[str, Any]:
        now = int(time.time())
        args = {"query": expr, "start": str(now - seconds), "end": str(now), "step": "1"}
        return _api(self.prometheus.url, "query_range", args)


def _api(base: str, endpoint: str, args: dict[str, str]) -> dict[str, Any]:
    url = f"{base}/api/v1/{endpoint}?{urllib.parse.urlencode(args)}"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return dict(json.load(response))
    except urllib.error.HTTPError as exc:
        return dict(json.load(exc))


def _scrape_job(cluster: str, exporter: ExporterServer, labelled: bool) -> dict[str, Any]:
    """The compose file's exporter job, pointed at ``exporter``, optionally with a cluster."""
    compose = yaml.safe_load(COMPOSE_PROMETHEUS.read_text())
    job = dict(compose["scrape_configs"][0])
    job["job_name"] = f"{job['job_name']}-{cluster}"
    job["http_sd_configs"] = [{"url": f"{exporter.url}/targets", "refresh_interval": "1s"}]
    if labelled:
        job["relabel_configs"] = [{"target_label": "cluster", "replacement": cluster}]
    return job


def _announced_targets(exporters: list[ExporterServer]) -> int:
    """The scrape targets the exporters' HTTP service discovery lists (one per node)."""
    total = 0
    for exporter in exporters:
        with urllib.request.urlopen(f"{exporter.url}/targets", timeout=30) as response:
            total += sum(len(group["targets"]) for group in json.load(response))
    return total


def _targets_up(stack: LiveStack, expected: int) -> bool:
    """Every announced target discovered and scraped successfully at least once."""
    result = stack.query("count(up == 1)")["data"]["result"]
    return bool(result) and int(float(result[0]["value"][1])) == expected


def _evaluated_after(stack: LiveStack, instant: float) -> bool:
    """Every recorded series of the dashboards was last evaluated after ``instant``."""
    names = (UTIL, NAMESPACE_IDLE_COST, NODE_UNALLOCATED, TEMPERATURE, FB_USED)
    for name in names:
        result = stack.query(f"min(timestamp({name}))")["data"]["result"]
        if not result or float(result[0]["value"][1]) <= instant:
            return False
    return True


def _rules_ready(stack: LiveStack) -> bool:
    for name in (UTIL, NAMESPACE_IDLE_COST, NODE_UNALLOCATED, TEMPERATURE, FB_USED, XID_CODE):
        if not stack.query(name).get("data", {}).get("result"):
            return False
    cluster = stack.params.cluster_label
    if cluster:
        seen = stack.query(f"count by ({cluster}) ({NAMESPACE_IDLE_COST})")["data"]["result"]
        return len(seen) == len(stack.clusters)
    return True


#: The simulated fleet's time in the live tests, whatever the time of day the tests run at: a
#: Tuesday night, when many namespaces hold GPUs they do not use.
SIMULATED_START_TS = int(datetime(2026, 11, 10, 3, tzinfo=UTC).timestamp())


def _simulated_clock() -> Any:
    """Seconds on the simulated clock: SIMULATED_START_TS, then as fast as real time."""
    started = time.monotonic()
    return lambda: SIMULATED_START_TS + (time.monotonic() - started)


@pytest.fixture(scope="module", params=["single-cluster", "cluster-label"])
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveStack]:
    labelled = request.param == "cluster-label"
    params = RuleParams(cluster_label="cluster") if labelled else RuleParams()
    folder = tmp_path_factory.mktemp(f"live-{request.param}")
    rules = folder / "rules.yaml"
    rules.write_text(render_rules(params)[PLAIN_FILE])
    fleet = build_fleet(7)
    clusters = tuple(fleet.clusters)[: 2 if labelled else 1]
    clock = _simulated_clock()
    exporters = [ExporterServer(fleet, c, "127.0.0.1", 0, clock=clock).start() for c in clusters]
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": [
            _scrape_job(c, e, labelled) for c, e in zip(clusters, exporters, strict=True)
        ],
    }
    prometheus = PrometheusProcess(folder / "tsdb", yaml.safe_dump(config))
    try:
        stack = LiveStack(prometheus.start(), params, clusters)
        # Prometheus discovers and scrapes the node targets one by one, on a loaded machine
        # seconds apart: wait for every target, then for the rules' first evaluation after.
        expected = _announced_targets(exporters)
        wait_until(lambda: _targets_up(stack, expected), "every exporter target to be up", 90)
        scraped = float(stack.query("time()")["data"]["result"][0])
        wait_until(lambda: _rules_ready(stack), "the recording rules to have series", 90)
        wait_until(lambda: _evaluated_after(stack, scraped), "a rule evaluation after that", 90)
        yield stack
    finally:
        prometheus.stop()
        for exporter in exporters:
            exporter.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _live_boards(stack: LiveStack) -> dict[str, dict[str, Any]]:
    return {name: json.loads(text) for name, text in render_dashboards(stack.params).items()}


@pytest.mark.prometheus
def test_every_panel_query_evaluates_with_data(live: LiveStack) -> None:
    empty = []
    for name, board in _live_boards(live).items():
        for title, expr in panel_queries(board):
            answer = live.query(_all(expr))
            assert answer["status"] == "success", f"{name} / {title}: {answer.get('error')}"
            if not answer["data"]["result"] and title not in MAY_BE_EMPTY:
                empty.append(f"{name} / {title}")
            ranged = live.query_range(_all(expr), 20)
            assert ranged["status"] == "success", f"{name} / {title}: {ranged.get('error')}"
    assert not empty, f"panels without data: {empty}"


@pytest.mark.prometheus
def test_every_variable_query_finds_values(live: LiveStack) -> None:
    for name, board in _live_boards(live).items():
        for variable, (selector, label) in variable_queries(board).items():
            answer = live.query(f"count by ({label}) ({_all(selector)})")
            assert answer["status"] == "success", f"{name} / ${variable}: {answer.get('error')}"
            values = {r["metric"].get(label, "") for r in answer["data"]["result"]}
            if variable == "cluster":
                expected = set(live.clusters) if live.params.cluster_label else {""}
                assert values == expected, f"{name} / $cluster: {values}"
            else:
                assert values - {""}, f"{name} / ${variable} finds no value"


@pytest.mark.prometheus
def test_cost_panels_split_by_namespace_and_cluster(live: LiveStack) -> None:
    fleet = _live_boards(live)[FLEET_FILE]
    idle = _queries(fleet)["Idle cost by namespace ($/h)"]
    rows = live.query(_all(idle))["data"]["result"]
    namespaces = {r["metric"]["namespace"] for r in rows}
    assert len(namespaces) > 3
    assert all(float(r["value"][1]) >= 0 for r in rows)
    if live.params.cluster_label:
        assert {r["metric"]["cluster"] for r in rows} == set(live.clusters)
        one = _VARIABLE.sub(lambda m: live.clusters[0] if m[1] == "cluster" else ".*", idle)
        only = live.query(one)["data"]["result"]
        assert only and {r["metric"]["cluster"] for r in only} == {live.clusters[0]}
