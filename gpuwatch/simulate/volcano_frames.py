"""The simulated fleet's Volcano Queues and PodGroups over a window, as the store's rows.

As ``gpuwatch collect`` stores them from :mod:`kube_volcano`'s objects
(``gpuwatch.collectors.volcano_parse``): a Queue with GPUs is one ``queue_flavors`` row (kind
``volcano``, flavor ``""``, nominal = ``deserved``, borrowing limit = ``capability`` −
``deserved``, cohort ``root``, no GPU model); a PodGroup one ``sched_workloads`` row in its state
at the window's end, without a finish time (Volcano records none), last seen when it was deleted
or at the window's end.
"""

from __future__ import annotations

from typing import Any

from gpuwatch.simulate.fleet import Fleet
from gpuwatch.simulate.kube_volcano import POD_GROUP_TTL_S, gang_runs
from gpuwatch.simulate.volcano_decl import GPU, QUEUES, VOLCANO_CLUSTER

#: Volcano's state of a PodGroup phase (``gpuwatch.domain.scheduling``).
_STATES = {"Inqueue": "pending", "Running": "admitted", "Completed": "finished"}


def volcano_quota_rows(fleet: Fleet, start_ts: int, end_ts: int) -> list[dict[str, Any]]:
    """One row per Queue with GPUs, seen over the whole window."""
    if VOLCANO_CLUSTER not in fleet.clusters:
        return []
    rows = []
    for queue in QUEUES:
        if queue.deserved_gpus is None and queue.capability_gpus is None:
            continue
        nominal = queue.deserved_gpus if queue.deserved_gpus is not None else queue.capability_gpus
        borrowing = (
            None if queue.capability_gpus is None else float(queue.capability_gpus - (nominal or 0))
        )
        rows.append(
            {
                "cluster": VOLCANO_CLUSTER,
                "kind": "volcano",
                "queue": queue.name,
                "cohort": "root",
                "flavor": "",
                "gpu_resource": GPU,
                "gpu_model": None,
                "nominal_gpus": float(nominal or 0),
                "borrowing_limit_gpus": borrowing,
                "lending_limit_gpus": None,
                "first_seen_ts": start_ts,
                "last_seen_ts": end_ts,
            }
        )
    return rows


def volcano_workload_rows(fleet: Fleet, start_ts: int, end_ts: int) -> list[dict[str, Any]]:
    """One row per PodGroup created before ``end_ts`` whose gang had not finished by
    ``start_ts``, as seen at ``end_ts``."""
    rows = []
    for run in gang_runs(fleet, start_ts, end_ts):
        state = _STATES[run.phase_at(end_ts - 1)]
        rows.append(
            {
                "cluster": run.spec.cluster,
                "kind": "volcano",
                "namespace": run.spec.namespace,
                "name": run.name,
                "queue": run.queue,
                "flavor": None,
                "owner_kind": "PodGroup",
                "owner_name": run.name,
                "gpu_resource": GPU,
                "gpus_requested": float(run.gpus),
                "pod_count": len(run.spec.pods),
                "state": state,
                "created_ts": run.created_ts,
                "admitted_ts": run.started_ts if state != "pending" else None,
                "finished_ts": None,
                "evictions": 0,
                "last_seen_ts": min(end_ts, run.finished_ts + POD_GROUP_TTL_S),
                "uid": run.uid,
            }
        )
    return rows
