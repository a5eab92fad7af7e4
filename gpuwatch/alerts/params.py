"""The plain inputs of the rule renderer, and how they are read from the settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuwatch.domain import thresholds as defaults
from gpuwatch.domain.health import HealthPolicy
from gpuwatch.domain.labels import LabelVariants
from gpuwatch.domain.mig import compute_slices
from gpuwatch.domain.pricing import DEFAULT_USD_PER_GPU_HOUR, build_price_book
from gpuwatch.domain.scheduling import SchedulingPolicy

if TYPE_CHECKING:
    from gpuwatch.config import Settings


@dataclass(frozen=True)
class PriceEntry:
    """One GPU model's on-demand price, matched on any of its ``modelName`` spellings."""

    aliases: tuple[str, ...]
    usd_per_gpu_hour: float
    #: Compute slices of the whole GPU: a MIG instance ``<g>g.*`` costs ``g / slices``.
    compute_slices: int = 7


@dataclass(frozen=True)
class RuleParams:
    """Everything the rendered rules depend on; defaults are those of the configuration."""

    idle_util_pct: float = defaults.IDLE_UTIL_PCT
    low_efficiency_pct: float = defaults.LOW_EFFICIENCY_PCT
    memory_full_pct: float = defaults.MEMORY_FULL_PCT
    temperature_c: float = defaults.TEMPERATURE_C
    labels: LabelVariants = field(default_factory=LabelVariants)
    #: PromQL label matchers added to every DCGM selector, e.g. ``job="dcgm-exporter"``.
    matchers: tuple[str, ...] = ()
    #: The label that tells clusters apart in a shared Prometheus (kept in every aggregation).
    cluster_label: str | None = None
    rule_name: str = "gpuwatch"
    rule_namespace: str = "monitoring"
    metadata_labels: tuple[tuple[str, str], ...] = ()
    runbook_base_url: str = defaults.RUNBOOK_BASE_URL
    idle_cost_usd_per_hour: float = defaults.IDLE_COST_USD_PER_HOUR
    exporter_namespaces: tuple[str, ...] = defaults.EXPORTER_NAMESPACES
    prices: tuple[PriceEntry, ...] = ()
    #: Per-node overrides, $ per GPU-hour, matched on the normalised ``node`` label.
    node_prices: tuple[tuple[str, float], ...] = ()
    default_usd_per_gpu_hour: float = DEFAULT_USD_PER_GPU_HOUR
    #: The GPU-health thresholds (configuration section ``health``).
    health: HealthPolicy = field(default_factory=HealthPolicy)
    #: When a gang counts as stalled (configuration section ``scheduling``).
    scheduling: SchedulingPolicy = field(default_factory=SchedulingPolicy)
    #: The Kubernetes label naming a pod's or namespace's team (``labels.team``).
    team_label: str = "team"
    #: (team, $ per month) of ``showback.monthly_budget_usd``, sorted by team.
    monthly_budget_usd: tuple[tuple[str, float], ...] = ()

    @property
    def idle_ratio(self) -> float:
        return self.idle_util_pct / 100

    @property
    def low_efficiency_ratio(self) -> float:
        return self.low_efficiency_pct / 100

    @property
    def memory_full_ratio(self) -> float:
        return self.memory_full_pct / 100

    @property
    def cluster(self) -> tuple[str, ...]:
        """The cluster label as a grouping prefix (empty when not configured)."""
        return (self.cluster_label,) if self.cluster_label else ()


def _price_entries(settings: Settings) -> tuple[PriceEntry, ...]:
    pricing = settings.pricing
    book = build_price_book(
        pricing.default_usd_per_gpu_hour,
        pricing.spot_discount,
        {name: (p.on_demand, p.spot) for name, p in pricing.models.items()},
        pricing.nodes,
    )
    return tuple(
        PriceEntry(p.aliases, p.on_demand_usd_per_gpu_hour, compute_slices(p.model))
        for p in sorted(book.models.values(), key=lambda p: p.model)
    )


def rule_params_from_settings(settings: Settings) -> RuleParams:
    """The renderer's inputs from the configuration (thresholds, labels, alerts, pricing)."""
    thresholds = settings.thresholds
    alerts = settings.alerts
    return RuleParams(
        idle_util_pct=thresholds.idle_util_pct,
        low_efficiency_pct=thresholds.low_efficiency_pct,
        memory_full_pct=thresholds.memory_full_pct,
        temperature_c=thresholds.temperature_c,
        labels=settings.prometheus.labels.variants(),
        matchers=tuple(settings.prometheus.matchers),
        cluster_label=settings.prometheus.cluster_label,
        rule_name=alerts.name,
        rule_namespace=alerts.namespace,
        metadata_labels=tuple(sorted(alerts.labels.items())),
        runbook_base_url=alerts.runbook_base_url,
        idle_cost_usd_per_hour=alerts.idle_cost_usd_per_hour,
        exporter_namespaces=tuple(alerts.exporter_namespaces),
        prices=_price_entries(settings),
        node_prices=tuple(sorted(settings.pricing.nodes.items())),
        default_usd_per_gpu_hour=settings.pricing.default_usd_per_gpu_hour,
        health=settings.health.policy(),
        scheduling=settings.scheduling.policy(),
        team_label=settings.labels.team,
        monthly_budget_usd=tuple(sorted(settings.showback.monthly_budget_usd.items())),
    )
