"""The right-sizing rules (contract section 5, docs/recommendations.md#the-kinds).

Each rule takes a workload's measures (:class:`WorkloadMeasures`, a row of
:func:`gpuwatch.analytics.workloads.workload_stats`) and the settings, and returns what it would
change and the fraction of the workload's cost that saves, or None. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuwatch.analytics.efficiency import EfficiencyMeasures
from gpuwatch.analytics.placement import PlacementMeasures
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.domain.allocation import DRA
from gpuwatch.domain.mig import (
    MigProfile,
    compute_slices,
    generic_profiles,
    mig_profiles,
    smallest_fitting_profile,
)
from gpuwatch.domain.pricing import ON_DEMAND, SPOT, ModelPrice, PriceBook

BATCH_KINDS = frozenset({"Job", "CronJob"})
KINDS = (
    "reclaim_idle",
    "reduce_gpu_count",
    "reduce_replicas",
    "use_mig",
    "share_gpu",
    "cheaper_model",
    "use_spot",
    "memory_risk",
    "investigate_efficiency",
    "consolidate_placement",
)


@dataclass(frozen=True)
class Finding:
    """One triggered rule: what to change and the fraction of the workload's cost it saves."""

    kind: str
    current: str
    suggested: str
    fraction_saved: float
    evidence: dict[str, Any]
    #: Dollars of the window a finding without a saving puts at stake (its evidence states
    #: them, and per month).
    at_stake_usd: float = 0.0


@dataclass(frozen=True)
class WorkloadMeasures:
    """One workload's measures over the window: a row of :func:`workload_stats`."""

    cluster: str
    namespace: str
    workload_kind: str
    workload: str
    gpu_model: Any
    allocated_gpu_hours: float
    idle_gpu_hours: float
    allocated_cost_usd: float
    observed_hours: float
    p_util: float
    p_memory_mib: float
    pod_gpus: float
    one_gpu_pods: bool
    busy_k: float
    gpus_requested: float
    pods: int
    held_p95: float
    util_sum_p95: float
    hourly_util_sum_p05: float
    hourly_util_sum_p95: float
    hourly_util_sum_p99: float
    gpu_memory_mib: float
    whole_gpus: bool
    node_attribution: bool
    spot: bool
    team: Any
    nodes: tuple[str, ...]
    mig_profile: Any
    #: How its GPUs were held, modes ``+``-joined (``dra``: through ResourceClaims).
    allocation: str = ""
    #: Its real efficiency (:func:`gpuwatch.analytics.efficiency.workload_efficiency`), None
    #: without health readings.
    efficiency: EfficiencyMeasures | None = None
    #: Its spread over nodes (:func:`gpuwatch.analytics.placement.workload_placement`).
    placement: PlacementMeasures | None = None

    @property
    def claims(self) -> bool:
        """Whether the workload holds its GPUs through ResourceClaims (DRA)."""
        return DRA in self.allocation.split("+")


@dataclass(frozen=True)
class Context:
    """What rules know besides a workload's measures."""

    policy: AnalyticsPolicy
    price_book: PriceBook
    mig_nodes: frozenset[tuple[str, str]]
    resources: dict[tuple[str, str, str, str], str]
    #: (cluster, node) → the node's cloud provider, where the node says.
    node_providers: Mapping[tuple[str, str], str] = field(default_factory=dict)


Rule = Callable[[WorkloadMeasures, Context], Finding | None]


def _resource(w: WorkloadMeasures, ctx: Context) -> str:
    found = ctx.resources.get((w.cluster, w.namespace, w.workload_kind, w.workload))
    if found:
        return found
    if isinstance(w.mig_profile, str):
        return f"nvidia.com/mig-{w.mig_profile}"
    return "nvidia.com/gpu"


#: How a DRA workload's resource reads: its DeviceClass, then this.
CLAIM_SUFFIX = " (ResourceClaim)"
#: NVIDIA's DRA driver: its MIG DeviceClass and the attribute domain of its devices.
DRA_MIG_CLASS = "mig.nvidia.com"
DRA_DOMAIN = "gpu.nvidia.com"


def _claim(device_class: str, selector: str) -> str:
    return f"ResourceClaim request: deviceClassName {device_class}, selector {selector}"


def _count(n: float, resource: str) -> str:
    return f"{int(n)} × {resource}"


def _memory_need(w: WorkloadMeasures, ctx: Context) -> float:
    return float(w.p_memory_mib) * ctx.policy.memory_headroom


def reclaim_idle(w: WorkloadMeasures, ctx: Context) -> Finding | None:
    idle_fraction = w.idle_gpu_hours / w.allocated_gpu_hours
    if idle_fraction < ctx.policy.reclaim_idle_fraction:
        return None
    if w.observed_hours < ctx.policy.reclaim_min_observed_hours:
        return None
    resource = _resource(w, ctx)
    evidence = {"idle_fraction": idle_fraction}
    return Finding("reclaim_idle", _count(w.pod_gpus, resource), _count(0, resource), 1.0, evidence)


def reduce_gpu_count(w: WorkloadMeasures, ctx: Context) -> Finding | None:
    n = int(w.pod_gpus)
    k = max(int(w.busy_k), 1)
    if n <= 1 or k >= n:
        return None
    resource = _resource(w, ctx)
    return Finding("reduce_gpu_count", _count(n, resource), _count(k, resource), (n - k) / n, {})


def _ceil(value: float) -> int:
    """⌈value⌉, ignoring float noise just above a whole number."""
    return math.ceil(value - 1e-9)


def _autoscaling(w: WorkloadMeasures, ctx: Context) -> tuple[int, int] | None:
    """(min, max) replicas when the hourly summed utilization swings, else None."""
    low, high, top = w.hourly_util_sum_p05, w.hourly_util_sum_p95, w.hourly_util_sum_p99
    if math.isnan(low) or math.isnan(high) or high <= 0:
        return None
    if high < ctx.policy.replica_swing_ratio * low:
        return None
    target = ctx.policy.replica_target_util
    return max(_ceil(low / target), 1), max(_ceil(top / target), 1)


def _replicas(n: int) -> str:
    return f"{n} replica" if n == 1 else f"{n} replicas"


def reduce_replicas(w: WorkloadMeasures, ctx: Context) -> Finding | None:
    """Fewer replicas: the GPUs held at p95 of sample times exceed what the summed use needs.

    Counted in whole replicas of ``pod_gpus`` GPUs each (for one-GPU pods, GPUs): R replicas
    held at p95, ⌈need ÷ GPUs per replica⌉ needed; fires when that is at most R − 1.
    """
    if w.pods < 2 or math.isnan(w.held_p95) or math.isnan(w.util_sum_p95):
        return None
    per_pod = max(int(w.pod_gpus), 1)
    if w.gpus_requested < 2 * per_pod:  # never two pods at once
        return None
    need_gpus = max(_ceil(w.util_sum_p95 / ctx.policy.replica_target_util), 1)
    held, need = int(w.held_p95) // per_pod, _ceil(need_gpus / per_pod)
    if held < 2 or need > held - 1:
        return None
    resource = _count(per_pod, _resource(w, ctx))
    suggested = f"{_replicas(need)} × {resource}"
    evidence: dict[str, Any] = {
        "gpus_held_p95": int(w.held_p95),
        "util_sum_p95": round(w.util_sum_p95, 4),
        "replica_target_util": ctx.policy.replica_target_util,
        "gpus_needed": need_gpus,
        "hourly_util_sum_p05": round(w.hourly_util_sum_p05, 4),
        "hourly_util_sum_p95": round(w.hourly_util_sum_p95, 4),
        "hourly_util_sum_p99": round(w.hourly_util_sum_p99, 4),
    }
    scaling = _autoscaling(w, ctx)
    if scaling is not None:
        low, high = (max(_ceil(n / per_pod), 1) for n in scaling)
        if high > low:
            suggested += f", autoscaled {low}–{high} replicas"
            evidence |= {"autoscale_min_replicas": low, "autoscale_max_replicas": high}
    return Finding("reduce_replicas", f"{_replicas(held)} × {resource}", suggested,
                   (held - need) / held, evidence)  # fmt: skip


def _mig_table(w: WorkloadMeasures, ctx: Context) -> tuple[MigProfile, ...]:
    table = mig_profiles(w.gpu_model)
    if table:
        return table
    on_mig_node = any((w.cluster, node) in ctx.mig_nodes for node in w.nodes)
    if on_mig_node and not math.isnan(w.gpu_memory_mib):
        return generic_profiles(w.gpu_memory_mib)
    return ()


def use_mig(w: WorkloadMeasures, ctx: Context) -> Finding | None:
    if not (w.one_gpu_pods and w.whole_gpus) or math.isnan(w.p_memory_mib):
        return None
    table = _mig_table(w, ctx)
    if not table:
        return None
    profile = smallest_fitting_profile(w.gpu_model, _memory_need(w, ctx), w.p_util, table)
    if profile is None or profile.g >= compute_slices(w.gpu_model):
        return None
    evidence = {"profile_memory_mib": profile.memory_mib, "profile_slices": profile.g}
    fraction = 1.0 - profile.fraction
    suggested = profile.resource
    if w.claims:
        selector = f'device.attributes["{DRA_DOMAIN}"].profile == "{profile.name}"'
        suggested = _claim(DRA_MIG_CLASS, selector)
    return Finding("use_mig", _count(1, _resource(w, ctx)), suggested, fraction, evidence)


def share_gpu(w: WorkloadMeasures, ctx: Context) -> Finding | None:
    if not (w.one_gpu_pods and w.whole_gpus) or _mig_table(w, ctx):
        return None
    if math.isnan(w.p_memory_mib) or math.isnan(w.gpu_memory_mib):
        return None
    need = _memory_need(w, ctx)
    if w.p_util > ctx.policy.share_max_util_pct / 100 or need > w.gpu_memory_mib / 2:
        return None
    by_memory = math.floor(w.gpu_memory_mib / need) if need > 0 else math.inf
    by_util = math.floor(1 / w.p_util) if w.p_util > 0 else math.inf
    replicas = int(min(by_memory, by_util, ctx.policy.max_share_replicas))
    if replicas < 2:
        return None
    suggested = f"nvidia.com/gpu.shared (time-sliced, {replicas} replicas)"
    if w.claims:
        suggested = f"one ResourceClaim shared by {replicas} pods (1/{replicas} of a GPU each)"
    current = _count(1, _resource(w, ctx))
    return Finding("share_gpu", current, suggested, 1 - 1 / replicas, {"replicas": replicas})


def _providers(w: WorkloadMeasures, ctx: Context) -> frozenset[str]:
    """Who can sell this workload a GPU: its nodes' providers, else the configured one."""
    keys = [(w.cluster, node) for node in w.nodes]
    found = {ctx.node_providers[key] for key in keys if key in ctx.node_providers}
    if found:
        return frozenset(found)
    cluster = ctx.policy.cluster_provider
    return frozenset({cluster}) if cluster else frozenset()


def _offered(model: ModelPrice, providers: frozenset[str], ctx: Context) -> bool:
    listed = {ctx.price_book.lookup(name) for name in ctx.policy.cheaper_models}
    return bool(model.providers & providers) or model in listed


@dataclass(frozen=True)
class _Option:
    price: float
    model: ModelPrice
    projected_util: float  # p95 utilization scaled by the speed ratio


def _options(w: WorkloadMeasures, ctx: Context, own: ModelPrice, capacity: str) -> list[_Option]:
    """Models the user can buy with the memory, cheaper, where the work still fits."""
    own_speed = own.relative_speed or 0.0
    current = ctx.price_book.usd_per_gpu_hour(w.gpu_model, capacity)
    providers = _providers(w, ctx)
    limit = ctx.policy.cheaper_max_projected_util_pct / 100 + 1e-9
    out = []
    for p in ctx.price_book.models.values():
        if p is own or not p.relative_speed or p.memory_mib is None:
            continue
        if p.memory_mib < _memory_need(w, ctx) or not _offered(p, providers, ctx):
            continue
        option = _Option(p.price(capacity), p, w.p_util * own_speed / p.relative_speed)
        if option.projected_util <= limit and option.price < current:
            out.append(option)
    return out


def cheaper_model(w: WorkloadMeasures, ctx: Context) -> Finding | None:
    """A cheaper model the user can buy (its provider offers it, or it is listed) with the
    memory, on which the p95 utilization, scaled by the speed ratio, stays ≤ 80 %."""
    if not w.whole_gpus or math.isnan(w.p_memory_mib):
        return None
    if w.p_util > ctx.policy.cheaper_max_util_pct / 100:
        return None
    own = ctx.price_book.lookup(w.gpu_model)
    if own is None or own.relative_speed is None:
        return None  # no speed to project the work onto another model
    capacity = SPOT if w.spot else ON_DEMAND
    options = _options(w, ctx, own, capacity)
    if not options:
        return None
    best = min(options, key=lambda o: (o.price, -(o.model.relative_speed or 0), o.model.model))
    current = ctx.price_book.usd_per_gpu_hour(w.gpu_model, capacity)
    evidence = {
        "current_usd_per_gpu_hour": current,
        "suggested_usd_per_gpu_hour": best.price,
        "current_relative_speed": own.relative_speed,
        "suggested_relative_speed": best.model.relative_speed,
        "projected_p95_util_pct": round(100 * best.projected_util, 2),
        "providers": sorted(_providers(w, ctx)),
    }
    suggested = best.model.model
    if w.claims:
        selector = f'device.attributes["{DRA_DOMAIN}"].productName == "{suggested}"'
        suggested = f"{suggested} ({_claim(DRA_DOMAIN, selector)})"
    return Finding("cheaper_model", str(w.gpu_model), suggested,
                   1 - best.price / current, evidence)  # fmt: skip


def use_spot(w: WorkloadMeasures, ctx: Context) -> Finding | None:
    if w.workload_kind not in BATCH_KINDS or w.spot:
        return None
    on_demand = ctx.price_book.usd_per_gpu_hour(w.gpu_model, ON_DEMAND)
    spot = ctx.price_book.usd_per_gpu_hour(w.gpu_model, SPOT)
    if on_demand <= 0 or spot >= on_demand:
        return None
    evidence = {"on_demand_usd_per_gpu_hour": on_demand, "spot_usd_per_gpu_hour": spot}
    return Finding(
        "use_spot", "on-demand capacity", "spot capacity", 1 - spot / on_demand, evidence
    )


def memory_risk(w: WorkloadMeasures, ctx: Context) -> Finding | None:
    if math.isnan(w.p_memory_mib) or math.isnan(w.gpu_memory_mib) or w.gpu_memory_mib <= 0:
        return None
    if w.p_memory_mib < ctx.policy.memory_risk_pct / 100 * w.gpu_memory_mib:
        return None
    current = f"{w.p_memory_mib:.0f} MiB used of {w.gpu_memory_mib:.0f} MiB"
    return Finding("memory_risk", current, "a GPU or MIG profile with more memory", 0.0, {})


#: What to look at for each cause of busy-but-inefficient GPU time.
EFFICIENCY_ADVICE: dict[str, str] = {
    "throttled": "check the node's cooling and power limits (clocks held down)",
    "memory-bound": "profile memory traffic: batch size, kernel fusion, mixed precision",
    "input-bound": "profile the input pipeline: data loading, CPU preprocessing, host copies",
    "no tensor cores used": "use mixed precision (BF16/FP16, TF32) so the tensor cores work",
}


def _pct_or_none(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 1)


def investigate_efficiency(w: WorkloadMeasures, ctx: Context) -> Finding | None:
    """Busy but inefficient (contract section 5): engine active ≥ 50 % while SM active < 25 %,
    or tensor active ≈ 0 on a GPU with tensor cores, where the profiling fields exist. No
    saving is claimed; the evidence states the dollars at stake and the likely cause."""
    e = w.efficiency
    if e is None or e.cause is None:
        return None
    sm = "SM n/a" if math.isnan(e.sm_active_pct) else f"SM {e.sm_active_pct:.0f} %"
    tensor = "" if math.isnan(e.tensor_active_pct) else f", tensor {e.tensor_active_pct:.0f} %"
    evidence = {
        "cause": e.cause,
        "inefficient_gpu_hours": round(e.inefficient_gpu_hours, 4),
        "inefficient_cost_usd": round(e.inefficient_cost_usd, 2),
        "engine_active_pct": _pct_or_none(e.engine_active_pct),
        "sm_active_pct": _pct_or_none(e.sm_active_pct),
        "tensor_active_pct": _pct_or_none(e.tensor_active_pct),
        "dram_active_pct": _pct_or_none(e.dram_active_pct),
        "throttled_pct": _pct_or_none(e.throttled_pct),
    }
    current = f"engine {e.engine_active_pct:.0f} % active, {sm}{tensor} ({e.cause})"
    advice = EFFICIENCY_ADVICE[e.cause]
    return Finding("investigate_efficiency", current, advice, 0.0, evidence,
                   e.inefficient_cost_usd)  # fmt: skip
