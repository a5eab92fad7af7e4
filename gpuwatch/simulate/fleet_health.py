"""Place the declared health and efficiency scenarios (``layout_health``) on a built fleet.

Nodes get what their exporter reports (:class:`~gpuwatch.simulate.layout_health.NodeHealth`),
the failing GPU and the noisy GPUs their events, workloads their efficiency and daily XID. The
scenarios name nodes by their ``(cluster, alias)``; a fleet copied from a built one (the
benchmarks' scaled fleets) keeps them on every copy.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gpuwatch.simulate.layout import MODELS
from gpuwatch.simulate.layout_health import (
    APP_XID,
    ECC_OFF_MODELS,
    EFFICIENCY,
    FAILING_GPU,
    FAILURE,
    LEGACY_CLOCK_NODE,
    NOISE,
    NVLINK_MODELS,
    ROW_REMAP_MODELS,
    THROTTLING_NODE,
    NodeHealth,
)

if TYPE_CHECKING:
    from gpuwatch.simulate.fleet import Fleet, GpuUnit, NodeSpec, WorkloadSpec

_MODEL_KEYS = {model.dcgm_name: key for key, model in MODELS.items()}


def with_scenarios(fleet: Fleet) -> Fleet:
    """The fleet with every node's health facts and the declared scenarios placed."""
    nodes = tuple(replace(n, health=node_health(n)) for n in fleet.nodes)
    aliases = {(n.cluster, n.name): n.alias for n in nodes}
    units = tuple(_unit(u, aliases[u.cluster, u.node]) for u in fleet.units)
    workloads = tuple(_workload(w) for w in fleet.workloads)
    return replace(fleet, nodes=nodes, units=units, workloads=workloads)


def node_health(node: NodeSpec) -> NodeHealth:
    """What the node's exporter reports, from its GPU model and the named scenarios."""
    model = _MODEL_KEYS.get(node.gpu_model, "")
    where = (node.cluster, node.alias)
    return NodeHealth(
        ecc=model not in ECC_OFF_MODELS,
        nvlink=model in NVLINK_MODELS,
        row_remap=model in ROW_REMAP_MODELS,
        throttling=where == THROTTLING_NODE,
        legacy_clock_field=where == LEGACY_CLOCK_NODE,
    )


def _unit(unit: GpuUnit, alias: str) -> GpuUnit:
    where = (unit.cluster, alias, unit.gpu_index)
    failure = FAILURE if where == FAILING_GPU and unit.mig_gi_id < 0 else None
    noise = NOISE.get(where)
    if failure is None and noise is None:
        return unit
    return replace(unit, failure=failure, noise=noise)


def _workload(spec: WorkloadSpec) -> WorkloadSpec:
    efficiency = EFFICIENCY.get(spec.name, spec.efficiency)
    event = APP_XID if spec.name == APP_XID.workload else spec.xid_event
    return replace(spec, efficiency=efficiency, xid_event=event)
