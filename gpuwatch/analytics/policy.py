"""The analysis settings as plain values, built by the CLI from ``Settings``.

Mirrors ``thresholds`` and ``recommendations`` of the configuration (docs/configuration.md) so
that analytics never reads the configuration itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class AnalyticsPolicy:
    """Thresholds and recommendation triggers (defaults as in the configuration)."""

    idle_util_pct: float = 5.0
    low_efficiency_pct: float = 30.0
    memory_full_pct: float = 95.0
    reclaim_idle_fraction: float = 0.95
    min_observed_gpu_hours: float = 24.0
    share_max_util_pct: float = 30.0
    cheaper_max_util_pct: float = 20.0
    memory_headroom: float = 1.15
    memory_risk_pct: float = 95.0
    busy_quantile: float = 0.95
    util_quantile: float = 0.95
    memory_quantile: float = 0.99
    high_confidence_hours: float = 168.0
    medium_confidence_hours: float = 24.0
    #: Most replicas ``share_gpu`` suggests for one GPU.
    max_share_replicas: int = 4
    replica_target_util: float = 0.6
    replica_swing_ratio: float = 3.0
    reclaim_min_observed_hours: float = 4.0
    #: ``cheaper_model``: projected p95 utilization on the cheaper model at most this.
    cheaper_max_projected_util_pct: float = 80.0
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
