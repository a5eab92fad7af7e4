"""ResourceClaims (DRA) into store rows, and the claim join for DCGM series without pod labels."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd

from gpuwatch.collectors.kube_parse import KubeSnapshot
from gpuwatch.collectors.page import PageSamples


def dra_device_rows(snap: KubeSnapshot) -> list[dict[str, Any]]:
    """One ``dra_devices`` row per device a ResourceClaim holds (without the cluster id)."""
    return [
        {
            "claim_namespace": d.claim_namespace,
            "claim_name": d.claim_name,
            "claim_uid": d.claim_uid,
            "request": d.request,
            "driver": d.driver,
            "pool": d.pool,
            "device": d.device,
            "node": d.node,
            "gpu_uuid": d.gpu_uuid,
            "mig_profile": d.mig_profile,
            "product": d.product,
            "memory_mib": d.memory_mib,
            "consumers": [list(c) for c in d.consumers],
            "first_seen_ts": snap.taken_ts,
            "last_seen_ts": snap.taken_ts,
        }
        for d in snap.dra.devices
    ]


def _claim_holders(snap: KubeSnapshot) -> dict[tuple[str, str | None], tuple[str, str]]:
    """(GPU UUID, MIG profile or None) → the one pod a claim reserves that device for. A device
    shared by several pods, or a MIG profile held twice on one GPU, is left out: which series is
    whose cannot be told without the exporter's own labels."""
    found: dict[tuple[str, str | None], list[tuple[str, str]]] = {}
    for d in snap.dra.devices:
        if d.gpu_uuid and len(d.consumers) == 1:
            namespace, name, _ = d.consumers[0]
            found.setdefault((d.gpu_uuid, d.mig_profile), []).append((namespace, name))
    return {key: pods[0] for key, pods in found.items() if len(pods) == 1}


def attribute_claims(
    page: PageSamples, pairs: pd.DataFrame, snap: KubeSnapshot | None
) -> PageSamples:
    """Series without pod labels on a device a ResourceClaim holds (an exporter without DRA
    pod mapping) are attributed to the claim's pod, joined by GPU UUID (and MIG profile).
    The same ``page`` when nothing changes (its :meth:`~PageSamples.pairs` still hold)."""
    if snap is None or not snap.dra.devices:
        return page
    holders = _claim_holders(snap)
    found = []
    columns = ["unit", "source", "uuid", "mig_gi_id", "mig_profile", "pod"]
    for unit, source, uuid, gi, profile, pod in pairs[columns].itertuples(index=False):
        key = (str(uuid), profile if int(gi) >= 0 and isinstance(profile, str) else None)
        holder = holders.get(key)
        if not isinstance(pod, str) and holder is not None:
            found.append((unit, source, holder))
    if not found:
        return page
    series, units = page.series.copy(), page.units.copy()
    for unit, source, holder in found:
        series.loc[source, ["namespace", "pod"]] = holder
        units.loc[unit, "claimed"] = True
    return replace(page, series=series, units=units)
