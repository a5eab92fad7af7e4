"""The unheld slots of a shared GPU, from its device-level series (pure, no I/O).

With ``--kubernetes-virtual-gpus`` dcgm-exporter gives each pod on a time-sliced or MPS GPU a
series of its own (a ``vgpu`` label: a slot unit), and keeps the GPU's device-level series.
Slots no pod holds have no series at all. So that a GPU of ``R`` replicas always counts ``R``
slots (contract section 3: unheld slots are unallocated capacity), every slot without a
per-pod row at an instant gets a row there, held by nobody: no work (utilization 0, no memory
used, as the held slots' rows carry the GPU's work) and the device's other readings (memory
total, power, temperature, XID, copied to every slot as the exporter copies them to each pod's
series). The device-level rows themselves are then dropped, so nothing is counted twice.

Without ``--kubernetes-virtual-gpus`` DCGM sees such a GPU whole, and its series carries the
labels of one of the pods on it, whichever won. There, on a node known to share its GPUs, the
GPU becomes its ``R`` slots, each with the GPU's readings and held by nobody: the pods on the
node then take slots by node-level attribution (docs/cost-model.md), one slot per replica they
request, rather than one pod paying for the whole GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from gpuwatch.collectors.page import DEVICE_SLOT, UNIT_DTYPES, UNIT_KEY, PageSamples

#: Readings a free slot's rows hold at 0: the work is the held slots' (the GPU's state, its
#: clocks, clock events and error counts, is copied like its temperature).
IDLE_VALUES = ("util_ratio", "fb_used_mib", "sm_active_ratio", "sm_occupancy_ratio",
               "tensor_active_ratio", "dram_active_ratio", "pcie_bytes_per_s",
               "nvlink_bytes_per_s")  # fmt: skip


def _free_rows(
    page: PageSamples, device: int, replicas: int
) -> list[tuple[tuple[str, int, int], np.ndarray]]:
    """Per slot of the device unit's GPU: the device rows at instants the slot has no row."""
    uuid = str(page.units["uuid"].iloc[device])
    gi = int(page.units["mig_gi_id"].to_numpy()[device])
    rows = np.flatnonzero(page.unit == device)
    out = []
    for slot in range(replicas):
        key = (str(uuid), gi, slot)
        held = _unit_index(page.units, key)
        if held == device:  # a GPU seen whole is its own slot 0: that is not a pod's row
            held = None
        taken = page.ts[page.unit == held] if held is not None else np.zeros(0, np.int64)
        free = rows[~np.isin(page.ts[rows], taken)]
        if len(free):
            out.append((key, free))
    return out


def _unit_index(units: pd.DataFrame, key: tuple[str, int, int]) -> int | None:
    match = np.flatnonzero(
        (units["uuid"].to_numpy() == key[0])
        & (units["mig_gi_id"].to_numpy() == key[1])
        & (units["slot"].to_numpy() == key[2])
    )
    return int(match[0]) if len(match) else None


@dataclass(frozen=True)
class _Part:
    """Rows of a device unit that become a slot's: ``idle`` when pods' own series carry the
    GPU's work (the slot is free), else the GPU's readings stand for every slot."""

    rows: np.ndarray
    key: tuple[str, int, int]
    source: int
    idle: bool


def _combined(page: PageSamples, devices: np.ndarray, parts: list[_Part]) -> PageSamples:
    """The page's rows less the device-level ones, plus each part's rows under its slot."""
    keep = np.flatnonzero(~np.isin(page.unit, devices))
    keys = [tuple(k) for k in page.units[UNIT_KEY].itertuples(index=False, name=None)]
    index = np.concatenate([keep, *(p.rows for p in parts)])
    # Keys are mapped per unit, not per row: a page has thousands of units and millions of rows.
    kept_units = np.unique(page.unit[keep]).tolist()
    order_keys = sorted({keys[u] for u in kept_units} | {part.key for part in parts})
    position = {key: n for n, key in enumerate(order_keys)}
    code = np.zeros(len(keys), dtype=np.int64)
    code[kept_units] = [position[keys[u]] for u in kept_units]
    unit = np.concatenate(
        [code[page.unit[keep]], *(np.full(len(p.rows), position[p.key]) for p in parts)]
    )
    order = np.lexsort((page.ts[index], unit))
    sources = np.concatenate([page.source[keep], *(np.full(len(p.rows), p.source) for p in parts)])
    idle = np.concatenate(
        [np.zeros(len(keep), bool), *(np.full(len(p.rows), p.idle) for p in parts)]
    )
    # slots made here are vgpu slots of their GPU, held by nobody
    known = page.units.drop(index=devices.tolist())
    units = pd.DataFrame(order_keys, columns=UNIT_KEY).merge(known, on=UNIT_KEY, how="left")
    units = units.fillna({"shared_by": 1, "vgpu": True, "claimed": False})
    picked, free = index[order], idle[order]
    values = {name: column[picked] for name, column in page.values.items()}
    for name in IDLE_VALUES:  # a slot no pod holds does no work
        if name in values:
            values[name] = np.where(free & ~np.isnan(values[name]), 0.0, values[name])
    return replace(
        page,
        units=units.astype(UNIT_DTYPES),
        unit=unit[order],
        ts=page.ts[picked],
        source=sources[order],
        util_signal=page.util_signal[picked],
        values=values,
    )


def _seen_whole(page: PageSamples, replicas_by_node: Mapping[str, int]) -> np.ndarray:
    """Units that are a whole GPU (no MIG instance, no ``vgpu`` slot, no claim) of a GPU with
    no per-pod series, on a node known to share its GPUs."""
    units = page.units
    sliced = set(units.loc[units["vgpu"].to_numpy(dtype=bool), "uuid"])
    candidate = (
        (units["mig_gi_id"].to_numpy() < 0)
        & (units["slot"].to_numpy() == 0)
        & ~units["vgpu"].to_numpy(dtype=bool)
        & ~units["claimed"].to_numpy(dtype=bool)
        & ~units["uuid"].isin(sliced).to_numpy()
    )
    # rows are sorted by unit: each unit's first row names its node
    first = np.searchsorted(page.unit, np.arange(len(units)))
    present = first < len(page.unit)
    nodes = page.series["node"].to_numpy(dtype=object)[page.source[first[present]]]
    shared = np.zeros(len(units), dtype=bool)
    shared[present] = [replicas_by_node.get(str(node), 0) > 1 for node in nodes.tolist()]
    return np.flatnonzero(candidate & shared)


def fill_free_slots(page: PageSamples, replicas_by_node: Mapping[str, int]) -> PageSamples:
    """``page`` with every slot of its shared GPUs: the unheld slots of GPUs with per-pod
    series filled from their device-level rows (``DEVICE_SLOT`` units, whose rows are then
    dropped), and GPUs seen whole on a node that shares its GPUs split into their slots. A GPU's
    replicas are its node's (``replicas_by_node``); on a node not known to share its GPUs
    nothing is filled."""
    devices = np.flatnonzero(page.units["slot"].to_numpy() == DEVICE_SLOT)
    whole = (
        _seen_whole(page, replicas_by_node) if replicas_by_node and len(page.unit) else devices[:0]
    )
    if not len(devices) and not len(whole):
        return page
    series = page.series
    parts: list[_Part] = []
    for device in [*devices.tolist(), *whole.tolist()]:
        rows = np.flatnonzero(page.unit == device)
        node = series.at[int(page.source[rows[0]]), "node"]
        found = _free_rows(page, device, int(replicas_by_node.get(str(node), 0)))
        if not found:
            continue
        # a series of the device's identity that names no pod: the slots' attribution
        blank = series.loc[[int(page.source[rows[0]])]].assign(
            namespace=None, pod=None, container=None
        )
        series = pd.concat([series, blank], ignore_index=True)
        idle = device in set(devices.tolist())
        parts.extend(_Part(free, key, len(series) - 1, idle) for key, free in found)
    return _combined(replace(page, series=series), np.concatenate([devices, whole]), parts)
