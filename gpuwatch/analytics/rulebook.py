"""The right-sizing rules in the order they are tried, and :func:`findings` (contract
section 5, docs/recommendations.md#the-kinds). Pure."""

from __future__ import annotations

from gpuwatch.analytics.rules import (
    Context,
    Finding,
    Rule,
    WorkloadMeasures,
    cheaper_model,
    investigate_efficiency,
    memory_risk,
    reclaim_idle,
    reduce_gpu_count,
    reduce_replicas,
    share_gpu,
    use_mig,
    use_spot,
)
from gpuwatch.analytics.rules_placement import consolidate_placement

RULES: tuple[Rule, ...] = (
    reclaim_idle,
    reduce_gpu_count,
    reduce_replicas,
    use_mig,
    share_gpu,
    cheaper_model,
    use_spot,
    memory_risk,
    investigate_efficiency,
    consolidate_placement,
)


def findings(w: WorkloadMeasures, ctx: Context) -> list[Finding]:
    """Every rule that fires for ``w``; when ``reclaim_idle`` fires, the GPUs are to be given
    back, so the other saving kinds (a smaller or cheaper GPU …) are left out."""
    found = [f for rule in RULES if (f := rule(w, ctx)) is not None]
    if found and found[0].kind == "reclaim_idle":
        return [f for f in found if f.kind == "reclaim_idle" or f.fraction_saved == 0]
    return found
