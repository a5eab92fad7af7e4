"""A recommendation's evidence as people read it: named values with units, in fixed point.

Keys are those of docs/recommendations.md#evidence; the quantile keys follow the policy
(``p95_util_pct``, ``p99_memory_mib``, ``busy_gpus_p95``), so they are recognised by shape.
Memory is shown in GiB (1 GiB = 1024 MiB). Numbers are never written in scientific notation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

from gpuwatch.analytics.explain import MIB_PER_GIB, EvidenceKeys
from gpuwatch.app import format as fmt

#: Key → (label, unit kind) for the keys whose names are fixed.
NAMED: dict[str, tuple[str, str]] = {
    "hours_observed": ("hours observed", "hours"),
    "gpu_hours_observed": ("GPU-hours observed", "gpu_hours"),
    "idle_gpu_hours": ("idle GPU-hours", "gpu_hours"),
    "gpu_memory_mib": ("GPU memory", "gib"),
    "gpus_per_pod": ("GPUs per pod", "count"),
    "gpus_requested": ("most GPUs held at once", "count"),
    "pods": ("pods", "count"),
    "cost_usd": ("cost in the window", "usd"),
    "data_hours": ("hours of data", "hours"),
    "attribution": ("attribution", "text"),
    "idle_fraction": ("idle share", "ratio"),
    "profile_memory_mib": ("profile memory", "gib"),
    "profile_slices": ("profile compute slices", "count"),
    "replicas": ("pods per GPU", "count"),
    "gpus_held_p95": ("GPUs held p95", "count"),
    "util_sum_p95": ("Σ util p95", "gpus"),
    "replica_target_util": ("target utilization", "ratio"),
    "gpus_needed": ("GPUs needed", "count"),
    "hourly_util_sum_p05": ("hourly Σ util p5", "gpus"),
    "hourly_util_sum_p95": ("hourly Σ util p95", "gpus"),
    "hourly_util_sum_p99": ("hourly Σ util p99", "gpus"),
    "autoscale_min_replicas": ("autoscaling min replicas", "count"),
    "autoscale_max_replicas": ("autoscaling max replicas", "count"),
    "current_usd_per_gpu_hour": ("current price", "usd_rate"),
    "suggested_usd_per_gpu_hour": ("suggested price", "usd_rate"),
    "on_demand_usd_per_gpu_hour": ("on-demand price", "usd_rate"),
    "spot_usd_per_gpu_hour": ("spot price", "usd_rate"),
}


def describe(key: str) -> tuple[str, str]:
    """The label and unit kind of an evidence key."""
    if key in NAMED:
        return NAMED[key]
    if key.endswith("_util_pct"):
        return key.removesuffix("_util_pct").replace("_", " ") + " util", "pct"
    if key.endswith("_memory_mib"):
        return key.removesuffix("_memory_mib").replace("_", " ") + " memory", "gib"
    if key.startswith("busy_gpus_"):
        return "busy GPUs " + key.removeprefix("busy_gpus_"), "count"
    return key.replace("_", " "), "number"


def fixed(value: float, digits: int) -> str:
    """``value`` with at most ``digits`` decimals, trailing zeros dropped: ``5.02``, ``168``."""
    text = f"{value:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def value_text(key: str, value: object) -> str:
    """One evidence value with its unit: ``93.5 %``, ``72.6 GiB``, ``$12.29/GPU·h``, ``157 h``."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return fmt.DASH
    number = float(value)
    if math.isnan(number):
        return fmt.DASH
    return _TEXTS.get(describe(key)[1], _plain)(number)


def _plain(value: float) -> str:
    return fixed(value, 4)


_TEXTS: dict[str, Callable[[float], str]] = {
    "pct": lambda v: f"{fixed(v, 1)} %",
    "ratio": lambda v: f"{fixed(100 * v, 1)} %",
    "gib": lambda v: f"{fixed(v / MIB_PER_GIB, 1)} GiB",
    "hours": lambda v: f"{fixed(v, 1)} h",
    "gpu_hours": lambda v: f"{fixed(v, 1)} GPU·h",
    "usd": fmt.usd,
    "usd_rate": lambda v: f"${v:,.2f}/GPU·h",
    "count": lambda v: fixed(v, 0),
    "gpus": lambda v: f"{fixed(v, 2)} GPUs",
}


def evidence_columns(keys: EvidenceKeys) -> tuple[str, ...]:
    """The evidence every recommendation table shows as columns of their own (p95 util, p99
    memory, busy GPUs, hours observed, keys as the policy names them); the rest goes in one
    cell."""
    return (keys.util, keys.memory, keys.busy, "hours_observed")


def column_heading(key: str) -> str:
    """A table heading for a key: ``p95 util (%)``, ``p99 memory (GiB)``, ``hours observed``."""
    label, unit = describe(key)
    units = {"pct": "%", "ratio": "%", "gib": "GiB", "hours": "h", "gpu_hours": "GPU·h"}
    return f"{label} ({units[unit]})" if unit in units else label


def column_value(key: str, evidence: object) -> str:
    """The value of ``key`` in ``evidence`` for a column whose heading names the unit."""
    if not isinstance(evidence, Mapping):
        return fmt.DASH
    text = value_text(key, evidence.get(key))
    unit = {"pct": " %", "ratio": " %", "gib": " GiB", "hours": " h", "gpu_hours": " GPU·h"}
    return text.removesuffix(unit.get(describe(key)[1], "\0"))


#: Per unit kind: the factor from the stored value to the number a column shows, and its digits.
_COLUMN_SCALE: dict[str, tuple[float, int]] = {
    "pct": (1.0, 1),
    "ratio": (100.0, 1),
    "gib": (1.0 / MIB_PER_GIB, 1),
    "hours": (1.0, 1),
    "gpu_hours": (1.0, 1),
}


def column_digits(key: str) -> int:
    """Decimals of ``key``'s column (counts: none)."""
    return _COLUMN_SCALE.get(describe(key)[1], (1.0, 0))[1]


def column_number(key: str, evidence: object) -> float | None:
    """The value of ``key`` as a number in its column's unit (GiB, %, h), rounded as shown;
    None where the evidence has no such number."""
    value = evidence.get(key) if isinstance(evidence, Mapping) else None
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if math.isnan(float(value)):
        return None
    scale, digits = _COLUMN_SCALE.get(describe(key)[1], (1.0, 0))
    return round(float(value) * scale, digits)


def rest_text(evidence: object, shown: Iterable[str]) -> str:
    """The evidence not shown in columns, as ``label value; …``."""
    if not isinstance(evidence, Mapping):
        return fmt.text(evidence)
    skip = set(shown)
    parts = [
        f"{describe(str(k))[0]} {value_text(str(k), v)}"
        for k, v in evidence.items()
        if str(k) not in skip
    ]
    return "; ".join(parts)
