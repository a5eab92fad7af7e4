"""The ``consolidate_placement`` rule (docs/recommendations.md#the-kinds,
docs/cost-model.md#scheduling). Pure."""

from __future__ import annotations

import math

from gpuwatch.analytics.rules import Context, Finding, WorkloadMeasures

#: Fewest whole GPUs held at once, and fewest nodes, for a workload to count as spread.
MIN_SPREAD_GPUS = 2
MIN_SPREAD_NODES = 2


def _bytes_or_none(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 1)


def consolidate_placement(w: WorkloadMeasures, ctx: Context) -> Finding | None:
    """A job or gang holding N ≥ 2 whole GPUs at once over m ≥ 2 nodes (p95 over its sample
    times) while ⌈N ÷ GPUs per node of its model⌉ < m. No saving is claimed; the evidence
    states the GPU-hours spread and its PCIe/NVLink traffic where measured."""
    p = w.placement
    if p is None or p.gpus < MIN_SPREAD_GPUS or p.nodes_used_p95 < MIN_SPREAD_NODES:
        return None
    if p.nodes_needed >= p.nodes_used_p95:
        return None
    evidence = {
        "nodes_used_p95": round(p.nodes_used_p95, 2),
        "nodes_needed": p.nodes_needed,
        "gpus": p.gpus,
        "gpus_per_node": p.gpus_per_node,
        "spread_gpu_hours": round(p.spread_gpu_hours, 4),
        "pcie_bytes_per_s": _bytes_or_none(p.pcie_bytes_per_s),
        "nvlink_bytes_per_s": _bytes_or_none(p.nvlink_bytes_per_s),
    }
    current = f"{p.gpus} GPUs over {p.nodes_used_p95:g} nodes (p95)"
    suggested = f"place on {p.nodes_needed} node(s) of {p.gpus_per_node} GPUs (affinity, gang)"
    return Finding("consolidate_placement", current, suggested, 0.0, evidence)
