"""The unheld slots of a shared GPU, from its device-level series (pure, no I/O).

With ``--kubernetes-virtual-gpus`` dcgm-exporter gives each pod on a time-sliced or MPS GPU a
series of its own (a ``vgpu`` label: a slot unit), and keeps the GPU's device-level series.
Slots no pod holds have no series at all. So that a GPU of ``R`` replicas always counts ``R``
slots (contract section 3: unheld slots are unallocated capacity), every slot without a
per-pod row at an instant gets a row there, held by nobody: no work (utilization 0, no memory
used, as the held slots' rows carry the GPU's work) and the device's other readings (memory
total, power, temperature, XID, copied to every slot as the exporter copies them to each pod's
series). The device-level rows themselves are then dropped, so nothing is counted twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import pandas as pd

from gpuwatch.collectors.page import DEVICE_SLOT, UNIT_DTYPES, UNIT_KEY, PageSamples

#: Readings a free slot's rows hold at 0: the work is the held slots'.
IDLE_VALUES = ("util_ratio", "fb_used_mib")


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


def fill_free_slots(page: PageSamples, replicas_by_node: Mapping[str, int]) -> PageSamples:
    """``page`` with the unheld slots of its shared GPUs filled from their device-level rows
    (``DEVICE_SLOT`` units, whose rows are then dropped). A GPU's replicas are its node's
    (``replicas_by_node``); on a node not known to share its GPUs nothing is filled."""
    devices = np.flatnonzero(page.units["slot"].to_numpy() == DEVICE_SLOT)
    if not len(devices):
        return page
    series = page.series
    parts: list[tuple[np.ndarray, list[tuple[str, int, int]], int]] = []
    for device in devices.tolist():
        rows = np.flatnonzero(page.unit == device)
        node = series.at[int(page.source[rows[0]]), "node"]
        found = _free_rows(page, device, int(replicas_by_node.get(str(node), 0)))
        if not found:
            continue
        # a series of the device's identity that names no pod: the free slots' attribution
        blank = series.loc[[int(page.source[rows[0]])]].assign(
            namespace=None, pod=None, container=None
        )
        series = pd.concat([series, blank], ignore_index=True)
        parts.extend((free, [key], len(series) - 1) for key, free in found)
    return _combined(replace(page, series=series), devices, parts)


def _combined(
    page: PageSamples,
    devices: np.ndarray,
    parts: list[tuple[np.ndarray, list[tuple[str, int, int]], int]],
) -> PageSamples:
    """The page's rows less the device-level ones, plus each part's rows under its slot."""
    keep = np.flatnonzero(~np.isin(page.unit, devices))
    keys = [tuple(k) for k in page.units[UNIT_KEY].itertuples(index=False, name=None)]
    rows = [keep] + [free for free, _, _ in parts]
    unit_keys = [[keys[u] for u in page.unit[keep].tolist()]]
    unit_keys += [key * len(free) for free, key, _ in parts]
    sources = [page.source[keep]] + [np.full(len(free), src) for free, _, src in parts]
    index = np.concatenate(rows)
    flat = [k for chunk in unit_keys for k in chunk]
    order_keys = sorted(set(flat))
    position = {key: n for n, key in enumerate(order_keys)}
    unit = np.array([position[k] for k in flat], dtype=np.int64)
    order = np.lexsort((page.ts[index], unit))
    # slots made here are vgpu slots of their GPU, held by nobody
    units = pd.DataFrame(order_keys, columns=UNIT_KEY).merge(page.units, on=UNIT_KEY, how="left")
    units = units.fillna({"shared_by": 1, "vgpu": True, "claimed": False})
    picked = index[order]
    free = (np.arange(len(index)) >= len(keep))[order]
    values = {name: column[picked] for name, column in page.values.items()}
    for name in IDLE_VALUES:  # a slot no pod holds does no work
        values[name] = np.where(free & ~np.isnan(values[name]), 0.0, values[name])
    return replace(
        page,
        units=units.astype(UNIT_DTYPES),
        unit=unit[order],
        ts=page.ts[picked],
        source=np.concatenate(sources)[order],
        util_signal=page.util_signal[picked],
        values=values,
    )
