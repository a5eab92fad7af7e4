"""The analysis settings as plain values, built by the CLI from ``Settings``.

Mirrors ``thresholds`` and ``recommendations`` of the configuration (docs/configuration.md) so
that analytics never reads the configuration itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from gpuwatch.domain import thresholds as defaults


@dataclass(frozen=True)
class AnalyticsPolicy:
    """Thresholds and recommendation triggers (defaults as in the configuration)."""

    idle_util_pct: float = defaults.IDLE_UTIL_PCT
    low_efficiency_pct: float = defaults.LOW_EFFICIENCY_PCT
    memory_full_pct: float = defaults.MEMORY_FULL_PCT
    reclaim_idle_fraction: float = defaults.RECLAIM_IDLE_FRACTION
    share_max_util_pct: float = defaults.SHARE_MAX_UTIL_PCT
    cheaper_max_util_pct: float = defaults.CHEAPER_MAX_UTIL_PCT
    memory_headroom: float = defaults.MEMORY_HEADROOM
    memory_risk_pct: float = defaults.MEMORY_RISK_PCT
    busy_quantile: float = defaults.BUSY_QUANTILE
    util_quantile: float = defaults.UTIL_QUANTILE
    memory_quantile: float = defaults.MEMORY_QUANTILE
    high_confidence_hours: float = defaults.HIGH_CONFIDENCE_HOURS
    medium_confidence_hours: float = defaults.MEDIUM_CONFIDENCE_HOURS
    #: Most replicas ``share_gpu`` suggests for one GPU.
    max_share_replicas: int = defaults.MAX_SHARE_REPLICAS
    replica_target_util: float = defaults.REPLICA_TARGET_UTIL
    replica_swing_ratio: float = defaults.REPLICA_SWING_RATIO
    reclaim_min_observed_hours: float = defaults.RECLAIM_MIN_OBSERVED_HOURS
    #: ``cheaper_model``: projected p95 utilization on the cheaper model at most this.
    cheaper_max_projected_util_pct: float = defaults.CHEAPER_MAX_PROJECTED_UTIL_PCT
    #: ``cheaper_model``: models allowed whatever the provider offers (on-premises stock).
    cheaper_models: tuple[str, ...] = ()
    #: The cluster's cloud provider where its nodes do not say (None: unknown or on-premises).
    cluster_provider: str | None = None

    @property
    def idle_threshold_ratio(self) -> float:
        """The idle threshold as a utilization ratio (a sample below it is idle)."""
        return self.idle_util_pct / 100.0

    @classmethod
    def from_mappings(cls, *sections: Mapping[str, Any]) -> AnalyticsPolicy:
        """Build from settings sections (``thresholds``, ``recommendations`` as dicts).

        Keys this class does not know (alert-only thresholds, for one) are left out.
        """
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for section in sections:
            values.update({k: v for k, v in section.items() if k in known})
        if "cheaper_models" in values:
            values["cheaper_models"] = tuple(values["cheaper_models"])
        return cls(**values)
