"""Frames of a simulated fleet over a window, and the same samples for one live instant.

``generate`` returns natural-key frames close to the store's tables (no store ids); ``sample_at``
returns the sample rows of a single instant, equal to the bulk rows for that instant (a live
exporter serves them). Samples lie on the step grid, one row per GPU unit (whole GPU, MIG instance,
time-slice slot) per instant; a node whose exporter is down has no rows (missing, not zero).
``pod`` is missing on units no pod holds; ``pod_uid`` tells apart pods that reuse a name (a
StatefulSet's ``nb-bob-0`` after a restart). Sample semantics: ``util_ratio`` is the share of the
whole GPU's engine time (of the MIG instance's, for a MIG unit) the holder uses; on a time-sliced
GPU each slot's ratio is its pod's share of the physical GPU, so the slots of a GPU add up to the
device's utilization (MPS slots alike). The slots of a DRA device that a claim shares between pods
all carry the device's readings (the sum over its pods), as dcgm-exporter repeats them on each
pod's series. ``power_w`` and ``temp_c`` are device-level readings, repeated on each slot of a
time-sliced GPU; MIG instances report no power (NaN). Efficiency and health columns are what
``gpuwatch collect`` stores from the simulated exporter (:mod:`health`): NaN where not exported,
and for counters where the step saw no increase. A failed GPU's silence removes its rows, as an
outage does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from gpuwatch.domain.allocation import DRA
from gpuwatch.domain.durations import HOUR_S
from gpuwatch.simulate.dra import DRA_DEVICE_COLUMNS, dra_devices_frame
from gpuwatch.simulate.fleet import Fleet
from gpuwatch.simulate.health import apply_xid_events, health_columns, silent
from gpuwatch.simulate.noise import slow_uniform, stable_hash, uniform, unit_keys
from gpuwatch.simulate.patterns import (
    activity,
    busy_mask,
    memory_fraction,
    power_w,
    temperature_c,
    utilization,
)
from gpuwatch.simulate.pods import PodInstance, pod_instances, pods_frame
from gpuwatch.simulate.queue_frames import queue_frames
from gpuwatch.store.models import HEALTH_SAMPLE_FIELDS

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
BOOL = NDArray[np.bool_]

#: ``samples.util_signal`` values, in code order (see ``gpuwatch.store.models.UTIL_SIGNALS``).
UTIL_SIGNAL_NAMES = ("prof_gr_engine_active", "dev_gpu_util")
SAMPLE_COLUMNS = (
    "cluster",
    "uuid",
    "mig_gi_id",
    "slot",
    "ts",
    "step_s",
    "namespace",
    "pod",
    "pod_uid",
    "util_ratio",
    "util_signal",
    "fb_used_mib",
    "fb_total_mib",
    "power_w",
    "temp_c",
    "xid",
    *HEALTH_SAMPLE_FIELDS,
)
_FAST, _SLOW, _MEMORY, _POWER, _XID, _TEMP = range(1, 7)


@dataclass(frozen=True)
class SimulatedData:
    """A simulated window ``[start_ts, end_ts)`` at ``step_s``, as natural-key frames.

    ``clusters``, ``nodes`` (with GFD ``labels``, ``label_style``, ``util_signal``,
    ``gpu_sharing``), ``gpus`` (one row per unit, with its ``sharing``), ``namespaces`` (with
    ``team``), ``pods`` (every pod that existed in the window, in the state the API shows at
    ``end_ts``; ``allocation`` ``dra`` for pods holding claims), ``samples``
    (``SAMPLE_COLUMNS``), ``dra_devices`` (``DRA_DEVICE_COLUMNS``: the devices claims held),
    ``queue_flavors`` and ``sched_workloads`` (Kueue's quotas and Workloads, :mod:`queue_frames`).
    """

    start_ts: int
    end_ts: int
    step_s: int
    clusters: pd.DataFrame
    nodes: pd.DataFrame
    gpus: pd.DataFrame
    namespaces: pd.DataFrame
    pods: pd.DataFrame
    samples: pd.DataFrame
    dra_devices: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=DRA_DEVICE_COLUMNS)
    )
    queue_flavors: pd.DataFrame = field(default_factory=lambda: queue_frames()[0])
    sched_workloads: pd.DataFrame = field(default_factory=lambda: queue_frames()[1])


@dataclass(frozen=True)
class _Units:
    """Per-unit arrays of the fleet (index = position in ``Fleet.units``)."""

    keys: NDArray[np.uint64]
    memory: F64
    weight: F64
    physical: I64
    starts: I64
    is_mig: BOOL
    is_dev: BOOL
    cluster_codes: I64
    gi: I64
    slot: I64
    idle_w: F64
    max_w: F64
    temp_offset_c: F64
    shared: tuple[I64, ...]


def time_grid(start_ts: int, end_ts: int, step_s: int) -> I64:
    """Instants ``t`` with ``start_ts ≤ t < end_ts`` and ``t % step_s == 0``."""
    if step_s <= 0:
        raise ValueError(f"step must be positive, got {step_s}")
    first = -(-start_ts // step_s) * step_s
    return np.arange(first, end_ts, step_s, dtype=np.int64)


def generate(fleet: Fleet, start_ts: int, end_ts: int, step_s: int) -> SimulatedData:
    """Every frame of the fleet over ``[start_ts, end_ts)``; pods as seen at ``end_ts``."""
    if end_ts <= start_ts:
        raise ValueError(f"empty window: end {end_ts} is not after start {start_ts}")
    instances = pod_instances(fleet, start_ts, end_ts)
    samples = _samples(fleet, time_grid(start_ts, end_ts, step_s), step_s, instances)
    quotas, queued = queue_frames(fleet, start_ts, end_ts)
    return SimulatedData(
        start_ts=start_ts,
        end_ts=end_ts,
        step_s=step_s,
        clusters=pd.DataFrame({"cluster": list(fleet.clusters)}),
        nodes=nodes_frame(fleet),
        gpus=gpus_frame(fleet),
        namespaces=namespaces_frame(fleet),
        pods=pods_frame(fleet, instances, end_ts),
        samples=samples,
        dra_devices=dra_devices_frame(fleet, instances, start_ts, end_ts),
        queue_flavors=quotas,
        sched_workloads=queued,
    )


def sample_at(fleet: Fleet, ts: int, step_s: int = 60) -> pd.DataFrame:
    """The sample rows of instant ``ts`` (``step_s`` only fills the column of that name)."""
    instances = pod_instances(fleet, ts, ts + 1)
    return _samples(fleet, np.array([ts], dtype=np.int64), step_s, instances)


_NODE_FIELDS = (
    "gpu_model",
    "gpu_count",
    "gpu_memory_mib",
    "capacity_type",
    "instance_type",
    "mig_capable",
    "mig_strategy",
    "mig_config",
    "timeslice_replicas",
    "gpu_sharing",
)
_GPU_FIELDS = (
    "cluster",
    "node",
    "uuid",
    "mig_gi_id",
    "slot",
    "gpu_index",
    "device",
    "model_name",
    "mig_profile",
    "timeslice_replicas",
    "sharing",
    "memory_total_mib",
)


def nodes_frame(fleet: Fleet) -> pd.DataFrame:
    """One row per node, with its GPU Feature Discovery labels and exporter quirks."""
    rows = [
        {
            "cluster": n.cluster,
            "node": n.name,
            **{c: getattr(n, c) for c in _NODE_FIELDS},
            "labels": dict(n.labels),
            "label_style": n.label_style,
            "util_signal": n.util_signal,
        }
        for n in fleet.nodes
    ]
    columns = ["cluster", "node", *_NODE_FIELDS, "labels", "label_style", "util_signal"]
    return pd.DataFrame(rows, columns=columns)


def gpus_frame(fleet: Fleet) -> pd.DataFrame:
    """One row per GPU unit: whole GPU, MIG instance or slot (time-slice, MPS, shared claim)."""
    rows = [{c: getattr(u, c) for c in _GPU_FIELDS} for u in fleet.units]
    return pd.DataFrame(rows, columns=list(_GPU_FIELDS))


def namespaces_frame(fleet: Fleet) -> pd.DataFrame:
    rows = [
        {"cluster": n.cluster, "namespace": n.name, "team": n.team, "labels": dict(n.labels)}
        for n in fleet.namespaces
    ]
    return pd.DataFrame(rows, columns=["cluster", "namespace", "team", "labels"])


def _unit_table(fleet: Fleet) -> _Units:
    units = fleet.units
    physical = np.array([u.physical for u in units], dtype=np.int64)
    starts = np.flatnonzero(np.diff(physical, prepend=-1))
    nodes = {(n.cluster, n.name): n for n in fleet.nodes}
    first = [nodes[units[i].cluster, units[i].node] for i in starts]
    is_mig = np.array([u.mig_gi_id >= 0 for u in units])
    shared = _shared_claim_slots(fleet)
    own_share = is_mig.copy()
    for rows in shared:
        own_share[rows] = True
    return _Units(
        keys=unit_keys([u.key for u in units]),
        memory=np.array([u.memory_total_mib for u in units], dtype=np.float64),
        weight=np.where(own_share, [u.share for u in units], 1.0),
        physical=physical,
        starts=starts,
        is_mig=is_mig,
        is_dev=np.array([u.util_signal == "dev" for u in units]),
        cluster_codes=np.array([fleet.clusters.index(u.cluster) for u in units], dtype=np.int64),
        gi=np.array([u.mig_gi_id for u in units], dtype=np.int64),
        slot=np.array([u.slot for u in units], dtype=np.int64),
        idle_w=np.array([n.idle_w for n in first], dtype=np.float64),
        max_w=np.array([n.max_w for n in first], dtype=np.float64),
        temp_offset_c=np.array([n.temp_offset_c for n in first], dtype=np.float64),
        shared=shared,
    )


def _shared_claim_slots(fleet: Fleet) -> tuple[I64, ...]:
    """Per DRA device that a claim shares between pods, the indices of its slot units."""
    groups: dict[tuple[int, int], list[int]] = {}
    for index, unit in enumerate(fleet.units):
        if unit.sharing == DRA and unit.timeslice_replicas > 1:
            groups.setdefault((unit.physical, unit.mig_gi_id), []).append(index)
    return tuple(np.array(rows, dtype=np.int64) for rows in groups.values())


def _merge_shared(grid: _Grid, shared: tuple[I64, ...]) -> None:
    """Every slot of a shared DRA device reads the device: the sum over its pods."""
    for rows in shared:
        grid.util[rows] = np.minimum(1.0, grid.util[rows].sum(axis=0))
        grid.memory[rows] = np.minimum(1.0, grid.memory[rows].sum(axis=0))
        grid.xid[rows] = grid.xid[rows].max(axis=0)


@dataclass
class _Grid:
    """Mutable (unit × instant) arrays filled by the pods that hold units."""

    holder: NDArray[np.int32]
    util: F64
    memory: F64
    xid: I64


def _fill(fleet: Fleet, table: _Units, ts: I64, instances: list[PodInstance]) -> _Grid:
    """Holder, utilization, memory fraction and XID of every unit and instant."""
    shape = (len(fleet.units), len(ts))
    grid = _Grid(
        np.full(shape, -1, np.int32), np.zeros(shape), np.zeros(shape), np.zeros(shape, np.int64)
    )
    fast = uniform(table.keys, ts, _FAST)
    slow = slow_uniform(table.keys, ts, _SLOW, HOUR_S // 2)
    mem_noise = slow_uniform(table.keys, ts, _MEMORY, 3 * HOUR_S)
    for index, inst in enumerate(instances):
        lo, hi = np.searchsorted(ts, [inst.started_ts, inst.finished_ts])
        if lo >= hi:
            continue
        rows = np.array(inst.units)
        if (grid.holder[rows, lo:hi] >= 0).any():
            raise ValueError(f"simulated pod {inst.name} takes a GPU unit another pod holds")
        grid.holder[rows, lo:hi] = index
        spec = fleet.workloads[inst.workload]
        rotation = stable_hash(spec.key, inst.cycle, inst.replica) % len(rows)
        busy = busy_mask(spec.pattern, len(rows), rotation)
        part, part_fast = ts[lo:hi], fast[rows, lo:hi]
        act = activity(spec.pattern, part, slow[rows, lo:hi])
        grid.util[rows, lo:hi] = utilization(spec.pattern, act, busy, slow[rows, lo:hi], part_fast)
        grid.memory[rows, lo:hi] = memory_fraction(
            spec.pattern, act, busy, mem_noise[rows, lo:hi], part_fast
        )
        if spec.xid_rate > 0:
            draw = uniform(table.keys[rows], part, _XID)
            grid.xid[rows, lo:hi] = np.where(draw < spec.xid_rate, spec.xid_code, 0)
    _merge_shared(grid, table.shared)
    return grid


def _device_util(table: _Units, util: F64) -> F64:
    """Utilization per physical GPU (its units' weighted sum)."""
    device: F64 = np.add.reduceat(util * table.weight[:, None], table.starts, axis=0)
    return device


def _device(table: _Units, ts: I64, device_util: F64) -> tuple[F64, F64]:
    """Power and temperature per unit: device-level readings of each unit's physical GPU."""
    power_noise = uniform(table.keys[table.starts], ts, _POWER)
    temp_noise = slow_uniform(table.keys[table.starts], ts, _TEMP, HOUR_S)
    power = power_w(device_util, table.idle_w, table.max_w, power_noise)[table.physical]
    temp = temperature_c(device_util, table.temp_offset_c, temp_noise)[table.physical]
    power[table.is_mig] = np.nan
    return power, temp


def _exporter_up(fleet: Fleet, ts: I64) -> BOOL:
    """False where a unit's node exporter is down or a failed GPU is silent."""
    up = ~silent(fleet, ts)
    if len(ts) == 0:
        return up
    for outage in fleet.outages:
        where = (outage.cluster, outage.node)
        rows = np.array([i for i, u in enumerate(fleet.units) if (u.cluster, u.node) == where])
        for begin, end in outage.windows(int(ts[0]), int(ts[-1]) + 1):
            up[np.ix_(rows, (ts >= begin) & (ts < end))] = False
    return up


def _samples(fleet: Fleet, ts: I64, step_s: int, instances: list[PodInstance]) -> pd.DataFrame:
    table = _unit_table(fleet)
    grid = _fill(fleet, table, ts, instances)
    apply_xid_events(fleet, grid.xid, ts, grid.holder, instances)
    # As exported: whole percents for DCGM_FI_DEV_GPU_UTIL, six decimals for the PROF ratio.
    grid.util = np.where(
        table.is_dev[:, None], np.round(grid.util * 100.0) / 100.0, np.round(grid.util, 6)
    )
    device_util = _device_util(table, grid.util)
    power, temp = _device(table, ts, device_util)
    values = {
        "util_ratio": grid.util,
        "fb_used_mib": np.round(grid.memory * table.memory[:, None]),
        "power_w": power,
        "temp_c": temp,
    }
    up = _exporter_up(fleet, ts)
    keep = up.ravel()
    unit = np.repeat(np.arange(len(fleet.units)), len(ts))[keep]
    frame = _key_columns(fleet, table, unit, grid.holder.ravel()[keep], instances)
    frame["ts"] = np.tile(ts, len(fleet.units))[keep]
    frame["step_s"] = np.full(len(unit), step_s, dtype=np.int64)
    for name, array in values.items():
        frame[name] = array.ravel()[keep]
    frame["util_signal"] = _categorical(table.is_dev[unit].astype(np.int64), UTIL_SIGNAL_NAMES)
    frame["fb_total_mib"] = table.memory[unit]
    frame["xid"] = grid.xid.ravel()[keep]
    reported = (up, _exporter_up(fleet, ts - step_s))
    frame |= health_columns(
        fleet, ts, step_s, (grid.util, device_util), grid.holder, instances, reported
    )
    return pd.DataFrame(frame, columns=list(SAMPLE_COLUMNS))


def _categorical(codes: I64, categories: list[str] | tuple[str, ...]) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=pd.Index(list(categories), dtype=object))


def _key_columns(
    fleet: Fleet, table: _Units, unit: I64, holder: NDArray[np.int32], instances: list[PodInstance]
) -> dict[str, object]:
    """Natural-key columns of the kept rows: unit identity and the holding pod (or missing)."""
    uuid_codes, uuids = pd.factorize(pd.Series([u.uuid for u in fleet.units], dtype=object))
    ns_codes, namespaces = pd.factorize(pd.Series([i.namespace for i in instances], dtype=object))
    pod_codes, pods = pd.factorize(pd.Series([i.name for i in instances], dtype=object))
    uid_codes = np.arange(len(instances), dtype=np.int64)

    def held(codes: NDArray[np.int64]) -> I64:
        return np.append(codes, -1)[holder]

    return {
        "cluster": _categorical(table.cluster_codes[unit], fleet.clusters),
        "uuid": _categorical(uuid_codes[unit], list(uuids)),
        "mig_gi_id": table.gi[unit],
        "slot": table.slot[unit],
        "namespace": _categorical(held(ns_codes), list(namespaces)),
        "pod": _categorical(held(pod_codes), list(pods)),
        "pod_uid": _categorical(held(uid_codes), [i.uid for i in instances]),
    }
