"""The GPU-health dashboard's health panels, evaluated by promtool on a scenario with data.

The live dashboard tests scrape the simulated exporter, which may not send the optional health
fields; here every health panel query of the committed dashboard (template variables at "All")
runs over the committed rules on input series that have them, with the values written by hand.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuwatch.alerts.definitions import alert_table
from gpuwatch.alerts.grafana import HEALTH_FILE, VARIABLES, panel_queries
from gpuwatch.alerts.grafana_health import health_rows
from gpuwatch.alerts.grafana_panels import Scope
from gpuwatch.alerts.params import RuleParams
from gpuwatch.alerts.render import PLAIN_FILE
from tests.support.binaries import require_binary

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).resolve().parents[1]
_VARIABLE = re.compile(r"\$\{?([A-Za-z_]\w*)\}?")
SEEN = 'job="dcgm-exporter", instance="10.0.1.5:9400", modelName="NVIDIA A100-SXM4-80GB"'
A = f'{SEEN}, UUID="GPU-A", Hostname="n1", namespace="ml", pod="p0"'
B = f'{SEEN}, UUID="GPU-B", Hostname="n1"'
C = f'{SEEN}, UUID="GPU-C", Hostname="n1", namespace="ml", pod="p1"'
#: A: held by ml/p0, thermal (0x40), SBE 1 and PCIe replays 2 a minute, a DBE at 10m and 3
#: NVLink errors at 10m. B: unheld, power cap and idle (0x5), row-remap failure, XID 79 at 10m,
#: stops reporting at 20m. C: held by ml/p1, HW slowdown and SW thermal (0x28).
SERIES = [
    ("up", 'job="dcgm-exporter", instance="10.0.1.5:9400"', "1x40"),
    ("DCGM_FI_DEV_GPU_UTIL", A, "90x40"),
    ("DCGM_FI_DEV_GPU_UTIL", B, "50x19 stale"),
    ("DCGM_FI_DEV_GPU_UTIL", C, "60x40"),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", A, "64x40"),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", B, "5x40"),
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", C, "40x40"),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", A, "0+1x40"),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", A, "0x9 1x30"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", A, "0+2x40"),
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", A, "0x9 3x30"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", B, "1x40"),
    ("DCGM_FI_DEV_XID_ERRORS", B, "0x9 79x30"),
]
#: (panel title, query number, wrapping, value at 30m); "" wraps nothing.
EXPECTED = [
    ("GPUs with a hardware XID in the last hour", 0, "", 1),
    ("GPUs fallen off the bus", 0, "", 1),
    ("GPUs with a double-bit ECC error in the last hour", 0, "", 1),
    ("GPUs with a row-remap failure", 0, "", 1),
    ("Pods holding a failing GPU", 0, "", 1),
    ("Throttle reasons", 0, "", 2),  # thermal: A and C
    ("Throttle reasons", 1, "", 1),  # power cap: B
    ("Throttle reasons", 2, "", 1),  # HW slowdown: C
    ("Throttled share of the last hour", 0, "sum", 3),
    ("ECC errors in the last hour", 0, "sum", 30),
    ("ECC errors in the last hour", 1, "sum", 1),
    ("Row-remap failures", 0, "count", 1),
    ("PCIe replays in the last hour", 0, "sum", 60),
    ("NVLink errors in the last hour", 0, "sum", 3),
    ("Hardware XID errors", 0, "count", 1),
    ("GPUs that fell off the bus", 0, "count", 1),
]
#: Without the optional fields (utilization only): counts of those readings are no data.
WITHOUT_FIELDS = [
    ("GPUs with a hardware XID in the last hour", 0),
    ("GPUs fallen off the bus", 0),
    ("Pods holding a failing GPU", 0),
    ("GPUs with a double-bit ECC error in the last hour", None),
    ("Throttle reasons", None),
]


def _health_queries() -> dict[str, list[str]]:
    board = json.loads((ROOT / "dashboards" / HEALTH_FILE).read_text(encoding="utf-8"))
    found: dict[str, list[str]] = {}
    for title, expr in panel_queries(board):
        every = _VARIABLE.sub(lambda m: ".*" if m[1] in VARIABLES else m[0], expr)
        found.setdefault(title, []).append(every)
    return found


def _check(expr: str, value: float | None, at: str = "30m") -> dict[str, Any]:
    samples = [] if value is None else [{"labels": "{}", "value": value}]
    return {"expr": expr, "eval_time": at, "exp_samples": samples}


def _unit_test() -> dict[str, Any]:
    queries = _health_queries()
    checks = []
    for title, number, wrap, value in EXPECTED:
        expr = queries[title][number]
        checks.append(_check(f"{wrap}({expr})" if wrap else expr, value))
    with_data = {
        "interval": "1m",
        "input_series": [{"series": f"{m}{{{labels}}}", "values": v} for m, labels, v in SERIES],
        "promql_expr_test": checks,
    }
    only_util = {
        "interval": "1m",
        "input_series": [{"series": f"DCGM_FI_DEV_GPU_UTIL{{{A}}}", "values": "90x40"}],
        "promql_expr_test": [_check(queries[t][0], v) for t, v in WITHOUT_FIELDS],
    }
    tests = [with_data, only_util]
    return {"rule_files": [PLAIN_FILE], "evaluation_interval": "1m", "tests": tests}


def test_every_health_panel_query_is_checked() -> None:
    params = RuleParams()
    rows = health_rows(Scope(params), alert_table(params))
    panels = {(p.title, n) for row in rows for p in row.panels for n in range(len(p.queries))}
    assert panels == {(title, number) for title, number, *_ in EXPECTED}


def test_health_panels_show_the_scenario(tmp_path: Path) -> None:
    promtool = require_binary("promtool", "prometheus")
    (tmp_path / PLAIN_FILE).write_bytes((ROOT / "alerts" / PLAIN_FILE).read_bytes())
    unit_test = tmp_path / "panels_test.yaml"
    unit_test.write_text(yaml.safe_dump(_unit_test(), sort_keys=False), encoding="utf-8")
    done = subprocess.run(
        [promtool, "test", "rules", str(unit_test)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
