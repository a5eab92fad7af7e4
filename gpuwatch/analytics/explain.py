"""What explains a workload's suggestions where people decide on them (the Workload page).

Pure: stored detail and recommendation rows in, plain arrays and short text out.

- :func:`workload_distributions`: the utilization and memory distributions of a workload's
  samples over the window, merged from the pod-hour histograms of its pods
  (:mod:`gpuwatch.domain.sketch`), with the same nearest-rank quantiles the recommendations
  read (docs/recommendations.md#quantiles);
- :func:`projected_state`: one line per suggestion saying what the workload would look like
  after the change, built from the suggestion's evidence;
- :func:`projected_held` and :func:`autoscale_band`: the GPUs a ``reduce_replicas`` or
  ``reduce_gpu_count`` suggestion would leave held, per hour.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.analytics.recommend import quantile_key
from gpuwatch.domain import sketch
from gpuwatch.domain.mig import compute_slices
from gpuwatch.domain.series import Histograms, StoredDetail

MIB_PER_GIB = 1024.0


def merged_histogram(hist: Histograms, keep_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The histograms of the rows where ``keep_rows`` (a boolean per row) is true, merged
    into one: ``(bins, counts)``, bins ascending, one entry per bin with a count."""
    mask = np.asarray(keep_rows, dtype=bool)[hist.rows]
    bins, counts = hist.bins[mask], hist.counts[mask]
    _, merged_bins, merged_counts = sketch.histogram(np.zeros(len(bins)), bins, counts)
    keep = merged_counts > 0
    return merged_bins[keep], merged_counts[keep]


def bin_quantile(bins: np.ndarray, counts: np.ndarray, q: float) -> float:
    """Nearest-rank ``q`` quantile of one histogram's bins (NaN when it has no count)."""
    groups = np.zeros(len(bins), dtype=np.int64)
    return float(sketch.grouped_quantile(groups, bins, counts, 1, q)[0])


@dataclass(frozen=True)
class WorkloadDistributions:
    """Samples per value of a workload: utilization in percent (0.5-point bins) and framebuffer
    used in MiB (whole MiB), each ascending, with the recommendations' quantiles of them."""

    util_pct: np.ndarray
    util_samples: np.ndarray
    memory_mib: np.ndarray
    memory_samples: np.ndarray
    util_quantile_pct: float  # the policy's utilization quantile (p95), NaN without samples
    memory_quantile_mib: float  # the policy's memory quantile (p99), NaN without readings


#: The distributions of no sample.
NO_SAMPLES = WorkloadDistributions(
    np.zeros(0), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64), math.nan, math.nan
)


def workload_distributions(
    detail: StoredDetail, pod_ids: Sequence[int] | np.ndarray, util_q: float, memory_q: float
) -> WorkloadDistributions:
    """Merge the utilization and memory histograms of the pod-hour rows of ``pod_ids``."""
    pod_column = detail.pods["pod_id"].to_numpy(dtype=np.int64)
    keep = np.isin(pod_column, np.asarray(pod_ids, dtype=np.int64))
    util_bins, util_counts = merged_histogram(detail.pod_util, keep)
    fb_bins, fb_counts = merged_histogram(detail.pod_fb_used, keep)
    util_q_value = sketch.util_value(np.asarray(bin_quantile(util_bins, util_counts, util_q)))
    fb_q_value = sketch.fb_value(np.asarray(bin_quantile(fb_bins, fb_counts, memory_q)))
    return WorkloadDistributions(
        util_pct=100.0 * sketch.util_value(util_bins),
        util_samples=util_counts,
        memory_mib=sketch.fb_value(fb_bins),
        memory_samples=fb_counts,
        util_quantile_pct=100.0 * float(util_q_value),
        memory_quantile_mib=float(fb_q_value),
    )


@dataclass(frozen=True)
class EvidenceKeys:
    """The evidence keys that follow the quantiles of the policy (``p95_util_pct`` …)."""

    util: str
    memory: str
    busy: str

    @classmethod
    def of(cls, policy: AnalyticsPolicy) -> EvidenceKeys:
        return cls(
            util=f"{quantile_key(policy.util_quantile)}_util_pct",
            memory=f"{quantile_key(policy.memory_quantile)}_memory_mib",
            busy=f"busy_gpus_{quantile_key(policy.busy_quantile)}",
        )


def number(evidence: Mapping[str, Any], key: str) -> float:
    """An evidence value as a float, NaN where missing or not a number."""
    value = evidence.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    return float(value)


def _f(value: float, digits: int = 1) -> str:
    """A number in fixed point (never scientific), ``—`` when missing."""
    return "—" if math.isnan(value) else f"{value:,.{digits}f}"


def _gpus(n: float) -> str:
    """``1 GPU``, ``3 GPUs``."""
    return f"{_f(n, 0)} GPU" if n == 1 else f"{_f(n, 0)} GPUs"


def _gib(mib: float) -> str:
    return _f(mib / MIB_PER_GIB)


def _usd(value: float) -> str:
    return "—" if math.isnan(value) else f"${value:,.2f}/GPU·h"


def _reclaim(rec: Mapping[str, Any], e: Mapping[str, Any], k: EvidenceKeys) -> str:
    idle = 100 * number(e, "idle_fraction")
    return f"no GPU held: it was idle for {_f(idle)} % of its GPU-hours"


def _fewer_gpus(rec: Mapping[str, Any], e: Mapping[str, Any], k: EvidenceKeys) -> str:
    n, busy = number(e, "gpus_per_pod"), number(e, k.busy)
    kept = max(busy, 1.0)
    return (
        f"{_gpus(kept)} per pod instead of {_f(n, 0)}: at p95 of its sample times "
        f"{_f(busy, 0)} are busy, so {_gpus(n - kept)} per pod that sat idle are given back"
    )


def _fewer_replicas(rec: Mapping[str, Any], e: Mapping[str, Any], k: EvidenceKeys) -> str:
    need, total = number(e, "gpus_needed"), number(e, "util_sum_p95")
    each = 100 * total / need if need > 0 else math.nan
    text = (
        f"{_gpus(need)} instead of {_f(number(e, 'gpus_held_p95'), 0)}: "
        f"p95 Σ util {_f(total, 2)} ÷ {_f(need, 0)} ≈ {_f(each, 0)} % each"
    )
    low, high = number(e, "autoscale_min_replicas"), number(e, "autoscale_max_replicas")
    if not (math.isnan(low) or math.isnan(high)):
        text += f"; autoscaled {_f(low, 0)}–{_f(high, 0)} replicas"
    return text


def _mig(rec: Mapping[str, Any], e: Mapping[str, Any], k: EvidenceKeys) -> str:
    g, slices = number(e, "profile_slices"), compute_slices(_text(rec.get("gpu_model")))
    util = number(e, k.util)
    share = util / (g / slices) if g > 0 else math.nan
    return (
        f"p95 util {_f(util)} % of the GPU ÷ ({_f(g, 0)}/{slices}) ≈ {_f(share)} % of the slice; "
        f"p99 memory {_gib(number(e, k.memory))} of its {_gib(number(e, 'profile_memory_mib'))} GiB"
    )


def _share(rec: Mapping[str, Any], e: Mapping[str, Any], k: EvidenceKeys) -> str:
    r = number(e, "replicas")
    util, memory = number(e, k.util), number(e, k.memory)
    return (
        f"{_f(r, 0)} pods per GPU: at most {_f(r * util)} % busy and "
        f"{_gib(r * memory)} of {_gib(number(e, 'gpu_memory_mib'))} GiB used "
        f"({_f(r, 0)} × p95 util {_f(util)} %, × p99 memory {_gib(memory)} GiB) "
        "when all peak together"
    )


def _cheaper(rec: Mapping[str, Any], e: Mapping[str, Any], k: EvidenceKeys) -> str:
    prices = (
        f"{_usd(number(e, 'suggested_usd_per_gpu_hour'))} instead of "
        f"{_usd(number(e, 'current_usd_per_gpu_hour'))}"
    )
    projected = number(e, f"projected_{k.util}")
    if math.isnan(projected):
        return f"{prices}; p95 util {_f(number(e, k.util))} % on the current GPU"
    return f"p95 util ≈ {_f(projected)} % on {_text(rec.get('suggested'))}; {prices}"


def _spot(rec: Mapping[str, Any], e: Mapping[str, Any], k: EvidenceKeys) -> str:
    spot, on_demand = number(e, "spot_usd_per_gpu_hour"), number(e, "on_demand_usd_per_gpu_hour")
    return (
        f"the same GPUs at {_usd(spot)} on spot instead of {_usd(on_demand)}; pods may be preempted"
    )


def _memory(rec: Mapping[str, Any], e: Mapping[str, Any], k: EvidenceKeys) -> str:
    used, total = number(e, k.memory), number(e, "gpu_memory_mib")
    share = 100 * used / total if total > 0 else math.nan
    return (
        f"p99 memory {_gib(used)} of {_gib(total)} GiB ({_f(share)} %) today: "
        "more memory removes the out-of-memory risk"
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


_PROJECTIONS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any], EvidenceKeys], str]] = {
    "reclaim_idle": _reclaim,
    "reduce_gpu_count": _fewer_gpus,
    "reduce_replicas": _fewer_replicas,
    "use_mig": _mig,
    "share_gpu": _share,
    "cheaper_model": _cheaper,
    "use_spot": _spot,
    "memory_risk": _memory,
}


def projected_state(rec: Mapping[str, Any], keys: EvidenceKeys) -> str:
    """What the workload would look like after a suggestion (a recommendation row: ``kind``,
    ``evidence``, ``gpu_model``, ``suggested``); empty for a kind without a projection."""
    build = _PROJECTIONS.get(str(rec.get("kind")))
    evidence = rec.get("evidence")
    if build is None or not isinstance(evidence, Mapping):
        return ""
    return build(rec, evidence, keys)


#: Suggestions that change how many GPUs the workload holds over time.
HELD_KINDS = ("reduce_replicas", "reduce_gpu_count")


def projected_held(
    kind: str, evidence: Mapping[str, Any], held_gpus: np.ndarray, keys: EvidenceKeys
) -> np.ndarray:
    """GPUs held per hour after a :data:`HELD_KINDS` suggestion, from those held now.

    ``reduce_gpu_count``: each pod keeps ``k`` of its ``N`` GPUs, so held × k ÷ N;
    ``reduce_replicas``: ``need`` GPUs (``gpus_needed``), never more than held now.
    NaN for another kind or missing evidence.
    """
    held = np.asarray(held_gpus, dtype=np.float64)
    if kind == "reduce_gpu_count":
        n, k = number(evidence, "gpus_per_pod"), number(evidence, keys.busy)
        return held * max(k, 1.0) / n if n > 0 else np.full(len(held), np.nan)
    if kind == "reduce_replicas":
        return np.minimum(held, number(evidence, "gpus_needed"))
    return np.full(len(held), np.nan)


def autoscale_band(evidence: Mapping[str, Any]) -> tuple[float, float] | None:
    """GPUs held at the autoscaling range's ends (replicas × GPUs per pod), if it has one."""
    low, high = (
        number(evidence, "autoscale_min_replicas"),
        number(evidence, "autoscale_max_replicas"),
    )
    per_pod = number(evidence, "gpus_per_pod")
    if math.isnan(low) or math.isnan(high) or math.isnan(per_pod):
        return None
    return low * per_pod, high * per_pod
