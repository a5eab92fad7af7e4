"""How a GPU is handed out to pods, and the share of a physical GPU one unit stands for.

Modes (contract section 7, the weekly CSV's ``allocation`` column):

- ``device-plugin``: whole GPUs by ``nvidia.com/gpu``;
- ``mig``: a MIG instance (``nvidia.com/mig-<profile>``), ``g/7`` of its GPU (A30: ``g/4``);
- ``time-slice``: one of the ``R`` replica slots of a time-sliced GPU, ``1/R`` of it;
- ``mps``: one of the ``R`` MPS client slots of a GPU, ``1/R`` of it;
- ``dra``: a device allocated to a ResourceClaim (Dynamic Resource Allocation): the whole GPU
  or MIG instance it is, and ``1/k`` of it for each of ``k`` pods sharing the claim.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpuwatch.domain.mig import mig_fraction

DEVICE_PLUGIN = "device-plugin"
MIG = "mig"
TIME_SLICE = "time-slice"
MPS = "mps"
DRA = "dra"
MODES: tuple[str, ...] = (DEVICE_PLUGIN, MIG, TIME_SLICE, MPS, DRA)
#: Modes a node hands its GPUs out by (a node's MIG instances are ``mig`` units of any of them).
NODE_MODES: tuple[str, ...] = (DEVICE_PLUGIN, TIME_SLICE, MPS, DRA)


def gpu_share(mig_profile: object, model: object, replicas: object) -> float:
    """The share of a physical GPU one unit stands for: ``g/7`` for a MIG instance (A30:
    ``g/4``), divided by the ``replicas`` its GPU or instance is split into (time-slice or MPS
    slots, pods sharing a DRA claim); 1 for a whole GPU."""
    share = 1.0
    if isinstance(mig_profile, str) and mig_profile:
        share = mig_fraction(mig_profile, model if isinstance(model, str) else None)
    count = _count(replicas)
    return share / count if count > 1 else share


def _count(value: object) -> int:
    try:
        return int(value)  # type: ignore[call-overload, no-any-return]
    except (TypeError, ValueError):
        return 1  # missing (NA, None): not split


def unit_mode(sharing: object, mig_profile: object, replicas: object) -> str:
    """The mode of one unit: its stored ``sharing``, else (units stored before modes were) a
    MIG instance is ``mig``, a slot of a GPU split in several ``time-slice``, else
    ``device-plugin``."""
    if isinstance(sharing, str) and sharing in MODES:
        return sharing
    if isinstance(mig_profile, str) and mig_profile:
        return MIG
    return TIME_SLICE if _count(replicas) > 1 else DEVICE_PLUGIN


def joined(modes: Iterable[str]) -> str:
    """Several modes as the CSV writes them: distinct, sorted, ``+``-joined."""
    return "+".join(sorted({m for m in modes if m}))
