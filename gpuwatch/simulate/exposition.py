"""A simulated fleet at one instant, as dcgm-exporter's ``/metrics`` text (pure, no I/O).

``render(fleet, ts, samples, cluster)`` writes the Prometheus text exposition a dcgm-exporter
(4.x, Kubernetes mapping on) would serve for the cluster's GPU nodes at ``ts``, from the rows of
:func:`gpuwatch.simulate.generate.sample_at`; ``metrics_text`` computes those rows itself.

What the text shows, node by node:

- one series per metric family and GPU unit, labelled ``gpu``, ``UUID``, ``pci_bus_id``,
  ``device``, ``modelName``, ``Hostname``, ``DCGM_FI_DRIVER_VERSION``, MIG instances also
  ``GPU_I_PROFILE``/``GPU_I_ID``, and ``pod``/``namespace``/``container`` of the holder;
- utilization as ``DCGM_FI_DEV_GPU_UTIL`` (percent) on ``dev``-signal nodes, else
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (ratio; always on MIG instances, which have no GPU_UTIL);
- ``lowercase`` nodes label ``uuid``/``hostname``; ``exported`` nodes carry what Prometheus stores
  after a ServiceMonitor scrape without ``honorLabels``: the holder as ``exported_pod``/
  ``exported_namespace``/``exported_container`` and ``pod``/``namespace``/``container`` naming the
  node's exporter pod (on every series of the node);
- nodes whose exporter runs without ``NODE_NAME`` (T4 nodes and ``lowercase`` nodes) report the
  exporter pod's name as hostname, as real exporters then do;
- time-sliced GPUs: the device-level series, plus one series per held replica slot with a
  ``vgpu`` label (as ``--kubernetes-virtual-gpus`` does), carrying the slot's own utilization
  and framebuffer use; memory free/reserved appear only on the device series;
- MPS slots are exported as time-slice slots are (``vgpu`` per held slot, device series);
- DRA devices (``KUBERNETES_ENABLE_DRA``): a held device's series carries the pod labels and
  ``dra_claim_name``, ``dra_claim_namespace``, ``dra_device_name``, ``dra_driver_name``,
  ``dra_pool_name`` (MIG devices also ``dra_mig_profile`` and ``dra_mig_device_uuid``); a claim
  shared by k pods gives k series with the same values, one per pod, and no ``vgpu``; a device
  no claim holds has one plain series;
- efficiency and health families (:mod:`gpuwatch.simulate.exposition_health`): profiling
  gauges where the unit exports ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, NVLink bytes on whole GPUs of
  NVLink models, SM clock, clock-event bitmask (its older name on one node), ECC, PCIe replay
  and NVLink error counters and the row-remap failure flag where the GPU has them;
- a node whose exporter is down (an outage window) has no series at all, nor has a failed GPU
  during its silence;
- utilization reads as the blank sentinel ``9223372036854775794`` for about one unit-instant in
  ``BLANK_ONE_IN`` (a deterministic draw, see :func:`is_blank`), as DCGM reports blank fields.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from gpuwatch.domain.allocation import DRA
from gpuwatch.domain.durations import DAY_S
from gpuwatch.simulate.dra import claim_name, is_dra
from gpuwatch.simulate.dra_names import DRIVER, mig_uuid
from gpuwatch.simulate.exposition_health import (
    HEALTH_FAMILIES,
    SM_CLOCK,
    device_values,
    profiling_values,
    summed_profiling,
)
from gpuwatch.simulate.fleet import Fleet, GpuUnit, NodeSpec
from gpuwatch.simulate.generate import sample_at
from gpuwatch.simulate.kube_objects import (
    EXPORTER_CONTAINER,
    EXPORTER_NAMESPACE,
    container_name,
)
from gpuwatch.simulate.noise import stable_hash
from gpuwatch.simulate.pods import pod_instances

SENTINEL = 9223372036854775794
BLANK_ONE_IN = 200
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
PROF_UTIL = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED"
POWER = "DCGM_FI_DEV_POWER_USAGE"
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
MEMORY_TEMP = "DCGM_FI_DEV_MEMORY_TEMP"
XID = "DCGM_FI_DEV_XID_ERRORS"

#: Metric families in exposition order: name → (type, help text as dcgm-exporter writes it).
FAMILIES: dict[str, tuple[str, str]] = {
    SM_CLOCK: ("gauge", "SM clock frequency (in MHz)."),
    MEMORY_TEMP: ("gauge", "Memory temperature (in C)."),
    GPU_TEMP: ("gauge", "GPU temperature (in C)."),
    POWER: ("gauge", "Power draw (in W)."),
    ENERGY: ("counter", "Total energy consumption since boot (in mJ)."),
    GPU_UTIL: ("gauge", "GPU utilization (in %)."),
    FB_FREE: ("gauge", "Framebuffer memory free (in MiB)."),
    FB_USED: ("gauge", "Framebuffer memory used (in MiB)."),
    FB_RESERVED: ("gauge", "Framebuffer memory reserved (in MiB)."),
    XID: ("gauge", "Value of the last XID error encountered."),
    PROF_UTIL: ("gauge", "Ratio of time the graphics engine is active."),
    **HEALTH_FAMILIES,
}
#: Share of a whole GPU's framebuffer the driver reserves (reported as FB_RESERVED).
RESERVED_SHARE = 0.006
_HBM_MODELS = ("A100", "H100")
_REBOOT_PERIOD_S = 90 * DAY_S


@dataclass(frozen=True)
class Series:
    """One labelled GPU unit (or time-sliced device) and its values by metric family, exported
    by the exporter of ``node``."""

    labels: tuple[tuple[str, str], ...]
    values: Mapping[str, str]
    node: str = ""


def reports_pod_hostname(node: NodeSpec) -> bool:
    """Whether the node's exporter runs without ``NODE_NAME`` (hostname = its pod's name)."""
    return node.gpu_model == "Tesla T4" or node.label_style == "lowercase"


def exporter_hostname(node: NodeSpec) -> str:
    return node.exporter_pod if reports_pod_hostname(node) else node.name


def is_blank(unit: GpuUnit, ts: int) -> bool:
    """Whether the unit's utilization reads as the blank sentinel at ``ts``."""
    return stable_hash("blank", unit.key, ts) % BLANK_ONE_IN == 0


def exporter_down(fleet: Fleet, cluster: str, node: str, ts: int) -> bool:
    """Whether the node's exporter is in an outage window at ``ts``."""
    return any(
        (o.cluster, o.node) == (cluster, node) and o.windows(ts, ts + 1) for o in fleet.outages
    )


def metrics_text(fleet: Fleet, ts: int, cluster: str, node: str | None = None) -> str:
    """The ``/metrics`` text of ``cluster`` (or one ``node`` of it) at ``ts``."""
    return render(fleet, ts, sample_at(fleet, ts), cluster, node)


def render(
    fleet: Fleet, ts: int, samples: pd.DataFrame, cluster: str, node: str | None = None
) -> str:
    """The exposition text for the rows of ``samples`` (``sample_at(fleet, ts)``) on
    ``cluster``'s nodes, or only on ``node``; empty when no node exports anything."""
    return format_series(build_series(fleet, ts, samples, cluster, node))


def build_series(
    fleet: Fleet, ts: int, samples: pd.DataFrame, cluster: str, node: str | None = None
) -> list[Series]:
    """Every series the exporters of ``cluster`` (or of ``node``) expose at ``ts``."""
    units = {(u.cluster, u.uuid, u.mig_gi_id, u.slot): u for u in fleet.units}
    nodes = {n.name: n for n in fleet.nodes if n.cluster == cluster}
    instances = pod_instances(fleet, ts, ts + 1)
    containers = {inst.uid: container_name(fleet.workloads[inst.workload]) for inst in instances}
    claims = {inst.uid: claim_name(fleet, inst) for inst in instances if is_dra(fleet, inst)}
    series: list[Series] = []
    shared: dict[tuple[str, int], list[tuple[GpuUnit, Any]]] = {}
    rows: Iterable[Any] = samples[samples["cluster"] == cluster].itertuples(index=False)
    for row in rows:
        unit = units[(cluster, str(row.uuid), int(row.mig_gi_id), int(row.slot))]
        if (node is not None and unit.node != node) or unit.node not in nodes:
            continue
        spec = nodes[unit.node]
        holder = _holder(row, containers)
        if unit.timeslice_replicas > 1:
            shared.setdefault((unit.uuid, unit.mig_gi_id), []).append((unit, row))
            if holder is None or unit.sharing == DRA:
                continue
            labels = (*_labels(spec, unit, holder), ("vgpu", str(unit.slot)))
            series.append(Series(labels, _slot_values(spec, unit, row, ts), unit.node))
            continue
        labels = _labels(spec, unit, holder) + _dra_labels(fleet, unit, row, claims)
        series.append(Series(labels, _unit_values(spec, unit, row, ts), unit.node))
    for members in shared.values():
        spec = nodes[members[0][0].node]
        if members[0][0].sharing == DRA:
            series += _claim_series(fleet, spec, members, ts, (containers, claims))
            continue
        unit = members[0][0]
        values = _device_values(spec, members, ts)
        series.append(Series(_labels(spec, unit, None), values, unit.node))
    return series


def _claim_series(
    fleet: Fleet,
    node: NodeSpec,
    members: list[tuple[GpuUnit, Any]],
    ts: int,
    pods: tuple[Mapping[str, str], Mapping[str, str]],
) -> list[Series]:
    """A DRA device that a claim shares: one series per pod holding it, all with the device's
    values (slot 0's, which every slot carries); one plain series when no pod holds it."""
    containers, claims = pods
    unit, first = members[0]
    values = _unit_values(node, unit, first, ts)
    found = []
    for member, row in members:
        holder = _holder(row, containers)
        if holder is not None:
            labels = _labels(node, unit, holder) + _dra_labels(fleet, member, row, claims)
            found.append(Series(labels, values, node.name))
    return found or [Series(_labels(node, unit, None), values, node.name)]


def _dra_labels(
    fleet: Fleet, unit: GpuUnit, row: Any, claims: Mapping[str, str]
) -> tuple[tuple[str, str], ...]:
    """The DRA labels of a held DRA device (empty for other units and unheld devices)."""
    claim = claims.get(str(row.pod_uid)) if isinstance(row.pod, str) else None
    if unit.sharing != DRA or claim is None or unit.dra_device is None:
        return ()
    labels = (
        ("dra_claim_name", claim),
        ("dra_claim_namespace", str(row.namespace)),
        ("dra_device_name", unit.dra_device),
        ("dra_driver_name", DRIVER),
        ("dra_pool_name", unit.node),
    )
    if unit.mig_profile is None:
        return labels
    uuid = mig_uuid(fleet.seed, unit.cluster, unit.uuid, unit.mig_gi_id)
    return (*labels, ("dra_mig_profile", unit.mig_profile), ("dra_mig_device_uuid", uuid))


def _holder(row: Any, containers: Mapping[str, str]) -> tuple[str, str, str] | None:
    """``(pod, namespace, container)`` of the unit's holder, None when no pod holds it."""
    if not isinstance(row.pod, str):
        return None
    return row.pod, str(row.namespace), containers.get(str(row.pod_uid), "main")


def _labels(
    node: NodeSpec, unit: GpuUnit, holder: tuple[str, str, str] | None
) -> tuple[tuple[str, str], ...]:
    lowercase = node.label_style == "lowercase"
    labels: list[tuple[str, str]] = [
        ("gpu", str(unit.gpu_index)),
        ("uuid" if lowercase else "UUID", unit.uuid),
        ("pci_bus_id", unit.pci_bus_id),
        ("device", unit.device),
        ("modelName", unit.model_name),
    ]
    if unit.mig_gi_id >= 0:
        labels += [("GPU_I_PROFILE", str(unit.mig_profile)), ("GPU_I_ID", str(unit.mig_gi_id))]
    labels += [
        ("hostname" if lowercase else "Hostname", exporter_hostname(node)),
        ("DCGM_FI_DRIVER_VERSION", node.driver_version),
    ]
    names = ("container", "namespace", "pod")
    if node.label_style == "exported":
        if holder is not None:
            pod, namespace, container = holder
            exported = [f"exported_{name}" for name in names]
            labels += list(zip(exported, (container, namespace, pod), strict=True))
        own = (EXPORTER_CONTAINER, EXPORTER_NAMESPACE, node.exporter_pod)
        labels += list(zip(names, own, strict=True))
    elif holder is not None:
        pod, namespace, container = holder
        labels += list(zip(names, (container, namespace, pod), strict=True))
    return tuple(labels)


def _util(unit: GpuUnit, util_ratio: float, ts: int, blank: bool) -> dict[str, str]:
    family = GPU_UTIL if unit.util_signal == "dev" else PROF_UTIL
    if blank and is_blank(unit, ts):
        return {family: str(SENTINEL)}
    if family == GPU_UTIL:
        return {family: str(round(util_ratio * 100.0))}
    return {family: f"{util_ratio:.6f}"}


def _device_readings(node: NodeSpec, unit: GpuUnit, row: Any, ts: int) -> dict[str, str]:
    """Readings of the physical GPU (copied onto every series of a shared GPU)."""
    temp = round(float(row.temp_c))
    hbm = any(model in node.gpu_model for model in _HBM_MODELS)
    values = {
        MEMORY_TEMP: str(temp + 3 if hbm else 0),
        GPU_TEMP: str(temp),
        XID: str(int(row.xid)),
    }
    if not math.isnan(float(row.power_w)):
        values[POWER] = f"{float(row.power_w):.6f}"
        values[ENERGY] = str(_energy_mj(node, unit, ts))
    return values | device_values(node, unit, row, ts)


def _energy_mj(node: NodeSpec, unit: GpuUnit, ts: int) -> int:
    """A monotone energy counter: mean board power times uptime (reset every reboot)."""
    phase = stable_hash(node.cluster, node.name, unit.gpu_index) % _REBOOT_PERIOD_S
    uptime_s = (ts - phase) % _REBOOT_PERIOD_S
    mean_w = node.idle_w + 0.35 * (node.max_w - node.idle_w)
    return int(uptime_s * mean_w * 1000)


def _memory(total: float, used: float, whole_gpu: bool) -> dict[str, str]:
    reserved = min(round(total * RESERVED_SHARE), total - used) if whole_gpu else 0.0
    values = {FB_USED: str(int(used)), FB_FREE: str(int(max(0.0, total - used - reserved)))}
    if whole_gpu:
        values[FB_RESERVED] = str(int(reserved))
    return values


def _unit_values(node: NodeSpec, unit: GpuUnit, row: Any, ts: int) -> dict[str, str]:
    """A whole GPU or a MIG instance."""
    used, total = float(row.fb_used_mib), float(row.fb_total_mib)
    values = _device_readings(node, unit, row, ts) | profiling_values(row)
    values |= _memory(total, used, unit.mig_gi_id < 0)
    return values | _util(unit, float(row.util_ratio), ts, blank=True)


def _slot_values(node: NodeSpec, unit: GpuUnit, row: Any, ts: int) -> dict[str, str]:
    """A held replica slot of a time-sliced GPU: its own utilization and memory use."""
    values = _device_readings(node, unit, row, ts) | profiling_values(row)
    values[FB_USED] = str(int(float(row.fb_used_mib)))
    return values | _util(unit, float(row.util_ratio), ts, blank=True)


def _device_values(node: NodeSpec, members: list[tuple[GpuUnit, Any]], ts: int) -> dict[str, str]:
    """The device-level series of a time-sliced GPU: the sum over its slots."""
    unit, first = members[0]
    util = min(1.0, sum(float(row.util_ratio) for _, row in members))
    used = sum(float(row.fb_used_mib) for _, row in members)
    values = _device_readings(node, unit, first, ts) | summed_profiling(
        (r for _, r in members), util
    )
    values[XID] = str(max(int(row.xid) for _, row in members))
    values |= _memory(float(first.fb_total_mib), used, True)
    return values | _util(unit, util, ts, blank=False)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _label_text(labels: Iterable[tuple[str, str]]) -> str:
    return ",".join(f'{name}="{_escape(value)}"' for name, value in labels)


def format_series(series: Iterable[Series]) -> str:
    """Prometheus text format: ``# HELP``/``# TYPE`` then the samples, family by family."""
    items = [(_label_text(s.labels), s.values) for s in series]
    lines: list[str] = []
    for family, (kind, text) in FAMILIES.items():
        samples = [
            f"{family}{{{labels}}} {values[family]}" for labels, values in items if family in values
        ]
        if samples:
            lines += [f"# HELP {family} {text}", f"# TYPE {family} {kind}", *samples]
    return "\n".join(lines) + "\n" if lines else ""


def sd_targets(fleet: Fleet, cluster: str, address: str) -> list[dict[str, Any]]:
    """Prometheus HTTP service discovery: one scrape target per node, all at ``address``, told
    apart by the ``node`` URL parameter (``__param_node``) and named by ``instance``."""
    return [
        {"targets": [address], "labels": {"__param_node": n.name, "instance": n.name}}
        for n in fleet.nodes
        if n.cluster == cluster
    ]
