"""Scheduling waste: queues, quotas, gangs (docs/cost-model.md#scheduling).

Pure data: the label, annotation and API names gpuwatch reads queues and gangs from, the kinds
of gang, and the policy of when a gang counts as stalled. The collectors, the analytics, the
alert rules and the dashboard read these, so each name is defined once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: Kueue's API group and the versions read, best first (``v1beta2`` where served).
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")
#: Volcano's scheduling group and the version read.
VOLCANO_GROUP = "scheduling.volcano.sh"
VOLCANO_VERSIONS = ("v1beta1",)

#: The LocalQueue a pod or Job is submitted to (label on the Job, copied onto its pods).
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: Plain pods Kueue admits together as one Workload (a pod group).
KUEUE_POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
#: The pod group's size, on each of its pods.
KUEUE_POD_GROUP_SIZE_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
#: The PodGroup a pod belongs to under Volcano (and the scheduler-plugins coscheduling group).
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
#: The JobSet a pod belongs to.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"

GangKind = Literal["kueue", "volcano", "jobset", "job"]
#: Where a gang's identity comes from, most specific first: a pod that names several takes the
#: first (a JobSet's pods admitted by Kueue are one Kueue gang).
GANG_KINDS: tuple[GangKind, ...] = ("kueue", "volcano", "jobset", "job")

QueueKind = Literal["kueue", "volcano"]

WorkloadState = Literal["pending", "admitted", "finished", "evicted"]
#: Kueue Workload states, from its conditions (QuotaReserved/Admitted, Finished, Evicted).
WORKLOAD_STATES: tuple[WorkloadState, ...] = ("pending", "admitted", "finished", "evicted")

#: Default of ``scheduling.gang_stall_after``: a sibling Pending this long stalls its gang.
GANG_STALL_AFTER_S = 600


@dataclass(frozen=True)
class SchedulingPolicy:
    """When a gang is stalled (config section ``scheduling``)."""

    #: Seconds a pod of a gang must have been Pending before its running siblings' GPUs count
    #: as stalled (from that moment on, not back to its creation).
    gang_stall_after_s: int = GANG_STALL_AFTER_S
