"""Right-sizing recommendations (contract section 5, docs/recommendations.md).

Pure: costed samples and plain settings in, one DataFrame out, with the columns of
:data:`gpuwatch.analytics.columns.RECOMMENDATION_COLUMNS`, largest saving first.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.costing import prepare
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.analytics.workloads import workload_stats
from gpuwatch.domain.mig import (
    MigProfile,
    compute_slices,
    generic_profiles,
    mig_profiles,
    smallest_fitting_profile,
)
from gpuwatch.domain.pricing import ON_DEMAND, SPOT, PriceBook

HOURS_PER_MONTH = 730.0
BATCH_KINDS = frozenset({"Job", "CronJob"})
KINDS = (
    "reclaim_idle",
    "reduce_gpu_count",
    "use_mig",
    "share_gpu",
    "cheaper_model",
    "use_spot",
    "memory_risk",
)


@dataclass(frozen=True)
class Finding:
    """One triggered rule: what to change and the fraction of the workload's cost it saves."""

    kind: str
    current: str
    suggested: str
    fraction_saved: float
    evidence: dict[str, Any]


@dataclass(frozen=True)
class Context:
    policy: AnalyticsPolicy
    price_book: PriceBook
    mig_nodes: frozenset[tuple[str, str]]
    resources: dict[tuple[str, str, str, str], str]


Rule = Callable[[Any, Context], Finding | None]


def _resource(w: Any, ctx: Context) -> str:
    found = ctx.resources.get((w.cluster, w.namespace, w.workload_kind, w.workload))
    if found:
        return found
    if isinstance(w.mig_profile, str):
        return f"nvidia.com/mig-{w.mig_profile}"
    return "nvidia.com/gpu"


def _count(n: float, resource: str) -> str:
    return f"{int(n)} × {resource}"


def _memory_need(w: Any, ctx: Context) -> float:
    return float(w.p_memory_mib) * ctx.policy.memory_headroom


def reclaim_idle(w: Any, ctx: Context) -> Finding | None:
    idle_fraction = w.idle_gpu_hours / w.allocated_gpu_hours
    if idle_fraction < ctx.policy.reclaim_idle_fraction:
        return None
    if w.allocated_gpu_hours < ctx.policy.min_observed_gpu_hours:
        return None
    resource = _resource(w, ctx)
    evidence = {"idle_fraction": idle_fraction}
    return Finding("reclaim_idle", _count(w.pod_gpus, resource), _count(0, resource), 1.0, evidence)


def reduce_gpu_count(w: Any, ctx: Context) -> Finding | None:
    n = int(w.pod_gpus)
    k = max(int(w.busy_k), 1)
    if n <= 1 or k >= n:
        return None
    resource = _resource(w, ctx)
    return Finding("reduce_gpu_count", _count(n, resource), _count(k, resource), (n - k) / n, {})


def _mig_table(w: Any, ctx: Context) -> tuple[MigProfile, ...]:
    table = mig_profiles(w.gpu_model)
    if table:
        return table
    on_mig_node = any((w.cluster, node) in ctx.mig_nodes for node in w.nodes)
    if on_mig_node and not math.isnan(w.gpu_memory_mib):
        return generic_profiles(w.gpu_memory_mib)
    return ()


def use_mig(w: Any, ctx: Context) -> Finding | None:
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
    return Finding("use_mig", _count(1, _resource(w, ctx)), profile.resource, fraction, evidence)


def share_gpu(w: Any, ctx: Context) -> Finding | None:
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
    current = _count(1, _resource(w, ctx))
    return Finding("share_gpu", current, suggested, 1 - 1 / replicas, {"replicas": replicas})


def cheaper_model(w: Any, ctx: Context) -> Finding | None:
    if not w.whole_gpus or math.isnan(w.p_memory_mib):
        return None
    if w.p_util > ctx.policy.cheaper_max_util_pct / 100:
        return None
    capacity = SPOT if w.spot else ON_DEMAND
    book = ctx.price_book
    current = book.usd_per_gpu_hour(w.gpu_model, capacity)
    own = book.lookup(w.gpu_model)
    need = _memory_need(w, ctx)
    options = sorted(
        (p.price(capacity), p.model)
        for p in book.models.values()
        if p.memory_mib is not None and p.memory_mib >= need and (own is None or p is not own)
    )
    if not options or options[0][0] >= current:
        return None
    price, model = options[0]
    evidence = {"current_usd_per_gpu_hour": current, "suggested_usd_per_gpu_hour": price}
    return Finding("cheaper_model", str(w.gpu_model), model, 1 - price / current, evidence)


def use_spot(w: Any, ctx: Context) -> Finding | None:
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


def memory_risk(w: Any, ctx: Context) -> Finding | None:
    if math.isnan(w.p_memory_mib) or math.isnan(w.gpu_memory_mib) or w.gpu_memory_mib <= 0:
        return None
    if w.p_memory_mib < ctx.policy.memory_risk_pct / 100 * w.gpu_memory_mib:
        return None
    current = f"{w.p_memory_mib:.0f} MiB used of {w.gpu_memory_mib:.0f} MiB"
    return Finding("memory_risk", current, "a GPU or MIG profile with more memory", 0.0, {})


RULES: tuple[Rule, ...] = (
    reclaim_idle,
    reduce_gpu_count,
    use_mig,
    share_gpu,
    cheaper_model,
    use_spot,
    memory_risk,
)


def confidence(w: Any, policy: AnalyticsPolicy) -> str:
    """``high``: enough hours with pod-level attribution; ``medium``; else ``low``."""
    if w.node_attribution:
        return "low"
    if w.observed_hours >= policy.high_confidence_hours:
        return "high"
    if w.observed_hours >= policy.medium_confidence_hours:
        return "medium"
    return "low"


def _quantile_key(q: float) -> str:
    return f"p{q * 100:g}"


def base_evidence(w: Any, policy: AnalyticsPolicy, window_hours: float) -> dict[str, Any]:
    """The numbers behind every recommendation of a workload."""

    def num(value: float) -> float | None:
        return None if math.isnan(value) else round(float(value), 4)

    return {
        "hours_observed": num(w.observed_hours),
        "gpu_hours_observed": num(w.allocated_gpu_hours),
        "idle_gpu_hours": num(w.idle_gpu_hours),
        f"{_quantile_key(policy.util_quantile)}_util_pct": num(100 * w.p_util),
        f"{_quantile_key(policy.memory_quantile)}_memory_mib": num(w.p_memory_mib),
        "gpu_memory_mib": num(w.gpu_memory_mib),
        "gpus_per_pod": int(w.pod_gpus),
        f"busy_gpus_{_quantile_key(policy.busy_quantile)}": int(w.busy_k),
        "pods": int(w.pods),
        "cost_usd": num(w.allocated_cost_usd),
        "window_hours": num(window_hours),
        "attribution": "node" if w.node_attribution else "pod",
    }


def _row(w: Any, finding: Finding, ctx: Context, window_hours: float) -> dict[str, Any]:
    rate = w.allocated_cost_usd / window_hours if window_hours > 0 else 0.0
    evidence = base_evidence(w, ctx.policy, window_hours) | finding.evidence
    return {
        "cluster": w.cluster,
        "namespace": w.namespace,
        "team": w.team,
        "workload_kind": w.workload_kind,
        "workload": w.workload,
        "gpu_model": w.gpu_model,
        "kind": finding.kind,
        "current": finding.current,
        "suggested": finding.suggested,
        "confidence": confidence(w, ctx.policy),
        "evidence": evidence,
        "est_monthly_savings_usd": rate * HOURS_PER_MONTH * finding.fraction_saved,
    }


def empty_recommendations() -> pd.DataFrame:
    """A frame with the recommendation columns and no rows."""
    return pd.DataFrame({name: pd.Series(dtype=object) for name in c.RECOMMENDATION_COLUMNS})


def sort_recommendations(frame: pd.DataFrame) -> pd.DataFrame:
    """Largest saving first; ties in key order, then in the order of :data:`KINDS`."""
    order = frame.assign(_kind=frame["kind"].map({k: i for i, k in enumerate(KINDS)}))
    keys = ["cluster", "namespace", "workload_kind", "workload", "gpu_model", "_kind"]
    order = order.sort_values(keys, kind="stable").sort_values(
        "est_monthly_savings_usd", ascending=False, kind="stable"
    )
    return order.drop(columns="_kind").reset_index(drop=True)


def recommend_from_stats(stats: pd.DataFrame, ctx: Context, window_hours: float) -> pd.DataFrame:
    """Apply every rule to every workload of :func:`workload_stats`."""
    rows = [
        _row(w, finding, ctx, window_hours)
        for w in stats.itertuples(index=False)
        for rule in RULES
        if (finding := rule(w, ctx)) is not None
    ]
    if not rows:
        return empty_recommendations()
    return sort_recommendations(pd.DataFrame(rows, columns=list(c.RECOMMENDATION_COLUMNS)))


def workload_resources(pods: pd.DataFrame | None) -> dict[tuple[str, str, str, str], str]:
    if pods is None or pods.empty:
        return {}
    keys = ["cluster", "namespace", "workload_kind", "workload"]
    held = pods[pods["gpu_count"].gt(0) & pods["gpu_resource"].notna()]
    counts = held.groupby([*keys, "gpu_resource"], sort=True).size().reset_index(name="n")
    top = counts.sort_values("n", ascending=False, kind="stable").drop_duplicates(keys)
    return {tuple(r[:4]): str(r[4]) for r in top.itertuples(index=False)}


def mig_capable_nodes(nodes: pd.DataFrame | None) -> frozenset[tuple[str, str]]:
    if nodes is None or nodes.empty:
        return frozenset()
    capable = nodes[nodes["mig_capable"].fillna(False).astype(bool)]
    return frozenset((str(a), str(b)) for a, b in capable[["cluster", "node"]].itertuples(False))


def recommend(
    samples: pd.DataFrame,
    pods: pd.DataFrame | None,
    price_book: PriceBook,
    policy: AnalyticsPolicy,
    start_ts: int,
    end_ts: int,
    *,
    gpus: pd.DataFrame | None = None,
    nodes: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Recommendations for the window ``[start_ts, end_ts)`` from raw (or costed) samples."""
    window = samples[(samples["ts"] >= start_ts) & (samples["ts"] < end_ts)]
    costed = prepare(window, pods, price_book)
    stats = workload_stats(costed, policy, price_book, gpus)
    ctx = Context(policy, price_book, mig_capable_nodes(nodes), workload_resources(pods))
    return recommend_from_stats(stats, ctx, (end_ts - start_ts) / 3600.0)
