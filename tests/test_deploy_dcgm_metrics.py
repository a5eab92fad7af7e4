"""deploy/dcgm-exporter: the dcgm-exporter counters CSV enables every field gpuwatch reads."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuwatch.collectors.promql import FIELDS
from gpuwatch.simulate.exposition import metrics_text
from gpuwatch.simulate.fleet import build_fleet

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "deploy" / "dcgm-exporter"
CSV = FOLDER / "dcgm-metrics.csv"
#: Older names gpuwatch also reads, which a file for a 4.x exporter does not list (the newest
#: name replaces them).
RENAMED = {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"}
#: dcgm-exporter's own default set (etc/default-counters.csv of release 4.5.3-4.8.2, lines not
#: commented out).
EXPORTER_DEFAULTS = {
    "DCGM_FI_DEV_SM_CLOCK": "gauge",
    "DCGM_FI_DEV_MEM_CLOCK": "gauge",
    "DCGM_FI_DEV_MEMORY_TEMP": "gauge",
    "DCGM_FI_DEV_GPU_TEMP": "gauge",
    "DCGM_FI_DEV_POWER_USAGE": "gauge",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "counter",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "counter",
    "DCGM_FI_DEV_GPU_UTIL": "gauge",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "gauge",
    "DCGM_FI_DEV_ENC_UTIL": "gauge",
    "DCGM_FI_DEV_DEC_UTIL": "gauge",
    "DCGM_FI_DEV_XID_ERRORS": "gauge",
    "DCGM_FI_DEV_FB_FREE": "gauge",
    "DCGM_FI_DEV_FB_USED": "gauge",
    "DCGM_FI_DEV_FB_RESERVED": "gauge",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "counter",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": "gauge",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "counter",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": "counter",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "gauge",
    "DCGM_FI_DRIVER_VERSION": "label",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gauge",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "gauge",
    "DCGM_FI_PROF_DRAM_ACTIVE": "gauge",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "gauge",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "gauge",
}


def read_counters(text: str) -> dict[str, str]:
    """Field → Prometheus type, read as dcgm-exporter reads its CSV: lines starting with ``#``
    and blank lines skipped, exactly three comma-separated fields, spaces trimmed."""
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = [part.strip() for part in line.split(",")]
        assert len(parts) == 3, f"line {number}: {line!r} is not three fields"
        name, kind, help_text = parts
        assert name.startswith("DCGM_FI_") and name not in found, f"line {number}: {name}"
        assert kind in ("gauge", "counter", "label"), f"line {number}: {kind}"
        assert help_text, f"line {number}: no help text"
        found[name] = kind
    return found


@pytest.fixture(scope="module")
def counters() -> dict[str, str]:
    text = CSV.read_text(encoding="utf-8")
    assert text.startswith("# Format\n")
    return read_counters(text)


def test_every_field_of_the_catalogue_is_enabled(counters: dict[str, str]) -> None:
    for query in FIELDS:
        expected = "counter" if query.counter else "gauge"
        for metric in query.metrics:
            if metric in RENAMED:
                assert metric not in counters and RENAMED[metric] in counters
                continue
            assert counters.get(metric) == expected, f"{query.field}: {metric}"


def test_the_exporter_defaults_stay_enabled(counters: dict[str, str]) -> None:
    assert {k: counters.get(k) for k in EXPORTER_DEFAULTS} == EXPORTER_DEFAULTS


def test_the_fields_of_health_and_efficiency_are_enabled(counters: dict[str, str]) -> None:
    wanted = {
        "DCGM_FI_PROF_SM_ACTIVE": "gauge",
        "DCGM_FI_PROF_SM_OCCUPANCY": "gauge",
        "DCGM_FI_PROF_NVLINK_TX_BYTES": "gauge",
        "DCGM_FI_PROF_NVLINK_RX_BYTES": "gauge",
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "gauge",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "counter",
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": "counter",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "counter",
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": "counter",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": "counter",
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": "counter",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": "counter",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": "counter",
    }
    assert {k: counters.get(k) for k in wanted} == wanted
    assert len(counters) == len(EXPORTER_DEFAULTS) + len(wanted)


def test_the_simulated_exporter_serves_only_enabled_fields(counters: dict[str, str]) -> None:
    fleet = build_fleet(7)
    ts = 1794838200  # 2026-11-16 14:10 UTC
    served = set()
    for cluster in fleet.clusters:
        for line in metrics_text(fleet, ts, cluster).splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(" ")
                served.add(name)
                assert counters.get(RENAMED.get(name, name)) == kind, name
    assert "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS" in served  # one node uses the older name
    assert len(served) == 31  # 11 families before health and efficiency, 20 since


def test_kustomize_builds_the_configmap_from_the_file() -> None:
    (config,) = _built()
    assert config["kind"] == "ConfigMap"
    assert config["metadata"]["name"] == "gpuwatch-dcgm-metrics"
    assert config["metadata"]["namespace"] == "gpu-operator"
    assert config["data"] == {"dcgm-metrics.csv": CSV.read_text(encoding="utf-8")}


def _built() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        if os.environ.get("CI"):
            pytest.fail("kubectl not installed: `make system-deps` installs kubernetes-client")
        pytest.skip("kubectl not installed (kustomize build not checked)")
    command = [kubectl, "kustomize", str(FOLDER)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]
