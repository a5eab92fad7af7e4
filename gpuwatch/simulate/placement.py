"""Where a simulated workload's pods sit: the GPU units each pod holds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuwatch.domain.allocation import DRA
from gpuwatch.simulate.layout import WorkloadDecl

if TYPE_CHECKING:
    from gpuwatch.simulate.fleet import GpuUnit, NodeSpec


def place(
    decl: WorkloadDecl, nodes: list[NodeSpec], units: list[GpuUnit]
) -> tuple[tuple[int, ...], ...]:
    """Each pod's unit indices: consecutive candidates of one node (at most ``per_node`` pods
    there), nodes taken in order."""
    pods: list[tuple[int, ...]] = []
    for node in nodes:
        free = candidates(node, decl, units)[decl.first :]
        cap = len(pods) + (decl.per_node or decl.pods)
        while len(pods) < min(decl.pods, cap) and len(free) >= decl.gpus_per_pod:
            pods.append(tuple(free[: decl.gpus_per_pod]))
            free = free[decl.gpus_per_pod :]
    if len(pods) < decl.pods:
        raise ValueError(f"workload {decl.name!r} does not fit on nodes {decl.nodes}")
    return tuple(pods)


def candidates(node: NodeSpec, decl: WorkloadDecl, units: list[GpuUnit]) -> list[int]:
    """Unit indices a pod may take on ``node``: MIG instances of the profile, time-slice or MPS
    slots spread over the GPUs (slot 0 of every GPU first), or whole GPUs. On a DRA node a
    workload sharing a claim takes the slots of the shared device, others the other devices."""
    mine = [i for i, u in enumerate(units) if (u.cluster, u.node) == (node.cluster, node.name)]
    if decl.mig_profile is not None:
        return [i for i in mine if units[i].mig_profile == decl.mig_profile]
    if node.gpu_sharing == DRA:
        shared = [i for i in mine if units[i].timeslice_replicas > 1]
        return shared if decl.claim else [i for i in mine if i not in shared]
    return sorted(mine, key=lambda i: (units[i].slot, units[i].gpu_index))
