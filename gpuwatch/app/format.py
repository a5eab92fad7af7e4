"""Numbers as people read them: currency, percents, GPU-hours, instants. "—" for no value."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pandas as pd

DASH = "—"
#: Column names of the frames, as table headings (never show raw column names).
HEADINGS: dict[str, str] = {
    "cluster": "Cluster",
    "node": "Node",
    "team": "Team",
    "namespace": "Namespace",
    "workload_kind": "Kind",
    "workload": "Workload",
    "gpu_model": "GPU model",
    "gpu_models": "GPU models",
    "pod": "Pod",
    "kind": "Recommendation",
    "current": "Current",
    "suggested": "Suggested",
    "confidence": "Confidence",
    "effort": "Effort",
    "risk": "Risk",
    "evidence": "Evidence",
    "allocated_gpu_hours": "Allocated (GPU·h)",
    "used_gpu_hours": "Used (GPU·h)",
    "idle_gpu_hours": "Idle (GPU·h)",
    "efficiency_pct": "Efficiency (%)",
    "allocated_cost_usd": "Allocated cost ($)",
    "idle_cost_usd": "Idle cost ($)",
    "unused_cost_usd": "Unused cost ($)",
    "unallocated_gpu_hours": "Unallocated (GPU·h)",
    "unallocated_cost_usd": "Unallocated cost ($)",
    "allocation": "Allocation",
    "queue": "Queue",
    "stalled_gpu_hours": "Stalled (GPU·h)",
    "stalled_cost_usd": "Stalled cost ($)",
    "throttled_gpu_hours": "Throttled (GPU·h)",
    "failing_gpu_hours": "Failing (GPU·h)",
    "failing_cost_usd": "Failing cost ($)",
    "sm_active_pct": "SM active (%)",
    "tensor_active_pct": "Tensor active (%)",
    "est_monthly_savings_usd": "Savings ($/month)",
    "gpus_requested": "GPUs requested",
    "recommendation": "Recommendation",
    "week_start": "Week start",
    "cohort": "Cohort",
    "flavor": "Flavor",
    "nominal_gpus": "Nominal GPUs",
    "quota_gpu_hours": "Quota (GPU·h)",
    "busy_gpu_hours": "Busy (GPU·h)",
    "borrowed_gpu_hours": "Borrowed (GPU·h)",
    "lent_gpu_hours": "Lent (GPU·h)",
    "pending_gpu_hours": "Pending (GPU·h)",
    "idle_quota_gpu_hours": "Idle quota (GPU·h)",
    "idle_quota_usd": "Idle quota cost ($)",
    "gang_size": "Gang size",
    "free_gpu_hours": "Free (GPU·h)",
    "stranded_gpu_hours": "Stranded (GPU·h)",
    "stranded_cost_usd": "Stranded cost ($)",
    "largest_unplaceable_request": "Largest unplaceable request (GPUs)",
}


def _missing(value: object) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    try:
        return math.isnan(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def usd(value: object) -> str:
    """Dollars: whole dollars from $100 up, cents below."""
    if _missing(value):
        return DASH
    amount = float(value)  # type: ignore[arg-type]
    if abs(amount) >= 100:
        return f"-${abs(amount):,.0f}" if amount < 0 else f"${amount:,.0f}"
    return f"-${abs(amount):,.2f}" if amount < 0 else f"${amount:,.2f}"


def usd_month(value: object) -> str:
    return DASH if _missing(value) else f"{usd(value)}/month"


def pct(value: object, digits: int = 1) -> str:
    return DASH if _missing(value) else f"{float(value):.{digits}f}%"  # type: ignore[arg-type]


def ratio_pct(value: object, digits: int = 1) -> str:
    """A 0–1 ratio as a percent."""
    return DASH if _missing(value) else pct(100.0 * float(value), digits)  # type: ignore[arg-type]


def gpu_hours(value: object) -> str:
    return DASH if _missing(value) else f"{float(value):,.1f} GPU·h"  # type: ignore[arg-type]


def number(value: object, digits: int = 0) -> str:
    return DASH if _missing(value) else f"{float(value):,.{digits}f}"  # type: ignore[arg-type]


def with_unit(value: object, unit: str, digits: int = 0) -> str:
    return DASH if _missing(value) else f"{number(value, digits)} {unit}"


def when(ts: object) -> str:
    """An epoch-seconds instant in UTC, to the minute."""
    if _missing(ts):
        return DASH
    moment = datetime.fromtimestamp(int(float(ts)), tz=UTC)  # type: ignore[arg-type]
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def duration(seconds: object) -> str:
    """A length of time: ``2 d 4 h``, ``3 h 10 min``, ``15 min``."""
    if _missing(seconds):
        return DASH
    total = int(float(seconds)) // 60  # type: ignore[arg-type]
    days, rest = divmod(total, 1440)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"


def text(value: object) -> str:
    """Any value as plain text for a table cell."""
    return "" if _missing(value) or value is None else str(value)
