"""The cause rule on readings taken from a real GPU (NVIDIA H200, driver 580.159.04) under known
workloads, through NVML's GPM counters (the counters DCGM's profiling fields come from on Hopper).

``tests/fixtures/gpu/h200_nvml_workload_readings.json``: each phase ran 4 s; percentages are
GPM's ``graphics_util`` (engine active), ``sm_util``, ``any_tensor_util`` and ``dram_bw_util``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwatch.analytics.efficiency import efficiency_cause
from gpuwatch.domain.health import decode_clock_events, has_tensor_cores, throttle_reasons

READINGS = Path(__file__).parent / "fixtures" / "gpu" / "h200_nvml_workload_readings.json"


def _phases() -> dict[str, dict[str, object]]:
    data = json.loads(READINGS.read_text())
    return {phase["phase"]: phase for phase in data["phases"]}


def _cause(phase: dict[str, object]) -> str | None:
    gpm = phase["gpm_pct"]
    assert isinstance(gpm, dict)
    return efficiency_cause(
        gpm["graphics_util"], gpm["sm_util"], gpm["any_tensor_util"], gpm["dram_bw_util"], 0.0,
        bool(has_tensor_cores("NVIDIA H200")),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("phase", "cause"),
    [
        ("idle", None),  # engine 0.05 %: not busy
        ("fp32_no_tf32_matmul", "no tensor cores used"),  # engine 97 %, SM 94 %, tensor 0 %
        ("bf16_matmul", None),  # engine 98 %, SM 94 %, tensor 92 %: efficient
        ("tiny_kernels", None),  # engine 26 %: not busy, whatever its SMs do (0.04 %)
        ("memory_copy", "memory-bound"),  # engine 98 %, SM 97 %, tensor 0 %, DRAM 87 %
    ],
)
def test_cause_of_each_real_workload(phase: str, cause: str | None) -> None:
    assert _cause(_phases()[phase]) == cause


def test_real_clock_event_readings_decode() -> None:
    """The GPU hit its power cap (0x4) during the bf16 products: a throttle reason; the idle
    bit nvidia-smi showed before the run (0x1) is not."""
    masks = {int(m, 16) for m in _phases()["bf16_matmul"]["clock_event_masks"]}  # type: ignore[union-attr]
    assert masks == {0x0, 0x4}
    assert throttle_reasons(0x4) == ["power_throttle"]
    assert decode_clock_events(0x1) == ["gpu_idle"] and throttle_reasons(0x1) == []
