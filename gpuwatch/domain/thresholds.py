"""The default thresholds and triggers, defined once.

The configuration (``thresholds``, ``recommendations`` and ``alerts``), the analytics policy and
the alert rules' parameters all take their defaults from here, so a default changes in one
place (docs/configuration.md lists them).
"""

from __future__ import annotations

# thresholds: shared by the cost model, the recommendations, the alerts and the dashboard.
#: Below this utilization (percent) a GPU sample counts as idle.
IDLE_UTIL_PCT = 5.0
#: A namespace whose allocated GPUs average below this (percent) uses them little.
LOW_EFFICIENCY_PCT = 30.0
#: Framebuffer use at or above this percent of total is an out-of-memory risk.
MEMORY_FULL_PCT = 95.0
#: GPU temperature (°C) at which it throttles its clocks.
TEMPERATURE_C = 85.0

# recommendations: the triggers of contract section 5.
RECLAIM_IDLE_FRACTION = 0.95
SHARE_MAX_UTIL_PCT = 30.0
MAX_SHARE_REPLICAS = 4
CHEAPER_MAX_UTIL_PCT = 20.0
MEMORY_HEADROOM = 1.15
MEMORY_RISK_PCT = 95.0
BUSY_QUANTILE = 0.95
UTIL_QUANTILE = 0.95
MEMORY_QUANTILE = 0.99
HIGH_CONFIDENCE_HOURS = 168.0
MEDIUM_CONFIDENCE_HOURS = 24.0
#: reduce_replicas: the utilization each remaining replica's GPU should run at.
REPLICA_TARGET_UTIL = 0.6
#: reduce_replicas: hourly summed utilization p95 ≥ this × p05 adds an autoscaling range.
REPLICA_SWING_RATIO = 3.0
#: reclaim_idle: hours observed before it fires.
RECLAIM_MIN_OBSERVED_HOURS = 4.0
#: cheaper_model: projected p95 utilization on the cheaper model at most this (percent).
CHEAPER_MAX_PROJECTED_UTIL_PCT = 80.0

# alerts: the rendered rules' own settings.
RUNBOOK_BASE_URL = "https://github.com/gpuwatch/gpuwatch/blob/main/docs/runbook.md"
#: A namespace spending more than this ($ per hour) on idle GPUs is alerted.
IDLE_COST_USD_PER_HOUR = 10.0
#: Namespaces of the DCGM exporter itself, never GPU holders.
EXPORTER_NAMESPACES: tuple[str, ...] = ("gpu-operator",)
