"""How the simulated fleet's Volcano is set up: its Queues, and how a gang goes through it.

Plain declarations (no imports from the rest of the simulator): :mod:`layout_queues` names the
workload Volcano schedules, and :mod:`kube_volcano` turns both into the objects
``scheduling.volcano.sh/v1beta1`` serves and the rows the demo store holds.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Where Volcano runs (the only cluster whose API serves ``scheduling.volcano.sh``).
VOLCANO_CLUSTER = "research-eu"
GPU = "nvidia.com/gpu"
SCHEDULER_NAME = "volcano"
#: Volcano's resources the simulated API serves, by plural.
VOLCANO_RESOURCES = ("queues", "podgroups")


@dataclass(frozen=True)
class VolcanoDecl:
    """A gang Volcano schedules: plain pods with ``schedulerName: volcano``, annotated with
    their PodGroup (one per cycle, ``minMember`` = every pod), submitted to ``queue``."""

    queue: str


@dataclass(frozen=True)
class VolcanoQueueDecl:
    """A Queue; GPUs None are not set in its ``spec``. Without GPUs it has no quota."""

    name: str
    weight: int = 1
    capability_gpus: int | None = None
    deserved_gpus: int | None = None
    reclaimable: bool = True


#: ``root`` and ``default`` exist in every Volcano install (v1.10 and later create ``root``);
#: ``research-batch`` has the 4 L4 of the node its gang runs on as capability and deserved.
QUEUES = (
    VolcanoQueueDecl("root", reclaimable=False),
    VolcanoQueueDecl("default"),
    VolcanoQueueDecl("research-batch", capability_gpus=4, deserved_gpus=4, reclaimable=False),
)
