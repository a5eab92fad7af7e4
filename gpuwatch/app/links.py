"""Where a GPU unit's page lives: ``/gpu?uuid=GPU-…`` (plus ``gi`` for a MIG instance and
``slot`` for a time-slice or MPS slot), the same address after the store is rebuilt; and a
workload's, ``/workload?cluster=…&namespace=…&kind=…&name=…``.

Store ids (``/gpu?id=…``) change when a store is rebuilt; links by UUID do not, and links by id
from before are still read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from gpuwatch.app.context import query_value
from gpuwatch.app.data import Filters, Snapshot

PATH = "/gpu"


def workload_href(f: Filters, row: Mapping[str, Any]) -> str:
    """The page of the workload a row names (``cluster``, ``namespace``, ``workload_kind``,
    ``workload``), with the filters ``f``."""
    return f.href(
        "/workload",
        cluster=row["cluster"],
        namespace=row["namespace"],
        kind=row["workload_kind"],
        name=row["workload"],
    )


def unit_address(unit: Mapping[str, Any]) -> dict[str, str]:
    """The query naming one unit: its GPU's UUID, then the MIG instance and slot if any."""
    address = {"uuid": str(unit["gpu_uuid"])}
    if int(unit["mig_gi_id"]) >= 0:
        address["gi"] = str(int(unit["mig_gi_id"]))
    if int(unit["slot"]) > 0:
        address["slot"] = str(int(unit["slot"]))
    return address


def _addresses(snap: Snapshot) -> dict[int, dict[str, str]]:
    def compute() -> dict[int, dict[str, str]]:
        names = ("gpu_id", "gpu_uuid", "mig_gi_id", "slot")
        rows = snap.units[list(names)].astype(object).itertuples(index=False, name=None)
        return {int(row[0]): unit_address(dict(zip(names, row, strict=True))) for row in rows}

    return snap.memo(("gpu_addresses",), compute, pin=True)


def gpu_href(f: Filters, snap: Snapshot, gpu_id: int) -> str:
    """The page of the unit with store id ``gpu_id``, filters kept."""
    address = _addresses(snap).get(int(gpu_id))
    return f.href(PATH, **(address or {"id": str(gpu_id)}))


def _number(text: str | None, default: int) -> int:
    """``text`` as an integer, ``default`` when absent; -2 (no unit has it) when not a number."""
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        return -2


def find_unit(snap: Snapshot, query: Mapping[str, object]) -> pd.Series | None:
    """The unit a page's query names: by ``uuid`` (``gi``, ``slot``), else by store ``id``.

    A UUID alone names the GPU's first unit (its first MIG instance or slot) when it has no
    whole-GPU unit. None when nothing in the store matches.
    """
    units = snap.units
    uuid, gi_text, slot_text = (query_value(query, n) for n in ("uuid", "gi", "slot"))
    if uuid:
        gi, slot = _number(gi_text, -1), _number(slot_text, 0)
        same = units[units["gpu_uuid"].astype(object).eq(uuid)]
        exact = same[same["mig_gi_id"].eq(gi) & same["slot"].eq(slot)]
        if not exact.empty:
            return exact.iloc[0]
        first = same.sort_values(["mig_gi_id", "slot"], kind="stable")
        alone = gi_text is None and slot_text is None
        return first.iloc[0] if alone and not first.empty else None
    gpu_id = _number(query_value(query, "id"), -1)
    rows = units[units["gpu_id"].eq(gpu_id)]
    return None if rows.empty else rows.iloc[0]
