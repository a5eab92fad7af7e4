"""Dynamic Resource Allocation checks: claimed devices DCGM does not show, and DCGM series on
claimed devices that carry none of the claim's pods (docs/collectors.md#dra). Pure."""

from __future__ import annotations

import pandas as pd

#: Columns of :func:`claim_checks`.
CHECK_COLUMNS = ("cluster", "claim", "device", "gpu_uuid", "pods", "problem")
NO_UUID = "its ResourceSlice gives no GPU UUID: no DCGM series can be joined to it"
NO_SERIES = "no DCGM series for this GPU: its cost is not attributed to the claim"
NO_POD = "DCGM series on this device carry none of the claim's pods in the window"


def _pods(consumers: object) -> str:
    if not isinstance(consumers, list):
        return ""
    return ", ".join(f"{c[0]}/{c[1]}" for c in consumers if isinstance(c, list) and len(c) >= 2)


def claim_checks(
    devices: pd.DataFrame, units: pd.DataFrame, held_uuids: frozenset[tuple[str, str]]
) -> pd.DataFrame:
    """Per claimed device of the last Kubernetes snapshot (``devices``: the store's
    ``dra_devices`` frame with ``cluster``), what keeps its GPU from being attributed: no
    UUID, no DCGM series of that GPU (``units``: the GPU units frame), or series of it that no
    pod held in the window (``held_uuids``: (cluster, GPU UUID) held by some pod). Devices
    attributed as they should be are left out."""
    if devices.empty:
        return pd.DataFrame({name: pd.Series(dtype=object) for name in CHECK_COLUMNS})
    seen = {(str(a), str(b)) for a, b in units[["cluster", "gpu_uuid"]].astype(object).values}
    rows = []
    for d in devices.to_dict("records"):
        uuid = d["gpu_uuid"] if isinstance(d["gpu_uuid"], str) and d["gpu_uuid"] else None
        key = (str(d["cluster"]), uuid or "")
        problem = (
            NO_UUID
            if uuid is None
            else NO_SERIES
            if key not in seen
            else NO_POD
            if key not in held_uuids
            else None
        )
        if problem is not None:
            rows.append(
                {
                    "cluster": d["cluster"],
                    "claim": f"{d['claim_namespace']}/{d['claim_name']}",
                    "device": f"{d['driver']}/{d['pool']}/{d['device']}",
                    "gpu_uuid": uuid or "",
                    "pods": _pods(d["consumers"]),
                    "problem": problem,
                }
            )
    return pd.DataFrame(rows, columns=list(CHECK_COLUMNS))
