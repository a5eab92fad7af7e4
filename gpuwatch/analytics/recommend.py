"""Right-sizing recommendations (contract section 5, docs/recommendations.md).

Pure: costed samples and plain settings in, one DataFrame out, with the columns of
:data:`gpuwatch.analytics.columns.RECOMMENDATION_COLUMNS`, largest saving first.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.costing import prepare
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.analytics.workloads import workload_stats
from gpuwatch.domain.durations import HOUR_S
from gpuwatch.domain.mig import (
    MigProfile,
    compute_slices,
    generic_profiles,
    mig_profiles,
    smallest_fitting_profile,
)
from gpuwatch.domain.pricing import ON_DEMAND, SPOT, PriceBook
from gpuwatch.domain.series import StoredDetail

HOURS_PER_MONTH = 730.0
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


@dataclass(frozen=True)
class Context:
    policy: AnalyticsPolicy
    price_book: PriceBook
    mig_nodes: frozenset[tuple[str, str]]
    resources: dict[tuple[str, str, str, str], str]


Rule = Callable[[WorkloadMeasures, Context], Finding | None]


def _resource(w: WorkloadMeasures, ctx: Context) -> str:
    found = ctx.resources.get((w.cluster, w.namespace, w.workload_kind, w.workload))
    if found:
        return found
    if isinstance(w.mig_profile, str):
        return f"nvidia.com/mig-{w.mig_profile}"
    return "nvidia.com/gpu"


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


def reduce_replicas(w: WorkloadMeasures, ctx: Context) -> Finding | None:
    """Fewer replicas: the GPUs held at p95 of sample times exceed what the summed use needs."""
    if w.pods < 2 or math.isnan(w.held_p95) or math.isnan(w.util_sum_p95):
        return None
    per_pod = max(int(w.pod_gpus), 1)
    if w.gpus_requested < 2 * per_pod:  # never two pods at once
        return None
    held = int(w.held_p95)
    need = max(_ceil(w.util_sum_p95 / ctx.policy.replica_target_util), 1)
    if need > held - 1:
        return None
    resource = _resource(w, ctx)
    replicas = (max(_ceil(held / per_pod), 1), max(_ceil(need / per_pod), 1))
    suggested = f"{replicas[1]} replicas × {_count(per_pod, resource)}"
    evidence: dict[str, Any] = {
        "gpus_held_p95": held,
        "util_sum_p95": round(w.util_sum_p95, 4),
        "replica_target_util": ctx.policy.replica_target_util,
        "gpus_needed": need,
        "hourly_util_sum_p05": round(w.hourly_util_sum_p05, 4),
        "hourly_util_sum_p95": round(w.hourly_util_sum_p95, 4),
        "hourly_util_sum_p99": round(w.hourly_util_sum_p99, 4),
    }
    scaling = _autoscaling(w, ctx)
    if scaling is not None:
        low, high = (max(_ceil(n / per_pod), 1) for n in scaling)
        suggested += f", autoscaled {low}–{high} replicas"
        evidence |= {"autoscale_min_replicas": low, "autoscale_max_replicas": high}
    current = f"{replicas[0]} replicas × {_count(per_pod, resource)}"
    return Finding("reduce_replicas", current, suggested, (held - need) / held, evidence)


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
    return Finding("use_mig", _count(1, _resource(w, ctx)), profile.resource, fraction, evidence)


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
    current = _count(1, _resource(w, ctx))
    return Finding("share_gpu", current, suggested, 1 - 1 / replicas, {"replicas": replicas})


def cheaper_model(w: WorkloadMeasures, ctx: Context) -> Finding | None:
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


RULES: tuple[Rule, ...] = (
    reclaim_idle,
    reduce_gpu_count,
    reduce_replicas,
    use_mig,
    share_gpu,
    cheaper_model,
    use_spot,
    memory_risk,
)


def confidence(w: WorkloadMeasures, policy: AnalyticsPolicy) -> str:
    """``high``: enough hours with pod-level attribution; ``medium``; else ``low``."""
    if w.node_attribution:
        return "low"
    if w.observed_hours >= policy.high_confidence_hours:
        return "high"
    if w.observed_hours >= policy.medium_confidence_hours:
        return "medium"
    return "low"


def quantile_key(q: float) -> str:
    """The prefix of an evidence key for quantile ``q``: ``p95`` for 0.95."""
    return f"p{q * 100:g}"


def base_evidence(
    w: WorkloadMeasures, policy: AnalyticsPolicy, data_hours: float
) -> dict[str, Any]:
    """The numbers behind every recommendation of a workload."""

    def num(value: float) -> float | None:
        return None if math.isnan(value) else round(float(value), 4)

    return {
        "hours_observed": num(w.observed_hours),
        "gpu_hours_observed": num(w.allocated_gpu_hours),
        "idle_gpu_hours": num(w.idle_gpu_hours),
        f"{quantile_key(policy.util_quantile)}_util_pct": num(100 * w.p_util),
        f"{quantile_key(policy.memory_quantile)}_memory_mib": num(w.p_memory_mib),
        "gpu_memory_mib": num(w.gpu_memory_mib),
        "gpus_per_pod": int(w.pod_gpus),
        "gpus_requested": int(w.gpus_requested),
        f"busy_gpus_{quantile_key(policy.busy_quantile)}": int(w.busy_k),
        "pods": int(w.pods),
        "cost_usd": num(w.allocated_cost_usd),
        "data_hours": num(data_hours),
        "attribution": "node" if w.node_attribution else "pod",
    }


def _row(
    w: WorkloadMeasures, finding: Finding, ctx: Context, window_hours: float
) -> dict[str, Any]:
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


def findings(w: WorkloadMeasures, ctx: Context) -> list[Finding]:
    """Every rule that fires for ``w``; when ``reclaim_idle`` fires, the GPUs are to be given
    back, so the other saving kinds (a smaller or cheaper GPU …) are left out."""
    found = [f for rule in RULES if (f := rule(w, ctx)) is not None]
    if found and found[0].kind == "reclaim_idle":
        return [f for f in found if f.kind == "reclaim_idle" or f.fraction_saved == 0]
    return found


def measures(stats: pd.DataFrame) -> list[WorkloadMeasures]:
    """The rows of :func:`workload_stats` as typed records."""
    names = [f.name for f in fields(WorkloadMeasures)]
    return [WorkloadMeasures(*row) for row in stats[names].itertuples(index=False)]


def recommend_from_stats(stats: pd.DataFrame, ctx: Context, data_hours: float) -> pd.DataFrame:
    """Apply every rule to every workload of :func:`workload_stats`; monthly savings are the
    cost per hour with data (``data_hours``) × 730."""
    rows = [
        _row(w, finding, ctx, data_hours) for w in measures(stats) for finding in findings(w, ctx)
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
    detail: StoredDetail | None = None,
) -> pd.DataFrame:
    """Recommendations for the window ``[start_ts, end_ts)`` from raw samples (or hourly
    roll-ups with their ``detail``); monthly savings per hour of the window's data span."""
    window = samples[(samples["ts"] >= start_ts) & (samples["ts"] < end_ts)]
    costed = prepare(window, pods, price_book)
    stats = workload_stats(costed, policy, price_book, gpus, detail)
    ctx = Context(policy, price_book, mig_capable_nodes(nodes), workload_resources(pods))
    return recommend_from_stats(stats, ctx, data_span_hours(window, start_ts, end_ts))


def data_span_hours(samples: pd.DataFrame, start_ts: int, end_ts: int) -> float:
    """Hours of the window that its data spans: from the first sample (or the start) to the
    end of the last sample's step (or the end); the window's hours when it has no sample."""
    if samples.empty:
        return (end_ts - start_ts) / 3600.0
    ts = samples["ts"].to_numpy(dtype="int64")
    step = samples["step_s"].to_numpy(dtype="int64")
    first = max(int(ts.min()), start_ts)
    last = min(int((ts + np.where(c.SAMPLES in samples, HOUR_S, step)).max()), end_ts)
    return max(last - first, 0) / 3600.0
