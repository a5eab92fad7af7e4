"""Right-sizing recommendations (contract section 5, docs/recommendations.md).

Pure: costed samples and plain settings in, one DataFrame out, with the columns of
:data:`gpuwatch.analytics.columns.RECOMMENDATION_COLUMNS`, largest saving first.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.costing import prepare
from gpuwatch.analytics.efficiency import (
    EFFICIENCY_KEYS,
    EfficiencyMeasures,
    efficiency_measures,
    efficiency_of_sums,
    key_of,
)
from gpuwatch.analytics.placement import PlacementMeasures, workload_placement
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.analytics.rulebook import findings
from gpuwatch.analytics.rules import CLAIM_SUFFIX, KINDS, Context, Finding, WorkloadMeasures
from gpuwatch.analytics.totals import HOURS_PER_MONTH, hours_with_data
from gpuwatch.analytics.workloads import workload_stats
from gpuwatch.domain.allocation import DRA
from gpuwatch.domain.durations import HOUR_S
from gpuwatch.domain.pricing import PriceBook
from gpuwatch.domain.series import StoredDetail


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
    if finding.at_stake_usd > 0 and window_hours > 0:
        monthly = finding.at_stake_usd / window_hours * HOURS_PER_MONTH
        evidence["at_stake_monthly_usd"] = round(monthly, 2)
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
        "allocation": w.allocation,
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


def measures(
    stats: pd.DataFrame,
    efficiency: pd.DataFrame | None = None,
    placement: dict[tuple[str, ...], PlacementMeasures] | None = None,
) -> list[WorkloadMeasures]:
    """The rows of :func:`workload_stats` as typed records, each with its row of
    :func:`~gpuwatch.analytics.efficiency.workload_efficiency` and its
    :func:`~gpuwatch.analytics.placement.workload_placement` where given."""
    names = [f.name for f in fields(WorkloadMeasures) if f.name not in ("efficiency", "placement")]
    found: dict[tuple[str, ...], EfficiencyMeasures] = {}
    if efficiency is not None and len(efficiency):
        found = efficiency_measures(efficiency)
    keys = stats[list(EFFICIENCY_KEYS)].itertuples(index=False, name=None)
    return [
        WorkloadMeasures(
            **dict(zip(names, row, strict=True)),
            efficiency=found.get(key_of(key)),
            placement=(placement or {}).get(key_of(key)),
        )
        for row, key in zip(stats[names].itertuples(index=False), keys, strict=True)
    ]


def recommend_from_stats(
    stats: pd.DataFrame,
    ctx: Context,
    data_hours: float,
    efficiency: pd.DataFrame | None = None,
    placement: dict[tuple[str, ...], PlacementMeasures] | None = None,
) -> pd.DataFrame:
    """Apply every rule to every workload of :func:`workload_stats` (with its real
    ``efficiency`` and ``placement`` where given); monthly savings are the cost per hour with
    data (``data_hours``) × 730."""
    rows = [
        _row(w, finding, ctx, data_hours)
        for w in measures(stats, efficiency, placement)
        for finding in findings(w, ctx)
    ]
    if not rows:
        return empty_recommendations()
    return sort_recommendations(pd.DataFrame(rows, columns=list(c.RECOMMENDATION_COLUMNS)))


def workload_resources(pods: pd.DataFrame | None) -> dict[tuple[str, str, str, str], str]:
    if pods is None or pods.empty:
        return {}
    keys = ["cluster", "namespace", "workload_kind", "workload"]
    held = pods[pods["gpu_count"].gt(0) & pods["gpu_resource"].notna()].copy()
    claimed = held["allocation"].astype(object).eq(DRA).to_numpy()
    resource = held["gpu_resource"].astype(str)
    held["gpu_resource"] = resource.where(~claimed, resource + CLAIM_SUFFIX)
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
    health_sums: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Recommendations for the window ``[start_ts, end_ts)`` from raw samples (or hourly
    roll-ups with their ``detail``); monthly savings per hour of the window's data span.
    ``health_sums``: the health roll-up of the window's hours summed per (unit, pod)
    (:data:`~gpuwatch.domain.frames.HEALTH_SUM_COLUMNS`) for ``investigate_efficiency`` and
    the traffic of ``consolidate_placement``."""
    window = samples[(samples["ts"] >= start_ts) & (samples["ts"] < end_ts)]
    costed = prepare(window, pods, price_book)
    stats = workload_stats(costed, policy, price_book, gpus, detail)
    ctx = build_context(policy, price_book, nodes, pods)
    efficiency = window_efficiency(health_sums, price_book)
    span = data_span_hours(window, start_ts, end_ts)
    placement = window_placement(window, nodes, pods, health_sums)
    return recommend_from_stats(stats, ctx, span, efficiency, placement)


def window_efficiency(
    health_sums: pd.DataFrame | None, price_book: PriceBook
) -> pd.DataFrame | None:
    """:func:`~gpuwatch.analytics.efficiency.efficiency_of_sums` of a window's health sums;
    None without them."""
    return None if health_sums is None else efficiency_of_sums(health_sums, price_book)


def window_placement(
    samples: pd.DataFrame,
    nodes: pd.DataFrame | None,
    pods: pd.DataFrame | None,
    health_sums: pd.DataFrame | None,
) -> dict[tuple[str, ...], PlacementMeasures]:
    """:func:`~gpuwatch.analytics.placement.workload_placement` of the window's sample rows,
    with the traffic of the window's health sums: what every surface passes to
    :func:`recommend_from_stats` as ``placement``."""
    return workload_placement(samples, nodes, pods, health_sums)


def build_context(
    policy: AnalyticsPolicy,
    price_book: PriceBook,
    nodes: pd.DataFrame | None,
    pods: pd.DataFrame | None,
) -> Context:
    """What the rules know besides the workloads' measures, from the store's frames."""
    providers: dict[tuple[str, str], str] = {}
    if nodes is not None and len(nodes) and "provider" in nodes:
        known = nodes.dropna(subset=["provider"])
        providers = {(str(a), str(b)): str(p) for a, b, p in
                     known[["cluster", "node", "provider"]].itertuples(index=False)}  # fmt: skip
    return Context(
        policy, price_book, mig_capable_nodes(nodes), workload_resources(pods), providers
    )


def data_span_hours(samples: pd.DataFrame, start_ts: int, end_ts: int) -> float:
    """Hours the window's data spans (:func:`~gpuwatch.analytics.totals.hours_with_data`), or
    the window's hours when it has no sample."""
    hours = hours_with_data(samples, start_ts, end_ts)
    return hours if hours > 0 else (end_ts - start_ts) / HOUR_S
