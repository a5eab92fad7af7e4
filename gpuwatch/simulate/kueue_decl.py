"""How the simulated fleet's Kueue is set up: flavors, a cohort of ClusterQueues, LocalQueues.

Plain declarations (no imports from the rest of the simulator): :mod:`layout_queues` names
which workloads are submitted to which LocalQueue, and :mod:`kube_queues` turns both into the
objects Kueue's API serves and the rows the demo store holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: Where the queues live.
KUEUE_CLUSTER = "prod-us-east"
COHORT = "gpu-pool"
GPU = "nvidia.com/gpu"
#: Kueue's resources the simulated API serves, by plural.
QUEUE_RESOURCES = ("resourceflavors", "clusterqueues", "localqueues", "workloads")


@dataclass(frozen=True)
class KueueDecl:
    """How a workload goes through Kueue: submitted to ``local_queue`` in its namespace, as
    an indexed Job's Workload or (``pod_group``) as plain pods admitted together.

    ``queued_s``: the Workload waits that long without admission (its Job suspended, no pods)
    before its pods are created. ``stall_replicas`` start ``stall_s`` after the others (their
    GPUs are still held elsewhere), so the admitted gang runs part-placed meanwhile."""

    local_queue: str
    pod_group: bool = False
    queued_s: int = 0
    stall_replicas: tuple[int, ...] = ()
    stall_s: int = 0

    def start_delay_s(self, replica: int) -> int:
        """How long after the cycle's start pod ``replica`` starts."""
        return self.stall_s if replica in self.stall_replicas else 0


@dataclass(frozen=True)
class FlavorDecl:
    """A ResourceFlavor: the nodes of one GPU model (GPU Feature Discovery's product label)."""

    name: str
    gpu_product: str
    gpu_model: str
    node_labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def labels(self) -> dict[str, str]:
        """Its ``spec.nodeLabels`` (Kueue copies them into admitted pods' nodeSelector)."""
        return {"nvidia.com/gpu.product": self.gpu_product, **self.node_labels}


@dataclass(frozen=True)
class QuotaDecl:
    """GPUs of one flavor in a ClusterQueue; a limit None is unlimited."""

    flavor: str
    nominal_gpus: int
    borrowing_limit_gpus: int | None = None
    lending_limit_gpus: int | None = None


@dataclass(frozen=True)
class ClusterQueueDecl:
    name: str
    quotas: tuple[QuotaDecl, ...]
    cohort: str | None = COHORT


FLAVORS = (
    FlavorDecl(
        "h100",
        "NVIDIA-H100-80GB-HBM3",
        "NVIDIA H100 80GB HBM3",
        {"karpenter.sh/nodepool": "gpu-h100-batch"},
    ),
    FlavorDecl("l40s", "NVIDIA-L40S", "NVIDIA L40S"),
)

#: The cohort: training's H100s, research's H100s and L40S, inference's L40S. Together the
#: H100 quotas (40) exceed the batch pool (32 GPUs), so an admitted gang can wait for GPUs;
#: inference lends none of its L40S quota, so research's work beyond its own 4 waits unadmitted
#: while inference's quota sits idle.
CLUSTER_QUEUES = (
    ClusterQueueDecl("training", (QuotaDecl("h100", 32),)),
    ClusterQueueDecl("research", (QuotaDecl("h100", 8), QuotaDecl("l40s", 4))),
    ClusterQueueDecl("inference", (QuotaDecl("l40s", 8, lending_limit_gpus=0),)),
)

#: LocalQueues: (namespace, name, ClusterQueue), in the teams' namespaces.
LOCAL_QUEUES = (
    ("llm-training", "training", "training"),
    ("speech", "research", "research"),
    ("vision-prod", "inference", "inference"),
)


def cluster_queue_of(namespace: str, local_queue: str) -> str | None:
    """The ClusterQueue a LocalQueue feeds, None for an unknown LocalQueue."""
    for ns, name, cluster_queue in LOCAL_QUEUES:
        if (ns, name) == (namespace, local_queue):
            return cluster_queue
    return None


def flavor(name: str) -> FlavorDecl:
    return next(f for f in FLAVORS if f.name == name)


def queue_flavor(cluster_queue: str, gpu_product: str) -> str | None:
    """The flavor of ``cluster_queue`` whose nodes are of ``gpu_product``, None when none."""
    decl = next(q for q in CLUSTER_QUEUES if q.name == cluster_queue)
    for quota in decl.quotas:
        if flavor(quota.flavor).gpu_product == gpu_product:
            return quota.flavor
    return None
