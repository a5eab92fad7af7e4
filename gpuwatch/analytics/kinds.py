"""What each recommendation kind asks of its owner: waste or pricing, the effort, the risk.

One definition for every surface: the Savings page groups its cards and labels its rows from
:data:`KIND_FACTS`, and ``docs/recommendations.md`` states the same words (a test compares them).

- *waste*: the workload holds more GPU than it uses; the change gives capacity back.
- *pricing*: the same GPU time, bought cheaper (another model, spot capacity).
- *advice*: no saving claimed (out-of-memory risk, inefficiency, placement).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from gpuwatch.analytics.totals import potential_savings_usd

WASTE = "waste"
PRICING = "pricing"
ADVICE = "advice"
GROUPS = (WASTE, PRICING, ADVICE)


@dataclass(frozen=True)
class KindFacts:
    group: str
    #: What the owner does: restart needed? code change?
    effort: str
    #: What can go wrong: slower runs, preemption, out-of-memory neighbours.
    risk: str


KIND_FACTS: dict[str, KindFacts] = {
    "reclaim_idle": KindFacts(
        WASTE,
        "delete the workload or scale it to zero; no code change",
        "low: it sat below the idle threshold; ask its owner whether it is a standby",
    ),
    "reduce_gpu_count": KindFacts(
        WASTE,
        "lower the pods' GPU limit; pods restart",
        "medium: a job that splits work across its GPUs runs on fewer; check its launcher",
    ),
    "reduce_replicas": KindFacts(
        WASTE,
        "lower the replica count or add an autoscaler; rolling restart",
        "medium: less headroom for peaks above the window's p95",
    ),
    "use_mig": KindFacts(
        WASTE,
        "partition nodes with MIG and request the profile; pods restart; nodes are drained",
        "medium: the slice caps memory and compute; a node's reconfiguration evicts its pods",
    ),
    "share_gpu": KindFacts(
        WASTE,
        "enable time-slicing and request nvidia.com/gpu.shared; pods restart",
        "medium: no memory isolation; one pod running out of memory can fail its neighbours",
    ),
    "cheaper_model": KindFacts(
        PRICING,
        "move to a node pool of the cheaper model; pods restart; batch sizes may need tuning",
        "medium: slower per GPU (projected p95 utilization stays at or under 80 %)",
    ),
    "use_spot": KindFacts(
        PRICING,
        "schedule on spot nodes (node selector, toleration); the job must checkpoint and retry",
        "high: preemption at short notice; work since the last checkpoint is lost",
    ),
    "memory_risk": KindFacts(
        ADVICE,
        "a GPU or MIG profile with more memory, or a smaller batch",
        "out-of-memory failures if nothing changes",
    ),
    "investigate_efficiency": KindFacts(
        ADVICE,
        "profile and change code: input pipeline, precision, kernels",
        "none: no capacity changes hands",
    ),
    "consolidate_placement": KindFacts(
        ADVICE,
        "pod affinity or gang scheduling; pods restart",
        "low: the job waits longer for nodes with room for all of it",
    ),
}


def kinds_of(group: str) -> tuple[str, ...]:
    """The kinds of one group, in ranking order (``reclaim_idle`` first among waste)."""
    return tuple(kind for kind, facts in KIND_FACTS.items() if facts.group == group)


def group_savings_usd(recs: pd.DataFrame, group: str) -> float:
    """Monthly savings of one group's kinds: the largest per workload among them, summed
    (as :func:`~gpuwatch.analytics.totals.potential_savings_usd` counts all kinds)."""
    return potential_savings_usd(recs[recs["kind"].isin(kinds_of(group))])
