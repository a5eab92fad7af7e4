"""GPU health in words: reasons (``xid:79`` → its catalogue meaning), states, GPU names, and
what the exporter did not send."""

from __future__ import annotations

from collections.abc import Iterable

from gpuwatch.app.views_gpu import unit_label
from gpuwatch.app.views_health import Readings
from gpuwatch.domain.health import XID_CATALOGUE

#: The states as the page names them.
STATE_WORDS: dict[str, str] = {
    "failing": "failing",
    "app_error": "application error",
    "degraded": "degraded",
    "healthy": "healthy",
}
#: Each fixed reason string of the health analytics, in words.
REASON_WORDS: dict[str, str] = {
    "ecc_dbe": "double-bit (uncorrectable) ECC error",
    "row_remap_failure": "row-remap failure",
    "thermal_throttle": "thermal throttling",
    "power_throttle": "power-cap throttling",
    "hw_slowdown": "hardware slowdown",
    "ecc_sbe_burst": "burst of single-bit ECC errors",
    "nvlink_errors": "NVLink errors",
    "pcie_replay": "PCIe replays",
}


def reason_text(reason: str) -> str:
    """One reason in words: an XID with its meaning from NVIDIA's catalogue."""
    code = reason.removeprefix("xid:")
    if code == reason:
        return REASON_WORDS.get(reason, reason)
    entry = XID_CATALOGUE.get(int(code)) if code.isdigit() else None
    if entry is None:
        return f"XID {code} (not in the catalogue)"
    return f"XID {entry.code}: {entry.meaning}"


def reasons_text(reasons: Iterable[str] | str) -> str:
    """Reasons (a list, or the timeline's comma-joined text) in words, ``; ``-joined."""
    items = reasons.split(",") if isinstance(reasons, str) else list(reasons)
    return "; ".join(reason_text(r) for r in items if r)


def gpu_text(node: object, uuid: object) -> str:
    """A physical GPU as the other pages name it: node and the start of its UUID."""
    return f"{node} · {unit_label(uuid, None, 0, 1)}"


def missing_readings(readings: Readings) -> list[str]:
    """A sentence per kind of reading the rows in scope lack (none when they have them all)."""
    if not readings.rows:
        return [
            "No GPU in scope has a health or efficiency reading in this window: the exporter "
            "sends no clock events, no ECC, PCIe, NVLink or row-remap counters, no XID and no "
            "profiling fields, so no state is shown (unknown, not healthy)."
        ]
    out = []
    if not readings.clock_events:
        out.append(
            "No clock events (DCGM_FI_DEV_CLOCKS_EVENT_REASONS, or the older "
            "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS): throttling is unknown, not zero."
        )
    if not readings.error_counts:
        out.append(
            "No ECC, PCIe replay, NVLink or row-remap count in the window: these counters are "
            "stored only when they rise, so this cannot tell GPUs without errors from an "
            "exporter that does not send the counters."
        )
    if not readings.profiling:
        out.append(
            "No profiling fields (DCGM_FI_PROF_SM_ACTIVE, DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, "
            "DCGM_FI_PROF_DRAM_ACTIVE): SM, tensor and DRAM activity are unavailable."
        )
    return out
