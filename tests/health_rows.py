"""Hourly health roll-up rows built by hand, and the worked example of
docs/cost-model.md#health-and-efficiency: two nodes, four GPUs, three hours."""

from __future__ import annotations

from typing import Any

import pandas as pd

from gpuwatch.domain.frames import HEALTH_COLUMNS, conform
from gpuwatch.domain.pricing import PriceBook

H0 = 1_763_337_600  # 2025-11-17 00:00 UTC, a Monday
H1 = H0 + 3600
H2 = H0 + 7200
END = H0 + 3 * 3600
A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"
T4 = "Tesla T4"
#: n1's GPUs cost $4 an hour, n2's $3.
PRICES = PriceBook(2.0, 0.6, {}, {"n1": 4.0, "n2": 3.0})

_UNITS: dict[str, dict[str, Any]] = {
    "g1": {"gpu_id": 1, "node": "n1", "gpu_uuid": "GPU-1", "gpu_model": A100},
    "g2": {"gpu_id": 2, "node": "n1", "gpu_uuid": "GPU-2", "gpu_model": A100},
    "g3": {"gpu_id": 3, "node": "n2", "gpu_uuid": "GPU-3", "gpu_model": H100},
    # GPU-4 is time-sliced in two slots (each 1/2 of the GPU).
    "g4s0": {"gpu_id": 4, "node": "n2", "gpu_uuid": "GPU-4", "gpu_model": T4, "slot": 0},
    "g4s1": {"gpu_id": 5, "node": "n2", "gpu_uuid": "GPU-4", "gpu_model": T4, "slot": 1},
}
_PODS: dict[str, dict[str, Any]] = {
    "train-0": {"pod_id": 1, "namespace": "ml", "workload_kind": "Job", "workload": "train"},
    "serve-a": {
        "pod_id": 2,
        "namespace": "web",
        "workload_kind": "Deployment",
        "workload": "serve",
    },
    "batch-0": {"pod_id": 3, "namespace": "ml", "workload_kind": "Job", "workload": "batch"},
    "nb-0": {
        "pod_id": 4,
        "namespace": "lab",
        "workload_kind": "Deployment",
        "workload": "notebook",
    },
    "dcgm-exporter-x": {
        "pod_id": 5,
        "namespace": "gpu-operator",
        "workload_kind": "DaemonSet",
        "workload": "dcgm-exporter",
        "pod_gpu_count": 0,
    },
}
_DEFAULTS: dict[str, Any] = {
    "cluster": "c1",
    "mig_profile": pd.NA,
    "slot": 0,
    "timeslice_replicas": 1,
    "capacity_type": "on_demand",
    "step_s": 3600,
    "pod_id": pd.NA,
    "namespace": pd.NA,
    "pod": pd.NA,
    "workload_kind": pd.NA,
    "workload": pd.NA,
    "team": pd.NA,
    "pod_gpu_count": pd.NA,
    "attribution": pd.NA,
    "allocation": "device-plugin",
    "data_s": 3600.0,
}
_ZERO = [c.name for c in HEALTH_COLUMNS if c.dtype == "float64" and c.name.endswith("_s")]
_NAN = ["sm_clock_mhz", "pcie_bytes_per_s", "nvlink_bytes_per_s"]
_NULL = [c.name for c in HEALTH_COLUMNS if c.dtype == "Int64" and c.name != "pod_id"]


def hrow(unit: str, ts: int, pod: str | None = None, **values: Any) -> dict[str, Any]:
    """One roll-up row of ``unit`` in the hour ``ts`` held by ``pod`` (None: unheld); readings
    default to none (0 seconds, no counts), ``data_s`` to the whole hour."""
    row: dict[str, Any] = {**_DEFAULTS, **{n: 0.0 for n in _ZERO}, **{n: pd.NA for n in _NULL}}
    row.update({n: float("nan") for n in _NAN})
    row["data_s"] = 3600.0
    row.update(_UNITS[unit])
    if unit.startswith("g4"):
        row.update(timeslice_replicas=2, allocation="time-slice")
    if pod is not None:
        facts = {
            "team": "team-" + _PODS[pod]["namespace"],
            "pod_gpu_count": 1,
            "attribution": "pod",
        }
        row.update(facts, pod=pod, **_PODS[pod])
    row.update(ts=ts, first_ts=ts, last_ts=ts + 3540)
    row.update(values)
    row["step_s"] = int(row["data_s"])
    return row


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """HEALTH_COLUMNS frame of hand-built rows."""
    return conform(pd.DataFrame(rows), HEALTH_COLUMNS)


def _busy(
    util: float,
    sm: float,
    tensor: float,
    dram: float,
    low_sm: bool,
    no_tensor: bool,
    data: float = 3600.0,
) -> dict[str, float]:
    return {
        "util_s": util * data,
        "util_data_s": data,
        "sm_active_s": sm * data,
        "sm_data_s": data,
        "tensor_active_s": tensor * data,
        "tensor_data_s": data,
        "dram_active_s": dram * data,
        "dram_data_s": data,
        "busy_sm_data_s": data,
        "busy_low_sm_s": data if low_sm else 0.0,
        "busy_tensor_data_s": data,
        "busy_no_tensor_s": data if no_tensor else 0.0,
    }


def example() -> pd.DataFrame:
    """The worked example (docs/cost-model.md#health-and-efficiency)."""
    train = _busy(0.7, 0.2, 0.05, 0.1, low_sm=True, no_tensor=False)
    serve = _busy(0.8, 0.1, 0.0, 0.6, low_sm=True, no_tensor=True)
    batch = _busy(0.9, 0.6, 0.0, 0.3, low_sm=False, no_tensor=True)
    clock = {"clock_data_s": 3600.0}
    rows = [
        # GPU-1: XID 79 at 00:15 of the second hour, failing from then on.
        hrow("g1", H0, "train-0", **train),
        hrow("g1", H1, "train-0", **train, fail_first_ts=H1 + 900, fail_xid=79),
        hrow("g1", H2, "train-0", **train),
        # GPU-2: thermal throttling for half of the first hour (1/6 of its clock data).
        hrow("g2", H0, "serve-a", **serve, **clock, throttled_s=1800.0, thermal_s=1800.0),
        hrow("g2", H1, "serve-a", **serve, **clock),
        hrow("g2", H2, "serve-a", **serve, **clock),
        # GPU-3: the exporter's own pod (no GPU requested) first, then a batch job, XID 13.
        hrow("g3", H0, "dcgm-exporter-x"),
        hrow("g3", H1, "batch-0", **batch),
        hrow("g3", H2, "batch-0", **batch, app_xid=13),
        # GPU-4: slot 0 held by a notebook (utilization from GPU_UTIL only), slot 1 free;
        # 12 correctable ECC errors in the second hour, reported on both slots.
        *[hrow("g4s0", h, "nb-0", util_s=2880.0, util_data_s=3600.0) for h in (H0, H1, H2)],
        *[hrow("g4s1", h) for h in (H0, H2)],
        hrow("g4s1", H1, ecc_sbe=12),
    ]
    rows[10]["ecc_sbe"] = 12
    return frame(rows)


def samples_of(health: pd.DataFrame) -> pd.DataFrame:
    """The hourly samples the health rows stand for: one per row, its utilization the row's
    mean (0 where it has none), so that costing and health agree on the workloads."""
    from gpuwatch.analytics.build import samples_frame

    identity = [name for name in health.columns if name in _SAMPLE_IDENTITY]
    records = []
    for row in health.to_dict("records"):
        record = {name: row[name] for name in identity}
        util_data = float(row["util_data_s"])
        record["util_ratio"] = float(row["util_s"]) / util_data if util_data > 0 else 0.0
        records.append(record)
    return samples_frame(records)


_SAMPLE_IDENTITY = frozenset(
    {"cluster", "node", "gpu_id", "gpu_uuid", "mig_profile", "slot", "timeslice_replicas",
     "gpu_model", "capacity_type", "ts", "step_s", "pod_id", "namespace", "pod", "workload_kind",
     "workload", "team", "pod_gpu_count", "attribution", "allocation"}
)  # fmt: skip
