"""The fleet dashboard's Scheduling row: Kueue GPU quota against usage per ClusterQueue,
pending workloads and admission wait, free GPUs against the largest request that waits, and
stalled gangs. Each panel reads the recording rules of
:mod:`gpuwatch.alerts.recording_scheduling`, so a panel and its alert agree.

The panels are empty (no data, never 0) where Kueue's metrics or kube-state-metrics are not
scraped.
"""

from __future__ import annotations

from gpuwatch.alerts.definitions import AlertTable, span_text
from gpuwatch.alerts.grafana_model import Query, Row
from gpuwatch.alerts.grafana_panels import Scope, series, table
from gpuwatch.alerts.recording_scheduling import (
    ADMISSION_WAIT_WINDOW,
    CLUSTER_GPUS_FREE,
    GANG_GPUS_RUNNING,
    GANG_LABELS,
    GANG_PODS_STALLED,
    KUEUE_ADMISSION_WAIT_P90,
    KUEUE_PENDING,
    KUEUE_QUOTA,
    KUEUE_QUOTA_IDLE,
    KUEUE_USAGE,
    NODE_GPUS_FREE_MAX,
    POD_GPUS_UNSCHEDULED,
)

#: Titles of the row's panels (the live dashboard test lets them be empty without Kueue).
QUOTA_TITLE = "GPU quota and usage per ClusterQueue"
PENDING_TITLE = "Pending workloads per ClusterQueue"
WAIT_TITLE = f"Admission wait, p90 over {ADMISSION_WAIT_WINDOW}"
FREE_TITLE = "Free GPUs vs the largest unschedulable request"
STALLED_TITLE = "Stalled gangs"
TITLES = (QUOTA_TITLE, PENDING_TITLE, WAIT_TITLE, FREE_TITLE, STALLED_TITLE)


def _per_queue(scope: Scope, record: str) -> str:
    return (
        f"sum by ({scope.by('cluster_queue', 'resource')}) ({scope.sel(record, namespace=False)})"
    )


def _quota(scope: Scope) -> tuple[Query, ...]:
    legend = scope.legend("cluster_queue", "resource")
    return (
        Query(_per_queue(scope, KUEUE_QUOTA), f"{legend} quota"),
        Query(_per_queue(scope, KUEUE_USAGE), f"{legend} used"),
        Query(_per_queue(scope, KUEUE_QUOTA_IDLE), f"{legend} idle"),
    )


def _free(scope: Scope) -> tuple[Query, ...]:
    legend = scope.legend("resource")
    per_resource = scope.by("resource")
    largest = f"max by ({per_resource}) ({scope.sel(POD_GPUS_UNSCHEDULED)})"
    return (
        Query(scope.sel(CLUSTER_GPUS_FREE, namespace=False), f"{legend} free in all"),
        Query(scope.sel(NODE_GPUS_FREE_MAX, namespace=False), f"{legend} most free on one node"),
        Query(largest, f"{legend} largest unschedulable request"),
    )


def _stalled(scope: Scope) -> str:
    gang = scope.by("namespace", *GANG_LABELS)
    return f"{scope.sel(GANG_GPUS_RUNNING)} > 0\nand on ({gang})\n{scope.sel(GANG_PODS_STALLED)}"


def scheduling_row(scope: Scope, t: AlertTable) -> Row:
    """The Scheduling row (alerts GPUQuotaIdleWhilePending, GPUCapacityFragmented,
    GPUGangStalled)."""
    stall = span_text(int(t.gang_stalled.threshold))
    legend = scope.legend("cluster_queue")
    return Row(
        "Scheduling",
        (
            series(
                QUOTA_TITLE,
                _quota(scope),
                "Kueue nominal GPU quota, usage and the quota left unused, per ClusterQueue "
                "and GPU resource (needs metrics.enableClusterQueueResources in Kueue); unused "
                "quota while its cohort has work pending raises GPUQuotaIdleWhilePending.",
            ),
            series(
                PENDING_TITLE,
                (Query(scope.sel(KUEUE_PENDING, namespace=False), legend),),
                "Workloads Kueue has not admitted yet (active and inadmissible).",
            ),
            series(
                WAIT_TITLE,
                (Query(scope.sel(KUEUE_ADMISSION_WAIT_P90, namespace=False), legend),),
                "90th percentile of the time from a workload's creation (or requeue) to its "
                "admission, from kueue_admission_wait_time_seconds; informational.",
                unit="s",
            ),
            series(
                FREE_TITLE,
                _free(scope),
                "GPUs no Running or Pending pod requests on schedulable, Ready nodes, in all "
                "and on the best node, against the largest request the scheduler could not "
                "place: a request above the best node but within the total is fragmentation "
                "(GPUCapacityFragmented).",
            ),
            table(
                STALLED_TITLE,
                (Query(_stalled(scope), "GPUs held"),),
                "Gangs whose running pods hold GPUs while one of their pods has been Pending "
                f"for more than {stall} (GPUGangStalled); empty while none is.",
            ),
        ),
    )
