"""The frame contract: column names, dtypes and units of the DataFrames passed between layers.

The store's repository produces these frames; analytics, the report and the dashboard consume
them. Defined once here so that every layer agrees. ``validate`` checks a frame against its spec.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

#: ``pod_id`` of GPU time that no pod held, where a row needs an integer key (the store's hourly
#: roll-ups, the dashboard's hourly rows); store pod ids start at 1.
NO_POD = 0


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str
    doc: str


#: One row per stored GPU sample in the window, joined with its GPU unit, node and pod facts.
SAMPLE_COLUMNS: tuple[Column, ...] = (
    Column("cluster", "string", "cluster name"),
    Column("node", "string", "node name (empty when unknown)"),
    Column("gpu_id", "int64", "store id of the GPU unit (GPU, MIG instance or time-slice slot)"),
    Column("gpu_uuid", "string", "physical GPU UUID"),
    Column("mig_profile", "string", "MIG profile like 3g.40gb, <NA> for a whole GPU"),
    Column("slot", "int64", "time-slice replica slot, 0 when not time-sliced"),
    Column("timeslice_replicas", "int64", "replicas of the physical GPU (1: not time-sliced)"),
    Column("gpu_model", "string", "DCGM modelName, e.g. NVIDIA A100-SXM4-80GB"),
    Column("capacity_type", "string", "on_demand or spot"),
    Column("ts", "int64", "sample instant, epoch seconds, on the step grid"),
    Column("step_s", "int64", "seconds the sample stands for: [ts, ts + step_s)"),
    Column("pod_id", "Int64", "store id of the attributed pod, <NA> when unallocated"),
    Column("namespace", "string", "pod namespace, <NA> when unallocated"),
    Column("pod", "string", "pod name, <NA> when unallocated"),
    Column("workload_kind", "string", "top owner kind (Deployment, Job, CronJob, ..., Pod)"),
    Column("workload", "string", "top owner name"),
    Column("team", "string", "team of the pod, <NA> when unallocated"),
    Column("pod_gpu_count", "Int64", "GPUs the pod requests (limits), <NA> when unknown"),
    Column(
        "attribution",
        "string",
        "pod (DCGM labels, pod listed by the API), dcgm-only (DCGM labels, pod never listed), "
        "node (node-level), <NA> unallocated",
    ),
    Column(
        "allocation",
        "string",
        "how the unit is handed out: device-plugin, mig, time-slice, mps or dra "
        "(dra also for a pod holding a unit through a ResourceClaim)",
    ),
    Column("util_ratio", "float64", "utilization 0-1, NaN when missing"),
    Column("util_signal", "string", "prof_gr_engine_active or dev_gpu_util, <NA> when missing"),
    Column("fb_used_mib", "float64", "framebuffer used, MiB, NaN when missing"),
    Column("fb_total_mib", "float64", "framebuffer total, MiB, NaN when unknown"),
    Column("power_w", "float64", "power draw, W"),
    Column("temp_c", "float64", "GPU temperature, degrees Celsius"),
    Column("xid", "Int64", "last XID error code, 0 when none"),
)

#: Hourly roll-ups read as samples (docs/storage.md): ``ts`` is the hour, ``step_s`` the seconds
#: with a reading, ``util_ratio`` their mean; two more columns carry what a mean cannot.
HOURLY_SAMPLE_COLUMNS: tuple[Column, ...] = (
    *SAMPLE_COLUMNS,
    Column("idle_ratio", "float64", "share of step_s below the idle threshold, NaN without data"),
    Column("samples", "int64", "raw samples the row stands for"),
)

#: Of a row that sums several hours (a day's sums read as sample rows, whose ``ts`` is the hour
#: of its first reading): the hour of its last reading, epoch seconds. Frames that mix such rows
#: with hourly ones carry it, NaN on the hourly rows; the hours a frame's data spans
#: (:func:`gpuwatch.analytics.totals.data_span`) end with it.
LAST_HOUR_TS = "last_hour_ts"

#: The identity columns of a sample row (its GPU unit's and pod's facts, its instant).
_READINGS = ("util_ratio", "util_signal", "fb_used_mib", "fb_total_mib", "power_w", "temp_c", "xid")
_IDENTITY = tuple(c for c in SAMPLE_COLUMNS if c.name not in _READINGS)


def _seconds(name: str, doc: str) -> Column:
    return Column(name, "float64", doc)


#: The hourly health and efficiency roll-up (``gpu_health_hourly``, docs/storage.md#health),
#: one row per (hour, GPU unit, pod) with any reading: ``ts`` is the hour and ``step_s`` the
#: row's seconds with samples (as ``data_s``). Seconds are sums; a ratio's mean over rows is
#: Σ ``*_active_s`` ÷ Σ ``*_data_s`` (0 data seconds: no data). Counts are <NA> where no
#: increase was reported.
HEALTH_COLUMNS: tuple[Column, ...] = (
    *_IDENTITY,
    _seconds("data_s", "seconds with any reading (Σ step)"),
    Column("first_ts", "int64", "first sample instant of the row"),
    Column("last_ts", "int64", "last sample instant of the row"),
    _seconds("util_s", "Σ utilization ratio (engine busy, 0-1) × step"),
    _seconds("util_data_s", "seconds with a utilization reading"),
    _seconds("sm_active_s", "Σ SM active ratio × step"),
    _seconds("sm_data_s", "seconds with an SM active reading"),
    _seconds("sm_occupancy_s", "Σ SM occupancy ratio × step"),
    _seconds("sm_occupancy_data_s", "seconds with an SM occupancy reading"),
    _seconds("tensor_active_s", "Σ tensor pipe active ratio × step"),
    _seconds("tensor_data_s", "seconds with a tensor active reading"),
    _seconds("dram_active_s", "Σ DRAM active ratio × step"),
    _seconds("dram_data_s", "seconds with a DRAM active reading"),
    _seconds("busy_sm_data_s", "busy seconds (util ≥ BUSY_UTIL_RATIO) with an SM reading"),
    _seconds("busy_low_sm_s", "busy seconds with SM active < LOW_SM_ACTIVE_RATIO"),
    _seconds("busy_tensor_data_s", "busy seconds with a tensor reading"),
    _seconds("busy_no_tensor_s", "busy seconds with tensor active < NO_TENSOR_RATIO"),
    _seconds("clock_data_s", "seconds with a clock-event reading"),
    _seconds("throttled_s", "seconds with a thermal, power-cap or HW-slowdown clock event"),
    _seconds("thermal_s", "seconds with a thermal clock event"),
    _seconds("power_cap_s", "seconds with a power-cap clock event"),
    _seconds("hw_slowdown_s", "seconds with a HW-slowdown clock event"),
    Column("sm_clock_mhz", "float64", "mean SM clock, MHz, NaN without readings"),
    Column("pcie_bytes_per_s", "float64", "mean PCIe TX + RX bytes per second, NaN without"),
    Column("nvlink_bytes_per_s", "float64", "mean NVLink TX + RX bytes per second, NaN without"),
    Column("ecc_sbe", "Int64", "correctable ECC errors in the hour, <NA>: none reported"),
    Column("ecc_dbe", "Int64", "uncorrectable ECC errors in the hour, <NA>: none reported"),
    Column("pcie_replays", "Int64", "PCIe replays in the hour, <NA>: none reported"),
    Column("nvlink_errors", "Int64", "NVLink CRC/replay/recovery errors, <NA>: none reported"),
    Column("row_remap_failure", "Int64", "1 when a row-remap failure was reported"),
    Column("fail_first_ts", "Int64", "first instant of a failing event in the hour"),
    Column("fail_xid", "Int64", "highest XID of FAILING_XIDS in the hour"),
    Column("app_xid", "Int64", "highest XID of APP_XIDS in the hour"),
    Column("other_xid", "Int64", "highest XID the catalogue does not list"),
)

#: A (GPU unit, pod) pair's facts: a sample row's identity without its instant.
HEALTH_SUM_IDENTITY: tuple[Column, ...] = tuple(
    c for c in _IDENTITY if c.name not in ("ts", "step_s")
)


#: Activity readings of the health sums: prefix of the sum columns → (Σ ratio × step column,
#: seconds with the reading). ``engine`` counts only on rows with a profiling reading.
HEALTH_SUM_READINGS: dict[str, tuple[str, str]] = {
    "engine": ("util_s", "util_data_s"),
    "sm_active": ("sm_active_s", "sm_data_s"),
    "sm_occupancy": ("sm_occupancy_s", "sm_occupancy_data_s"),
    "tensor_active": ("tensor_active_s", "tensor_data_s"),
    "dram_active": ("dram_active_s", "dram_data_s"),
}
#: The seconds-with-a-reading columns of the profiling fields (of :data:`HEALTH_COLUMNS`): a
#: row with any of them measures the engine's activity.
HEALTH_SUM_PROFILING: tuple[str, ...] = (
    "sm_data_s",
    "sm_occupancy_data_s",
    "tensor_data_s",
    "dram_data_s",
)


def _activity_sums(prefix: str, reading: str) -> tuple[Column, ...]:
    return (
        _seconds(f"{prefix}_weighted_s", f"Σ data_s × the hour's {reading} ratio, hours with it"),
        _seconds(f"{prefix}_weight_s", f"Σ data_s of the hours with a {reading} reading"),
        Column(f"{prefix}_hours", "float64", f"hours with a {reading} reading"),
    )


#: The health roll-up summed per (GPU unit, pod) over a window (docs/storage.md#health): the
#: terms of :func:`gpuwatch.analytics.health_sums.row_terms`, from which every efficiency
#: figure and the placement traffic follow without the hourly rows.
HEALTH_SUM_COLUMNS: tuple[Column, ...] = (
    *HEALTH_SUM_IDENTITY,
    _seconds("data_s", "seconds with any reading (Σ step)"),
    _seconds("clock_data_s", "seconds with a clock-event reading"),
    _seconds("throttled_data_s", "Σ data_s × the hour's throttled share of clock_data_s"),
    _seconds("low_sm_data_s", "Σ data_s × the hour's busy-with-low-SM share of util_data_s"),
    _seconds("inefficient_data_s", "as low_sm_data_s with the larger of low SM and no tensor"),
    _seconds("fail_s", "seconds after the GPU's first failing event in the window"),
    *_activity_sums("engine", "engine (utilization, on hours with profiling)"),
    *_activity_sums("sm_active", "SM active"),
    *_activity_sums("sm_occupancy", "SM occupancy"),
    *_activity_sums("tensor_active", "tensor active"),
    *_activity_sums("dram_active", "DRAM active"),
    Column("pcie_bytes_per_s_sum", "float64", "Σ hourly mean PCIe bytes per second"),
    Column("pcie_bytes_per_s_hours", "float64", "hours with a PCIe reading"),
    Column("nvlink_bytes_per_s_sum", "float64", "Σ hourly mean NVLink bytes per second"),
    Column("nvlink_bytes_per_s_hours", "float64", "hours with an NVLink reading"),
)

#: The summed columns of :data:`HEALTH_SUM_COLUMNS`, in order.
HEALTH_SUM_TERMS: tuple[str, ...] = tuple(
    c.name for c in HEALTH_SUM_COLUMNS[len(HEALTH_SUM_IDENTITY) :]
)

#: One row per GPU unit known in the window (for capacity and coverage).
GPU_COLUMNS: tuple[Column, ...] = (
    Column("cluster", "string", "cluster name"),
    Column("node", "string", "node name"),
    Column("gpu_id", "int64", "store id of the GPU unit"),
    Column("gpu_uuid", "string", "physical GPU UUID"),
    Column("mig_gi_id", "int64", "MIG GPU instance id, -1 for a whole GPU"),
    Column("mig_profile", "string", "MIG profile, <NA> for a whole GPU"),
    Column("slot", "int64", "time-slice replica slot"),
    Column("timeslice_replicas", "int64", "replicas of the physical GPU"),
    Column("gpu_model", "string", "DCGM modelName"),
    Column("capacity_type", "string", "on_demand or spot"),
    Column("allocation", "string", "device-plugin, mig, time-slice, mps or dra"),
    Column("memory_total_mib", "float64", "framebuffer total, MiB"),
    Column("first_seen_ts", "int64", "first instant the unit was seen"),
    Column("last_seen_ts", "int64", "last instant the unit was seen"),
)

#: One row per pod that held or waited for GPUs.
POD_COLUMNS: tuple[Column, ...] = (
    Column("cluster", "string", "cluster name"),
    Column("pod_id", "int64", "store id of the pod"),
    Column("namespace", "string", "namespace"),
    Column("pod", "string", "pod name"),
    Column("node", "string", "node name, <NA> while Pending"),
    Column("phase", "string", "Pending, Running, Succeeded, Failed, Unknown"),
    Column("workload_kind", "string", "top owner kind"),
    Column("workload", "string", "top owner name"),
    Column("team", "string", "team"),
    Column("gpu_resource", "string", "nvidia.com/gpu, nvidia.com/mig-1g.10gb, ..."),
    Column("gpu_count", "int64", "GPUs requested (containers summed, init containers by max)"),
    Column("created_ts", "Int64", "creation instant"),
    Column("started_ts", "Int64", "start instant, <NA> while Pending"),
    Column("finished_ts", "Int64", "finish instant, <NA> while running"),
    Column("dcgm_only", "bool", "known from DCGM labels only: never listed by the Kubernetes API"),
    Column("allocation", "string", "dra for a pod holding GPUs through claims, else <NA>"),
    Column("queue", "string", "Kueue ClusterQueue or Volcano queue it ran in, <NA>: none"),
    Column("gang_kind", "string", "kueue, volcano, jobset or job; <NA>: not in a gang"),
    Column("gang_name", "string", "the gang's name within its namespace and kind"),
    Column("gang_size", "Int64", "pods the gang needs at once"),
)

#: Samples' ``attribution`` of a pod known from DCGM labels only (docs/cost-model.md).
DCGM_ONLY_ATTRIBUTION = "dcgm-only"

#: One row per node with GPUs.
NODE_COLUMNS: tuple[Column, ...] = (
    Column("cluster", "string", "cluster name"),
    Column("node", "string", "node name"),
    Column("gpu_model", "string", "GPU model (DCGM modelName where known)"),
    Column("gpu_count", "int64", "physical GPUs"),
    Column("gpu_memory_mib", "Int64", "memory per GPU, MiB"),
    Column("capacity_type", "string", "on_demand or spot"),
    Column("instance_type", "string", "cloud instance type"),
    Column("mig_capable", "bool", "node says nvidia.com/mig.capable=true"),
    Column("mig_strategy", "string", "single, mixed or <NA>"),
    Column("timeslice_replicas", "int64", "nvidia.com/gpu.replicas, 1 when not time-sliced"),
    Column("gpu_sharing", "string", "device-plugin, time-slice, mps or dra"),
    Column("provider", "string", "cloud provider (aws, gcp, azure, oci, …), <NA> when unknown"),
)


#: One row per (cluster, queue kind, queue, flavor, GPU resource) with a GPU quota, as last seen.
QUEUE_COLUMNS: tuple[Column, ...] = (
    Column("cluster", "string", "cluster name"),
    Column("kind", "string", "kueue (ClusterQueue) or volcano (Queue)"),
    Column("queue", "string", "queue name"),
    Column("cohort", "string", "Kueue cohort, <NA>: none"),
    Column("flavor", "string", "Kueue ResourceFlavor, empty for Volcano"),
    Column("gpu_resource", "string", "nvidia.com/gpu or a MIG resource"),
    Column("gpu_model", "string", "GPU model the flavor selects, <NA>: any"),
    Column("nominal_gpus", "float64", "nominal quota, devices"),
    Column("borrowing_limit_gpus", "float64", "most it may borrow, NaN: unlimited"),
    Column("lending_limit_gpus", "float64", "most it may lend, NaN: unlimited"),
    Column("first_seen_ts", "int64", "first instant the quota was seen"),
    Column("last_seen_ts", "int64", "last instant the quota was seen"),
)

#: One row per Kueue Workload or Volcano PodGroup asking for GPUs.
SCHED_WORKLOAD_COLUMNS: tuple[Column, ...] = (
    Column("cluster", "string", "cluster name"),
    Column("kind", "string", "kueue (Workload) or volcano (PodGroup)"),
    Column("namespace", "string", "namespace"),
    Column("name", "string", "Workload or PodGroup name"),
    Column("queue", "string", "ClusterQueue or Volcano queue, <NA>: unknown"),
    Column("flavor", "string", "flavor assigned at admission, <NA>: none yet"),
    Column("owner_kind", "string", "the owner its pods carry (Job, JobSet, ...)"),
    Column("owner_name", "string", "that owner's name"),
    Column("gpu_resource", "string", "nvidia.com/gpu or a MIG resource"),
    Column("gpus_requested", "float64", "devices asked for: Σ pod set count × per pod"),
    Column("pod_count", "int64", "pods asked for: Σ pod set count (Volcano: minMember)"),
    Column("state", "string", "pending, admitted, finished or evicted"),
    Column("created_ts", "Int64", "creation instant"),
    Column("admitted_ts", "Int64", "admission instant, <NA>: not admitted"),
    Column("finished_ts", "Int64", "finish instant, <NA>: not finished"),
    Column("evictions", "int64", "times evicted (preempted)"),
    Column("last_seen_ts", "int64", "last instant the API listed it"),
)


def empty_frame(columns: tuple[Column, ...]) -> pd.DataFrame:
    """An empty frame with the contract's columns and dtypes."""
    return pd.DataFrame({c.name: pd.Series(dtype=c.dtype) for c in columns})


def conform(frame: pd.DataFrame, columns: tuple[Column, ...]) -> pd.DataFrame:
    """The frame's contract columns in contract order, cast to the contract dtypes."""
    missing = [c.name for c in columns if c.name not in frame.columns]
    if missing:
        raise ValueError(f"frame lacks columns {missing}")
    return frame.astype({c.name: c.dtype for c in columns})[[c.name for c in columns]]
