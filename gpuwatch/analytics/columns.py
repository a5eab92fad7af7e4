"""Column names of the frames analytics returns, defined once."""

from __future__ import annotations

# Added to samples by the costing step.
DATA_HOURS = "data_hours"  # step_s / 3600 where the sample has a utilization reading, else 0
GPU_HOURS = "gpu_hours"  # data_hours × the unit's share of its GPU: GPU-equivalent hours
USD_PER_HOUR = "usd_per_hour"  # price of the unit's whole GPU, $ per GPU-hour
ALLOCATED = "allocated"  # the sample is held by a pod
UTIL = "util_ratio"
# Only in frames of hourly roll-ups (docs/storage.md).
IDLE_RATIO = "idle_ratio"  # share of the row's data hours below the idle threshold
SAMPLES = "samples"  # raw samples the row stands for

# Summary quantities (docs/cost-model.md).
ALLOCATED_GPU_HOURS = "allocated_gpu_hours"
USED_GPU_HOURS = "used_gpu_hours"
EFFICIENCY_PCT = "efficiency_pct"
IDLE_GPU_HOURS = "idle_gpu_hours"
ALLOCATED_COST_USD = "allocated_cost_usd"
IDLE_COST_USD = "idle_cost_usd"
UNUSED_COST_USD = "unused_cost_usd"
UNALLOCATED_GPU_HOURS = "unallocated_gpu_hours"
UNALLOCATED_COST_USD = "unallocated_cost_usd"
CAPACITY_GPU_HOURS = "capacity_gpu_hours"
CAPACITY_COST_USD = "capacity_cost_usd"
OBSERVED_HOURS = "observed_hours"  # expected hours of the group's units, data or not
COVERAGE_RATIO = "coverage_ratio"

#: Summed columns of :func:`gpuwatch.analytics.summary.summarize`, in output order.
SUM_COLUMNS: tuple[str, ...] = (
    ALLOCATED_GPU_HOURS,
    USED_GPU_HOURS,
    IDLE_GPU_HOURS,
    ALLOCATED_COST_USD,
    IDLE_COST_USD,
    UNUSED_COST_USD,
    UNALLOCATED_GPU_HOURS,
    UNALLOCATED_COST_USD,
)
SUMMARY_COLUMNS: tuple[str, ...] = (
    *SUM_COLUMNS[:2],
    EFFICIENCY_PCT,
    *SUM_COLUMNS[2:],
    CAPACITY_GPU_HOURS,
    CAPACITY_COST_USD,
    COVERAGE_RATIO,
)

# Time series of capacity, allocation and use.
BUCKET_TS = "bucket_ts"
CAPACITY_GPUS = "capacity_gpus"  # mean GPU units with data over the bucket
ALLOCATED_GPUS = "allocated_gpus"
USED_GPUS = "used_gpus"

# Pending demand.
PENDING_PODS = "pending_pods"
PENDING_GPUS = "pending_gpus"
OLDEST_PENDING_TS = "oldest_pending_ts"

# Recommendations (contract section 5), in output order.
RECOMMENDATION_COLUMNS: tuple[str, ...] = (
    "cluster",
    "namespace",
    "team",
    "workload_kind",
    "workload",
    "gpu_model",
    "kind",
    "current",
    "suggested",
    "confidence",
    "evidence",
    "est_monthly_savings_usd",
    "allocation",
)

#: Keys of a workload (one row of the weekly report, one subject of recommendations).
WORKLOAD_KEYS: tuple[str, ...] = ("cluster", "namespace", "workload_kind", "workload", "gpu_model")

#: Named groupings for :func:`gpuwatch.analytics.summary.summarize`.
GROUPINGS: dict[str, tuple[str, ...]] = {
    "gpu": ("cluster", "node", "gpu_id", "gpu_uuid", "mig_profile", "slot", "gpu_model"),
    "pod": ("cluster", "namespace", "pod"),
    "workload": ("cluster", "namespace", "workload_kind", "workload"),
    "namespace": ("cluster", "namespace"),
    "team": ("team",),
    "node": ("cluster", "node"),
    "gpu_model": ("gpu_model",),
    "cluster": ("cluster",),
}

# Scheduling waste (docs/cost-model.md#scheduling).
STALLED_GPU_HOURS = "stalled_gpu_hours"
STALLED_COST_USD = "stalled_cost_usd"
