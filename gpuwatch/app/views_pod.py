"""What the Pod page shows: one pod (every incarnation of its name in its namespace), pure
functions of a snapshot and the filters."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.views import equals
from gpuwatch.app.views_gpu import workload_rows

#: The columns naming a pod, in the pods table and the hourly rows alike.
POD = ("cluster", "namespace", "pod")


@dataclass(frozen=True)
class PodKey:
    """A pod by name: a pod recreated under the same name (a StatefulSet's) is the same page."""

    cluster: str
    namespace: str
    name: str

    def matches(self, frame: pd.DataFrame) -> np.ndarray:
        mask = np.ones(len(frame), dtype=bool)
        for column, value in zip(POD, (self.cluster, self.namespace, self.name), strict=True):
            mask &= equals(frame[column], value)
        return mask


def pod_records(snap: Snapshot, key: PodKey) -> pd.DataFrame:
    """The pod's records as last seen in the Kubernetes API, newest first."""
    pods = snap.pods[key.matches(snap.pods)]
    return pods.sort_values("created_ts", ascending=False, kind="stable").reset_index(drop=True)


@dataclass(frozen=True)
class PodCost:
    """What the pod's GPUs cost in the window (the cost model's sums of its hourly rows)."""

    allocated_gpu_hours: float
    used_gpu_hours: float
    allocated_cost_usd: float
    idle_cost_usd: float

    @property
    def efficiency_pct(self) -> float:
        held = self.allocated_gpu_hours
        return 100.0 * self.used_gpu_hours / held if held > 0 else float("nan")


def pod_cost(snap: Snapshot, f: Filters, key: PodKey) -> PodCost:
    rows = workload_rows(snap, f, key)
    names = (c.ALLOCATED_GPU_HOURS, c.USED_GPU_HOURS, c.ALLOCATED_COST_USD, c.IDLE_COST_USD)
    return PodCost(*(float(rows[name].sum()) for name in names))


def pod_href(f: Filters, cluster: object, namespace: object, name: object) -> str:
    """The Pod page of a pod, the window and model filters kept."""
    base = f.with_(cluster=str(cluster), namespace=str(namespace), team=None)
    return base.href("/pod", name=str(name))
