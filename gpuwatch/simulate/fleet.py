"""The simulated GPU fleet: clusters, nodes, GPU units, namespaces, workloads and outages.

``build_fleet(seed)`` turns the declarations in ``layout`` into concrete specs: node names, GPU
Feature Discovery labels, deterministic GPU UUIDs, MIG instances and time-slice slots, and the
units each workload's pods hold. Everything downstream (bulk frames, a live exporter, a fake API
server) is a pure function of this fleet and an instant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from gpuwatch.domain.allocation import DEVICE_PLUGIN, DRA, MIG, TIME_SLICE
from gpuwatch.domain.mig import mig_fraction
from gpuwatch.simulate import layout_health as scenario
from gpuwatch.simulate.dra_names import GPU_CLASS, MIG_CLASS, gpu_device_name, mig_device_names
from gpuwatch.simulate.fleet_health import with_scenarios
from gpuwatch.simulate.kueue_decl import KueueDecl
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
    NodeDecl,
    WorkloadDecl,
)
from gpuwatch.simulate.layout_queues import QUEUE_NODES, QUEUE_WORKLOADS, VOLCANO_WORKLOADS
from gpuwatch.simulate.layout_sharing import SHARING_NODES, SHARING_WORKLOADS
from gpuwatch.simulate.node_labels import node_labels
from gpuwatch.simulate.noise import k8s_suffix, stable_hash, stable_unit, uuid_text
from gpuwatch.simulate.patterns import Pattern
from gpuwatch.simulate.placement import place
from gpuwatch.simulate.schedule import Schedule
from gpuwatch.simulate.volcano_decl import VolcanoDecl

LABEL_STYLES = ("standard", "exported", "lowercase")
UTIL_SIGNALS = ("prof", "dev")


@dataclass(frozen=True)
class NodeSpec:
    """A GPU node. ``label_style`` says how its exporter's series are labelled: ``standard``,
    ``exported`` (scraped without honorLabels: ``exported_pod``/``exported_namespace``, with
    ``pod``/``namespace`` naming ``exporter_pod``) or ``lowercase`` (``hostname``/``uuid``).
    ``util_signal``: ``prof`` (DCGM_FI_PROF_GR_ENGINE_ACTIVE) or ``dev`` (DCGM_FI_DEV_GPU_UTIL).
    ``gpu_sharing``: how the node hands GPUs out (``domain.allocation.NODE_MODES``);
    ``health``: which health fields its exporter reports, and its scenarios."""

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
    gpu_sharing: str = DEVICE_PLUGIN
    health: scenario.NodeHealth = scenario.NO_EVENTS_NODE


@dataclass(frozen=True)
class GpuUnit:
    """A sample unit: a whole GPU, a MIG instance (``mig_gi_id`` ≥ 0) or a slot of a shared GPU
    (time-slicing, MPS, or a DRA device in a claim several pods share).

    ``physical`` numbers the physical GPU across the fleet (units of one GPU are adjacent);
    ``share`` is the unit's fraction of that GPU's compute; ``key`` seeds its noise.
    ``sharing`` is the unit's mode (``domain.allocation.MODES``); ``dra_device`` its device name
    in the node's ResourceSlice (DRA nodes only); ``failure`` and ``noise`` its health events."""

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
    sharing: str = DEVICE_PLUGIN
    dra_device: str | None = None
    failure: scenario.Failure | None = None
    noise: scenario.CounterNoise | None = None


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
    label overriding the namespace's team. ``allocation`` is ``dra`` for pods holding their
    units through ResourceClaims (``gpu_resource`` is then the device class), ``claim`` the
    named claim all its pods share (None: a claim per pod, from a template). ``efficiency``
    shapes its profiling fields; ``xid_event`` a daily XID of one of its pods; ``kueue`` how
    Kueue admits it (None: not submitted to Kueue); ``volcano`` how Volcano schedules it."""

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
    allocation: str | None = None
    claim: str | None = None
    efficiency: scenario.Efficiency = scenario.DEFAULT_EFFICIENCY
    xid_event: scenario.XidEvent | None = None
    kueue: KueueDecl | None = None
    volcano: VolcanoDecl | None = None


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
    for decl in (*NODES, *SHARING_NODES, *QUEUE_NODES):
        node = _node(seed, clusters[decl.cluster], decl, len(nodes))
        nodes.append(node)
        by_alias[decl.cluster, decl.alias] = node
        physical = units[-1].physical + 1 if units else 0
        units.extend(_node_units(seed, node, decl, physical))
    namespaces = tuple(
        NamespaceSpec(c, ns, team, {"team": team, "kubernetes.io/metadata.name": ns})
        for c, ns, team in NAMESPACES
    )
    declared = (*WORKLOADS, *SHARING_WORKLOADS, *QUEUE_WORKLOADS, *VOLCANO_WORKLOADS)
    workloads = tuple(_workload(seed, d, by_alias, units) for d in declared)
    outage_node = by_alias[OUTAGE_NODE]
    outages = (Outage(outage_node.cluster, outage_node.name, OUTAGE),)
    fleet = Fleet(seed, tuple(clusters), tuple(nodes), tuple(units), namespaces, workloads, outages)
    return with_scenarios(fleet)


def _node(seed: int, cluster: ClusterDecl, decl: NodeDecl, ordinal: int) -> NodeSpec:
    model = MODELS[decl.model]
    name = _node_name(seed, cluster, decl)
    separator = "-" if cluster.cloud == "gcp" else ""
    zone = f"{cluster.region}{separator}{'abc'[ordinal % 3]}"
    style = "exported" if (decl.cluster, decl.alias) == EXPORTED_LABELS_NODE else decl.label_style
    sharing = node_sharing(decl)
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
        labels=node_labels(cluster, decl, model, name, zone, sharing),
        label_style=style,
        util_signal=decl.util_signal or model.util_signal,
        exporter_pod=f"nvidia-dcgm-exporter-{k8s_suffix(5, seed, cluster.name, name)}",
        driver_version=cluster.driver_version,
        temp_offset_c=decl.temp_offset_c,
        idle_w=model.idle_w,
        max_w=model.max_w,
        gpu_sharing=sharing,
    )


def node_sharing(decl: NodeDecl) -> str:
    """The node's mode: declared (``mps``, ``dra``), else time-slicing with replicas, else the
    device plugin."""
    if decl.sharing is not None:
        return decl.sharing
    return TIME_SLICE if decl.timeslice_replicas > 1 else DEVICE_PLUGIN


def _node_name(seed: int, cluster: ClusterDecl, decl: NodeDecl) -> str:
    h = stable_hash(seed, cluster.name, decl.alias)
    if cluster.cloud == "aws":
        octets = (h >> 16 & 0xFF, h >> 8 & 0xFF, h & 0xFF)
        return "ip-10-{}-{}-{}.ec2.internal".format(*octets)
    group = uuid_text(seed, cluster.name, decl.pool)[:8]
    return f"gke-{cluster.name}-{decl.pool}-{group}-{k8s_suffix(4, seed, decl.alias)}"


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
            sharing=node.gpu_sharing,
        )
        if decl.mig_layout:
            variants = _mig_instances(base, decl.mig_layout[index])
        else:
            variants = _slots(base, _split(decl, index))
        for unit in variants:
            key = stable_hash(seed, unit.cluster, unit.uuid, unit.mig_gi_id, unit.slot)
            units.append(replace(unit, key=key))
    return units


def _split(decl: NodeDecl, index: int) -> int:
    """How many slots GPU ``index`` is split into: replicas, or the pods sharing its claim."""
    if decl.dra_shared is not None and decl.dra_shared[0] == index:
        return decl.dra_shared[1]
    return decl.timeslice_replicas


def _slots(base: GpuUnit, count: int) -> list[GpuUnit]:
    """A whole GPU as ``count`` slot units (one when not shared); DRA devices get their name."""
    device = gpu_device_name(base.gpu_index) if base.sharing == DRA else None
    return [
        replace(base, slot=s, timeslice_replicas=count, share=1.0 / count, dra_device=device)
        for s in range(count)
    ]


def _mig_instances(base: GpuUnit, profiles: tuple[str, ...]) -> list[GpuUnit]:
    """MIG instances of one GPU; GPU instance ids count up from each profile's first id. On a
    DRA node they are DRA devices, named as the driver names them."""
    next_id = dict(MIG_FIRST_GI_ID)
    dra = base.sharing == DRA
    names = mig_device_names(base.gpu_index, profiles) if dra else [None] * len(profiles)
    instances = []
    for profile, name in zip(profiles, names, strict=True):
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
                sharing=DRA if dra else MIG,
                dra_device=name,
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
    dra = nodes[0].gpu_sharing == DRA
    if dra:
        resource = MIG_CLASS if decl.mig_profile else GPU_CLASS
    elif decl.mig_profile:
        resource = f"nvidia.com/mig-{decl.mig_profile}"
    elif nodes[0].gpu_sharing == TIME_SLICE:
        resource = "nvidia.com/gpu.shared"
    else:
        resource = "nvidia.com/gpu"
    return WorkloadSpec(
        cluster=decl.cluster,
        namespace=decl.namespace,
        name=decl.name,
        kind=decl.kind,
        gpu_resource=resource,
        pods=place(decl, nodes, units),
        schedule=schedule,
        pattern=decl.pattern,
        team_label=decl.team,
        xid_code=decl.xid_code,
        xid_rate=decl.xid_rate,
        key=stable_hash(seed, decl.cluster, decl.namespace, decl.name),
        allocation=DRA if dra else None,
        claim=decl.claim,
        kueue=decl.kueue,
        volcano=decl.volcano,
    )
