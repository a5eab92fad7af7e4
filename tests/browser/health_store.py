"""A store with a failing GPU: a demo fleet whose health roll-up is replaced by hand-written
rows for one workload's GPUs over the last three hours of the data.

Every row: a whole hour of data, the engine 80 % active with SM 20 %, tensor 30 % and DRAM
10 % active (busy with low SM activity: input-bound), clock events read and none throttling.
The workload's first GPU reports XID 79 (fallen off the bus) half-way through the second hour:
it is failing for 0.5 + 1 = 1.5 GPU-hours held by the workload's pod, at the $4.00 per
GPU-hour its node is priced at in :func:`settings_for`: $6.00.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from gpuwatch.config import Settings
from gpuwatch.store import daily
from gpuwatch.store.engine import make_engine

WORKLOAD = ("prod-us-east", "llm-training", "Job", "llm-pretrain")
NODE_USD_PER_GPU_HOUR = 4.0
HOUR_S = 3600
_ROWS = """
SELECT h.hour_ts, h.gpu_id, h.pod_id, g.uuid, n.name
FROM gpu_samples_hourly h
JOIN pods p ON p.id = h.pod_id
JOIN clusters c ON c.id = p.cluster_id
JOIN gpus g ON g.id = h.gpu_id
JOIN nodes n ON n.id = g.node_id
WHERE c.name = ? AND p.namespace = ? AND p.workload_kind = ? AND p.workload_name = ?
  AND g.mig_gi_id = -1 AND g.timeslice_replicas = 1 AND h.hour_ts >= ?
ORDER BY h.gpu_id, h.hour_ts
"""
_ZERO = (
    "sm_occupancy_s", "sm_occupancy_data_s", "busy_no_tensor_s", "throttled_s", "thermal_s",
    "power_cap_s", "hw_slowdown_s", "sm_clock_n", "pcie_bytes_n", "nvlink_bytes_n",
)  # fmt: skip


@dataclass(frozen=True)
class FailingGpu:
    cluster: str
    node: str
    gpu_id: int
    gpu_uuid: str
    pod_id: int
    #: The XID 79 instant: half-way through the second of the three hours.
    fail_ts: int
    #: The three hours with rows, and how many rows were written.
    hours: tuple[int, int, int]
    rows: int


def _row(hour: int, gpu_id: int, pod_id: int) -> dict[str, int | float | None]:
    values: dict[str, int | float | None] = dict.fromkeys(_ZERO, 0)
    values |= {"hour_ts": hour, "gpu_id": gpu_id, "pod_id": pod_id, "data_s": HOUR_S}
    values |= {"first_ts": hour, "last_ts": hour + 2700, "util_s": 0.8 * HOUR_S}
    for name, ratio in (("util", 0.8), ("sm", 0.2), ("tensor", 0.3), ("dram", 0.1)):
        values[f"{name}_data_s"] = HOUR_S
        if name != "util":
            values[f"{name}_active_s"] = ratio * HOUR_S
    values |= {"busy_sm_data_s": HOUR_S, "busy_low_sm_s": HOUR_S, "busy_tensor_data_s": HOUR_S}
    values["clock_data_s"] = HOUR_S
    return values


def add_failing_gpu(path: Path) -> FailingGpu:
    """Replace the health roll-up of the demo store at ``path`` as the module says."""
    with closing(sqlite3.connect(path)) as conn, conn:
        (last,) = conn.execute("SELECT MAX(hour_ts) FROM gpu_samples_hourly").fetchone()
        hours = (last - 2 * HOUR_S, last - HOUR_S, last)
        found = conn.execute(_ROWS, (*WORKLOAD, hours[0])).fetchall()
        held = [r for r in found if r[0] in hours]
        by_gpu = {gpu: [r for r in held if r[1] == gpu] for gpu in sorted({r[1] for r in held})}
        gpu_id, rows = next((g, rs) for g, rs in by_gpu.items() if [r[0] for r in rs] == [*hours])
        conn.execute("DELETE FROM gpu_health_hourly")
        fail_ts = hours[1] + HOUR_S // 2
        for hour, gpu, pod, _, _ in held:
            values = _row(hour, gpu, pod)
            if gpu == gpu_id and hour == hours[1]:
                values |= {"fail_first_ts": fail_ts, "fail_xid": 79}
            names = ", ".join(values)
            marks = ", ".join(f":{n}" for n in values)
            conn.execute(f"INSERT INTO gpu_health_hourly ({names}) VALUES ({marks})", values)
        (cluster,) = conn.execute(
            "SELECT c.name FROM gpus g JOIN clusters c ON c.id = g.cluster_id WHERE g.id = ?",
            (gpu_id,),
        ).fetchone()
        (first,) = conn.execute("SELECT MIN(hour_ts) FROM gpu_samples_hourly").fetchone()
    # Every day's health rows changed: recorded as a writer of hourly rows records it (the
    # days' sums go), then the finished days built again, as the collector does after writing.
    engine = make_engine(f"sqlite:///{path}")
    with engine.begin() as sa_conn:
        daily.invalidate_range(sa_conn, first, last + HOUR_S)
    daily.build_pending(engine, last + HOUR_S)
    engine.dispose()
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    _, _, pod_id, uuid, node = rows[0]
    return FailingGpu(cluster, node, gpu_id, uuid, pod_id, fail_ts, hours, len(held))


def settings_for(gpu: FailingGpu) -> Settings:
    """Default settings, with the failing GPU's node priced at $4.00 per GPU-hour."""
    return Settings(pricing={"nodes": {gpu.node: NODE_USD_PER_GPU_HOUR}})
