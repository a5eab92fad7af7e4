"""Contract frames from plain records, with defaults for the columns left out.

For examples, tests and simulations: ``samples_frame([{"gpu_id": 1, "ts": 0, ...}])`` returns a
frame with every column of :data:`gpuwatch.domain.frames.SAMPLE_COLUMNS` in contract dtypes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pandas as pd

from gpuwatch.domain.allocation import DEVICE_PLUGIN, unit_mode
from gpuwatch.domain.frames import (
    GPU_COLUMNS,
    NODE_COLUMNS,
    POD_COLUMNS,
    SAMPLE_COLUMNS,
    Column,
    conform,
    empty_frame,
)

Record = Mapping[str, Any]
_NA: Any = pd.NA


def _mode(record: Record) -> str:
    return unit_mode(None, record.get("mig_profile"), record.get("timeslice_replicas", 1))


_SAMPLE_DEFAULTS: dict[str, Callable[[Record], Any]] = {
    "cluster": lambda r: "c1",
    "node": lambda r: "n1",
    "gpu_uuid": lambda r: f"GPU-{r['gpu_id']}",
    "mig_profile": lambda r: _NA,
    "slot": lambda r: 0,
    "timeslice_replicas": lambda r: 1,
    "gpu_model": lambda r: "NVIDIA A100-SXM4-80GB",
    "capacity_type": lambda r: "on_demand",
    "step_s": lambda r: 60,
    "pod_id": lambda r: _NA,
    "namespace": lambda r: _NA,
    "pod": lambda r: _NA,
    "workload_kind": lambda r: "Pod" if _has(r, "pod") else _NA,
    "workload": lambda r: r["pod"] if _has(r, "pod") else _NA,
    "team": lambda r: _NA,
    "pod_gpu_count": lambda r: _NA,
    "attribution": lambda r: "pod" if _has(r, "pod") else _NA,
    "allocation": _mode,
    "util_ratio": lambda r: float("nan"),
    "util_signal": lambda r: "prof_gr_engine_active" if _has(r, "util_ratio") else _NA,
    "fb_used_mib": lambda r: float("nan"),
    "fb_total_mib": lambda r: float("nan"),
    "power_w": lambda r: float("nan"),
    "temp_c": lambda r: float("nan"),
    "xid": lambda r: 0,
}

_POD_DEFAULTS: dict[str, Callable[[Record], Any]] = {
    "cluster": lambda r: "c1",
    "namespace": lambda r: "default",
    "node": lambda r: "n1",
    "phase": lambda r: "Running",
    "workload_kind": lambda r: "Pod",
    "workload": lambda r: r["pod"],
    "team": lambda r: "unassigned",
    "gpu_resource": lambda r: "nvidia.com/gpu",
    "gpu_count": lambda r: 1,
    "created_ts": lambda r: r.get("started_ts", _NA),
    "started_ts": lambda r: _NA,
    "finished_ts": lambda r: _NA,
    "dcgm_only": lambda r: False,
    "allocation": lambda r: _NA,
    "queue": lambda r: _NA,
    "gang_kind": lambda r: _NA,
    "gang_name": lambda r: _NA,
    "gang_size": lambda r: _NA,
}

_GPU_DEFAULTS: dict[str, Callable[[Record], Any]] = {
    "cluster": lambda r: "c1",
    "node": lambda r: "n1",
    "gpu_uuid": lambda r: f"GPU-{r['gpu_id']}",
    "mig_gi_id": lambda r: -1,
    "mig_profile": lambda r: _NA,
    "slot": lambda r: 0,
    "timeslice_replicas": lambda r: 1,
    "gpu_model": lambda r: "NVIDIA A100-SXM4-80GB",
    "capacity_type": lambda r: "on_demand",
    "allocation": _mode,
    "memory_total_mib": lambda r: float("nan"),
}

_NODE_DEFAULTS: dict[str, Callable[[Record], Any]] = {
    "gpu_model": lambda r: "NVIDIA A100-SXM4-80GB",
    "gpu_count": lambda r: 1,
    "gpu_memory_mib": lambda r: _NA,
    "capacity_type": lambda r: "on_demand",
    "instance_type": lambda r: _NA,
    "mig_capable": lambda r: False,
    "mig_strategy": lambda r: _NA,
    "timeslice_replicas": lambda r: 1,
    "cluster": lambda r: "c1",
    "provider": lambda r: _NA,
    "gpu_sharing": lambda r: DEVICE_PLUGIN,
}


def _has(record: Record, key: str) -> bool:
    value = record.get(key)
    return value is not None and value is not _NA and not pd.isna(value)


def _frame(
    records: Iterable[Record],
    columns: tuple[Column, ...],
    defaults: Mapping[str, Callable[[Record], Any]],
) -> pd.DataFrame:
    rows = []
    for record in records:
        row = dict(record)
        for name, default in defaults.items():
            if name not in row:
                row[name] = default(record)
        rows.append(row)
    if not rows:
        return empty_frame(columns)
    return conform(pd.DataFrame(rows), columns)


def samples_frame(records: Iterable[Record]) -> pd.DataFrame:
    """Samples; each record needs ``gpu_id`` and ``ts``."""
    return _frame(records, SAMPLE_COLUMNS, _SAMPLE_DEFAULTS)


def pods_frame(records: Iterable[Record]) -> pd.DataFrame:
    """Pods; each record needs ``pod_id`` and ``pod``."""
    return _frame(records, POD_COLUMNS, _POD_DEFAULTS)


def gpus_frame(records: Iterable[Record]) -> pd.DataFrame:
    """GPU units; each record needs ``gpu_id``, ``first_seen_ts`` and ``last_seen_ts``."""
    return _frame(records, GPU_COLUMNS, _GPU_DEFAULTS)


def nodes_frame(records: Iterable[Record]) -> pd.DataFrame:
    """Nodes; each record needs ``node``."""
    return _frame(records, NODE_COLUMNS, _NODE_DEFAULTS)
