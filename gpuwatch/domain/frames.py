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

#: One row per GPU unit known in the window (for capacity and coverage).
GPU_COLUMNS: tuple[Column, ...] = (
    Column("cluster", "string", "cluster name"),
    Column("node", "string", "node name"),
    Column("gpu_id", "int64", "store id of the GPU unit"),
    Column("gpu_uuid", "string", "physical GPU UUID"),
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


def empty_frame(columns: tuple[Column, ...]) -> pd.DataFrame:
    """An empty frame with the contract's columns and dtypes."""
    return pd.DataFrame({c.name: pd.Series(dtype=c.dtype) for c in columns})


def conform(frame: pd.DataFrame, columns: tuple[Column, ...]) -> pd.DataFrame:
    """The frame's contract columns in contract order, cast to the contract dtypes."""
    missing = [c.name for c in columns if c.name not in frame.columns]
    if missing:
        raise ValueError(f"frame lacks columns {missing}")
    return frame.astype({c.name: c.dtype for c in columns})[[c.name for c in columns]]
