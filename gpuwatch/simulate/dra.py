"""The ResourceClaims of a simulated fleet: which pods hold which DRA devices, and when.

A pod of a DRA workload (``WorkloadSpec.allocation == "dra"``) holds its units through one
claim: its own, made from the workload's ResourceClaimTemplate (named as the resourceclaim
controller names it), or the workload's named claim that all its pods share (its device is
modelled as one slot unit per pod, as time-slice slots are). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from gpuwatch.domain.allocation import DRA
from gpuwatch.simulate.dra_names import DRIVER, REQUEST, claim_uid, template_claim_name
from gpuwatch.simulate.fleet import Fleet, GpuUnit, WorkloadSpec
from gpuwatch.simulate.pods import PodInstance

DRA_DEVICE_COLUMNS = [
    "cluster",
    "claim_namespace",
    "claim_name",
    "claim_uid",
    "request",
    "driver",
    "pool",
    "device",
    "node",
    "gpu_uuid",
    "mig_profile",
    "product",
    "memory_mib",
    "consumers",
    "first_seen_ts",
    "last_seen_ts",
]


@dataclass(frozen=True)
class Claim:
    """A ResourceClaim: ``devices`` are unit indices, one per allocated device (slot 0 of a
    shared device); ``consumers`` the pods it is reserved for; ``owner`` the pod a template
    claim was made for (None for a named claim)."""

    cluster: str
    namespace: str
    name: str
    uid: str
    workload: WorkloadSpec
    devices: tuple[int, ...]
    consumers: tuple[PodInstance, ...]
    owner: PodInstance | None


def is_dra(fleet: Fleet, inst: PodInstance) -> bool:
    return fleet.workloads[inst.workload].allocation == DRA


def claim_name(fleet: Fleet, inst: PodInstance) -> str:
    """The name of the claim through which a DRA pod holds its units."""
    spec = fleet.workloads[inst.workload]
    return spec.claim or template_claim_name(fleet.seed, inst.name, inst.uid)


def device_units(fleet: Fleet, units: tuple[int, ...]) -> tuple[int, ...]:
    """One unit per device: a shared device's slots stand for one device (its slot 0)."""
    return tuple(dict.fromkeys(_slot0(fleet, i) for i in units))


def _slot0(fleet: Fleet, index: int) -> int:
    unit = fleet.units[index]
    return index - unit.slot


def claims_for(fleet: Fleet, instances: list[PodInstance], running: set[str]) -> list[Claim]:
    """The claims of the DRA pods in ``instances``; ``running`` (pod uids) are those the claims
    are reserved for. A named claim is listed once, with every running pod that shares it."""
    claims: dict[tuple[str, str, str], Claim] = {}
    for inst in instances:
        if not is_dra(fleet, inst):
            continue
        spec = fleet.workloads[inst.workload]
        name = claim_name(fleet, inst)
        key = (inst.cluster, inst.namespace, name)
        held = (inst,) if inst.uid in running else ()
        found = claims.get(key)
        if found is not None:
            claims[key] = replace(found, consumers=found.consumers + held)
            continue
        claims[key] = Claim(
            cluster=inst.cluster,
            namespace=inst.namespace,
            name=name,
            uid=claim_uid(fleet.seed, inst.cluster, inst.namespace, name),
            workload=spec,
            devices=device_units(fleet, inst.units),
            consumers=held,
            owner=None if spec.claim else inst,
        )
    return list(claims.values())


def dra_devices_frame(
    fleet: Fleet, instances: list[PodInstance], start_ts: int, end_ts: int
) -> pd.DataFrame:
    """One row per (claim, device) allocated during ``[start_ts, end_ts)``, as last seen: the
    consumers are the pods that held it last, the span the time any pod held it."""
    held = [
        i
        for i in instances
        if is_dra(fleet, i) and i.started_ts < end_ts and i.finished_ts > start_ts
    ]
    by_claim: dict[tuple[str, str, str], list[PodInstance]] = {}
    for inst in held:
        by_claim.setdefault((inst.cluster, inst.namespace, claim_name(fleet, inst)), []).append(
            inst
        )
    latest = set()
    for pods in by_claim.values():
        newest = max(p.started_ts for p in pods)
        latest |= {p.uid for p in pods if p.started_ts == newest}
    rows = []
    for claim in claims_for(fleet, held, latest):
        pods = by_claim[claim.cluster, claim.namespace, claim.name]
        first = max(start_ts, min(p.started_ts for p in pods))
        last = min(end_ts, max(p.finished_ts for p in pods))
        for index in claim.devices:
            row = _device_row(fleet, claim, fleet.units[index])
            rows.append(row | {"first_seen_ts": first, "last_seen_ts": last})
    return pd.DataFrame(rows, columns=DRA_DEVICE_COLUMNS)


def _device_row(fleet: Fleet, claim: Claim, unit: GpuUnit) -> dict[str, object]:
    node = fleet.node(unit.cluster, unit.node)
    return {
        "cluster": claim.cluster,
        "claim_namespace": claim.namespace,
        "claim_name": claim.name,
        "claim_uid": claim.uid,
        "request": REQUEST,
        "driver": DRIVER,
        "pool": node.name,
        "device": unit.dra_device,
        "node": node.name,
        "gpu_uuid": unit.uuid,
        "mig_profile": unit.mig_profile,
        "product": unit.model_name,
        "memory_mib": unit.memory_total_mib,
        "consumers": [[c.namespace, c.name, c.uid] for c in claim.consumers],
    }
