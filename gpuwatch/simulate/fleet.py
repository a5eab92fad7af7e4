"""The simulated GPU fleet: clusters, nodes, GPU units, namespaces, workloads and outages.

``build_fleet(seed)`` turns the declarations in ``layout`` into concrete specs: node names, GPU
Feature Discovery labels, deterministic GPU UUIDs, MIG instances and time-slice slots, and the
units each workload's pods hold. Everything downstream (bulk frames, a live exporter, a fake API
server) is a pure function of this fleet and an instant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from gpuwatch.domain.mig import mig_fraction
from gpuwatch.simulate.layout import (
    CLUSTERS,
    EXPORTED_LABELS_NODE,
    INSTANCE_GPUS,
    MIG_FIRST_GI_ID,
    MIG_MEMORY_MIB,
    MODELS,
    NAMESPACES,
    NODES,
    OUTAGE,
    OUTAGE_NODE,
    WORKLOADS,
    ClusterDecl,
    ModelDecl,
    NodeDecl,
    WorkloadDecl,
)
from gpuwatch.simulate.noise import k8s_suffix, stable_hash, stable_unit, uuid_text
from gpuwatch.simulate.patterns import Pattern
from gpuwatch.simulate.schedule import Schedule

LABEL_STYLES = ("standard", "exported", "lowercase")
UTIL_SIGNALS = ("prof", "dev")
_GKE_ACCELERATORS = {
    "a100": "nvidia-a100-80gb",
    "h100": "nvidia-h100-80gb",
    "l4": "nvidia-l4",
    "t4": "nvidia-tesla-t4",
}


@dataclass(frozen=True)
class NodeSpec:
    """A GPU node. ``label_style`` says how its exporter's series are labelled: ``standard``,
    ``exported`` (scraped without honorLabels: ``exported_pod``/``exported_namespace``, with
    ``pod``/``namespace`` naming ``exporter_pod``) or ``lowercase`` (``hostname``/``uuid``).
    ``util_signal``: ``prof`` (DCGM_FI_PROF_GR_ENGINE_ACTIVE) or ``dev`` (DCGM_FI_DEV_GPU_UTIL)."""

    cluster: str
    name: str
    alias: str
    gpu_model: str
    gpu_count: int
    gpu_memory_mib: int
    capacity_type: str
    instance_type: str
    mig_capable: bool
    mig_strategy: str | None
    mig_config: str | None
    timeslice_replicas: int
    labels: Mapping[str, str]
    label_style: str
    util_signal: str
    exporter_pod: str
    driver_version: str
    temp_offset_c: float
    idle_w: float
    max_w: float


@dataclass(frozen=True)
class GpuUnit:
    """A sample unit: a whole GPU, a MIG instance (``mig_gi_id`` ≥ 0) or a time-slice slot.

    ``physical`` numbers the physical GPU across the fleet (units of one GPU are adjacent);
    ``share`` is the unit's fraction of that GPU's compute; ``key`` seeds its noise."""

    cluster: str
    node: str
    uuid: str
    mig_gi_id: int
    slot: int
    gpu_index: int
    device: str
    pci_bus_id: str
    model_name: str
    mig_profile: str | None
    timeslice_replicas: int
    memory_total_mib: int
    util_signal: str
    share: float
    physical: int
    key: int


@dataclass(frozen=True)
class NamespaceSpec:
    cluster: str
    name: str
    team: str
    labels: Mapping[str, str]


@dataclass(frozen=True)
class WorkloadSpec:
    """A workload whose pod ``r`` holds the units ``pods[r]`` (indices into ``Fleet.units``)
    during each cycle of ``schedule``. ``kind`` is the top owner kind; ``team_label`` is a pod
    label overriding the namespace's team."""

    cluster: str
    namespace: str
    name: str
    kind: str
    gpu_resource: str
    pods: tuple[tuple[int, ...], ...]
    schedule: Schedule
    pattern: Pattern
    team_label: str | None
    xid_code: int
    xid_rate: float
    key: int


@dataclass(frozen=True)
class Outage:
    """A node whose exporter is silent during each cycle's run of ``schedule``."""

    cluster: str
    node: str
    schedule: Schedule

    def windows(self, start_ts: int, end_ts: int) -> list[tuple[int, int]]:
        """The ``[from, to)`` silences that overlap ``[start_ts, end_ts)``."""
        found = []
        for k in self.schedule.cycles(start_ts, end_ts):
            _, begin, end = self.schedule.bounds(k, 0)
            if begin < end_ts and end > start_ts:
                found.append((begin, end))
        return found


@dataclass(frozen=True)
class Fleet:
    seed: int
    clusters: tuple[str, ...]
    nodes: tuple[NodeSpec, ...]
    units: tuple[GpuUnit, ...]
    namespaces: tuple[NamespaceSpec, ...]
    workloads: tuple[WorkloadSpec, ...]
    outages: tuple[Outage, ...]

    def workload(self, name: str) -> WorkloadSpec:
        """The workload with this (fleet-unique) name."""
        for spec in self.workloads:
            if spec.name == name:
                return spec
        raise KeyError(f"no simulated workload named {name!r}")

    def node(self, cluster: str, name: str) -> NodeSpec:
        for spec in self.nodes:
            if (spec.cluster, spec.name) == (cluster, name):
                return spec
        raise KeyError(f"no simulated node {name!r} in cluster {cluster!r}")


def build_fleet(seed: int = 7) -> Fleet:
    """The simulated fleet for ``seed``: the same seed always builds the same fleet."""
    clusters = {c.name: c for c in CLUSTERS}
    nodes: list[NodeSpec] = []
    units: list[GpuUnit] = []
    by_alias: dict[tuple[str, str], NodeSpec] = {}
    for decl in NODES:
        node = _node(seed, clusters[decl.cluster], decl, len(nodes))
        nodes.append(node)
        by_alias[decl.cluster, decl.alias] = node
        physical = units[-1].physical + 1 if units else 0
        units.extend(_node_units(seed, node, decl, physical))
    namespaces = tuple(
        NamespaceSpec(c, ns, team, {"team": team, "kubernetes.io/metadata.name": ns})
        for c, ns, team in NAMESPACES
    )
    workloads = tuple(_workload(seed, d, by_alias, units) for d in WORKLOADS)
    outage_node = by_alias[OUTAGE_NODE]
    outages = (Outage(outage_node.cluster, outage_node.name, OUTAGE),)
    return Fleet(seed, tuple(clusters), tuple(nodes), tuple(units), namespaces, workloads, outages)


def _node(seed: int, cluster: ClusterDecl, decl: NodeDecl, ordinal: int) -> NodeSpec:
    model = MODELS[decl.model]
    name = _node_name(seed, cluster, decl)
    separator = "-" if cluster.cloud == "gcp" else ""
    zone = f"{cluster.region}{separator}{'abc'[ordinal % 3]}"
    style = "exported" if (decl.cluster, decl.alias) == EXPORTED_LABELS_NODE else decl.label_style
    return NodeSpec(
        cluster=cluster.name,
        name=name,
        alias=decl.alias,
        gpu_model=model.dcgm_name,
        gpu_count=INSTANCE_GPUS[decl.instance_type],
        gpu_memory_mib=model.memory_mib,
        capacity_type=decl.capacity_type,
        instance_type=decl.instance_type,
        mig_capable=model.mig_capable,
        mig_strategy="mixed" if decl.mig_layout else None,
        mig_config=decl.mig_config,
        timeslice_replicas=decl.timeslice_replicas,
        labels=_node_labels(cluster, decl, model, name, zone),
        label_style=style,
        util_signal=decl.util_signal or model.util_signal,
        exporter_pod=f"nvidia-dcgm-exporter-{k8s_suffix(5, seed, cluster.name, name)}",
        driver_version=cluster.driver_version,
        temp_offset_c=decl.temp_offset_c,
        idle_w=model.idle_w,
        max_w=model.max_w,
    )


def _node_name(seed: int, cluster: ClusterDecl, decl: NodeDecl) -> str:
    h = stable_hash(seed, cluster.name, decl.alias)
    if cluster.cloud == "aws":
        octets = (h >> 16 & 0xFF, h >> 8 & 0xFF, h & 0xFF)
        return "ip-10-{}-{}-{}.ec2.internal".format(*octets)
    group = uuid_text(seed, cluster.name, decl.pool)[:8]
    return f"gke-{cluster.name}-{decl.pool}-{group}-{k8s_suffix(4, seed, decl.alias)}"


def _node_labels(
    cluster: ClusterDecl, decl: NodeDecl, model: ModelDecl, name: str, zone: str
) -> dict[str, str]:
    shared = decl.timeslice_replicas > 1
    labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": decl.instance_type,
        "topology.kubernetes.io/region": cluster.region,
        "topology.kubernetes.io/zone": zone,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": model.gfd_product + ("-SHARED" if shared else ""),
        "nvidia.com/gpu.count": str(INSTANCE_GPUS[decl.instance_type]),
        "nvidia.com/gpu.memory": str(model.memory_mib),
        "nvidia.com/gpu.family": model.family,
        "nvidia.com/gpu.replicas": str(decl.timeslice_replicas),
        "nvidia.com/gpu.sharing-strategy": "time-slicing" if shared else "none",
        "nvidia.com/mig.capable": str(model.mig_capable).lower(),
        "nvidia.com/gpu.deploy.dcgm-exporter": "true",
        "nvidia.com/cuda.driver-version.full": cluster.driver_version,
    }
    if decl.mig_layout:
        labels["nvidia.com/mig.strategy"] = "mixed"
        labels["nvidia.com/mig.config"] = decl.mig_config or "custom"
        for profile in sorted({p for gpu in decl.mig_layout for p in gpu}):
            count = sum(gpu.count(profile) for gpu in decl.mig_layout)
            labels[f"nvidia.com/mig-{profile}.count"] = str(count)
            labels[f"nvidia.com/mig-{profile}.memory"] = str(MIG_MEMORY_MIB[profile])
    labels.update(_capacity_labels(cluster, decl))
    return labels


def _capacity_labels(cluster: ClusterDecl, decl: NodeDecl) -> dict[str, str]:
    spot = decl.capacity_type == "spot"
    if cluster.cloud == "gcp":
        labels = {
            "cloud.google.com/gke-nodepool": decl.pool,
            "cloud.google.com/gke-accelerator": _GKE_ACCELERATORS[decl.model],
        }
        if spot:
            kind = "preemptible" if "preemptible" in decl.pool else "spot"
            labels[f"cloud.google.com/gke-{kind}"] = "true"
        return labels
    if decl.managed_nodegroup:
        return {
            "eks.amazonaws.com/nodegroup": decl.pool,
            "eks.amazonaws.com/capacityType": "SPOT" if spot else "ON_DEMAND",
        }
    return {
        "karpenter.sh/nodepool": decl.pool,
        "karpenter.sh/capacity-type": "spot" if spot else "on-demand",
    }


def _node_units(seed: int, node: NodeSpec, decl: NodeDecl, physical: int) -> list[GpuUnit]:
    """The node's units in order: per GPU, the whole GPU, its MIG instances or its slots."""
    units: list[GpuUnit] = []
    for index in range(node.gpu_count):
        base = GpuUnit(
            cluster=node.cluster,
            node=node.name,
            uuid="GPU-" + uuid_text(seed, node.cluster, node.name, index),
            mig_gi_id=-1,
            slot=0,
            gpu_index=index,
            device=f"nvidia{index}",
            pci_bus_id=f"00000000:{0x10 + 0x10 * index:02X}:00.0",
            model_name=node.gpu_model,
            mig_profile=None,
            timeslice_replicas=node.timeslice_replicas,
            memory_total_mib=node.gpu_memory_mib,
            util_signal=node.util_signal,
            share=1.0 / node.timeslice_replicas,
            physical=physical + index,
            key=0,
        )
        if decl.mig_layout:
            variants = _mig_instances(base, decl.mig_layout[index])
        else:
            variants = [replace(base, slot=s) for s in range(node.timeslice_replicas)]
        for unit in variants:
            key = stable_hash(seed, unit.cluster, unit.uuid, unit.mig_gi_id, unit.slot)
            units.append(replace(unit, key=key))
    return units


def _mig_instances(base: GpuUnit, profiles: tuple[str, ...]) -> list[GpuUnit]:
    """MIG instances of one GPU; GPU instance ids count up from each profile's first id."""
    next_id = dict(MIG_FIRST_GI_ID)
    instances = []
    for profile in profiles:
        gi_id = next_id[profile]
        next_id[profile] += 1
        instances.append(
            replace(
                base,
                mig_gi_id=gi_id,
                mig_profile=profile,
                memory_total_mib=MIG_MEMORY_MIB[profile],
                util_signal="prof",
                share=mig_fraction(profile, base.model_name),
            )
        )
    return instances


def _workload(
    seed: int,
    decl: WorkloadDecl,
    by_alias: Mapping[tuple[str, str], NodeSpec],
    units: list[GpuUnit],
) -> WorkloadSpec:
    nodes = [by_alias[decl.cluster, alias] for alias in decl.nodes]
    schedule = decl.schedule
    if decl.seeded_offset:
        offset = int(stable_unit(seed, decl.cluster, decl.name) * schedule.period_s) // 60 * 60
        schedule = replace(schedule, offset_s=offset)
    if decl.mig_profile:
        resource = f"nvidia.com/mig-{decl.mig_profile}"
    elif nodes[0].timeslice_replicas > 1:
        resource = "nvidia.com/gpu.shared"
    else:
        resource = "nvidia.com/gpu"
    return WorkloadSpec(
        cluster=decl.cluster,
        namespace=decl.namespace,
        name=decl.name,
        kind=decl.kind,
        gpu_resource=resource,
        pods=_place(decl, nodes, units),
        schedule=schedule,
        pattern=decl.pattern,
        team_label=decl.team,
        xid_code=decl.xid_code,
        xid_rate=decl.xid_rate,
        key=stable_hash(seed, decl.cluster, decl.namespace, decl.name),
    )


def _place(
    decl: WorkloadDecl, nodes: list[NodeSpec], units: list[GpuUnit]
) -> tuple[tuple[int, ...], ...]:
    """Each pod's unit indices: consecutive candidates of one node, nodes taken in order."""
    pods: list[tuple[int, ...]] = []
    for node in nodes:
        candidates = _candidates(node, decl.mig_profile, units)[decl.first :]
        while len(pods) < decl.pods and len(candidates) >= decl.gpus_per_pod:
            pods.append(tuple(candidates[: decl.gpus_per_pod]))
            candidates = candidates[decl.gpus_per_pod :]
    if len(pods) < decl.pods:
        raise ValueError(f"workload {decl.name!r} does not fit on nodes {decl.nodes}")
    return tuple(pods)


def _candidates(node: NodeSpec, profile: str | None, units: list[GpuUnit]) -> list[int]:
    """Unit indices a pod may take on ``node``: MIG instances of ``profile``, time-slice slots
    spread over the GPUs (slot 0 of every GPU first), or whole GPUs."""
    mine = [i for i, u in enumerate(units) if (u.cluster, u.node) == (node.cluster, node.name)]
    if profile is not None:
        return [i for i in mine if units[i].mig_profile == profile]
    return sorted(mine, key=lambda i: (units[i].slot, units[i].gpu_index))
