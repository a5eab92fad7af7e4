"""Pure parsers of Dynamic Resource Allocation objects (``resource.k8s.io``) into GPU devices.

No I/O and no clock: :mod:`gpuwatch.collectors.kube` lists ResourceClaims, ResourceSlices and
DeviceClasses (plain JSON dicts) at the best version the API server serves and passes them in.

- A claim's devices are the results of its ``status.allocation`` (none while it waits for an
  allocation or once it is deallocated) whose driver is a GPU driver; admin-access results
  (monitoring, not holding) are left out. Each result names the request it satisfies (for a
  ``firstAvailable`` request, ``<request>/<subrequest>``), whose ``deviceClassName`` is kept.
- What a device is comes from the ResourceSlice that publishes it, found by (driver, pool,
  device), the pool's newest generation: the NVIDIA driver's attributes ``type`` (``gpu`` or
  ``mig``), ``uuid``, ``parentUUID`` (a MIG device's GPU), ``profile``, ``productName`` and the
  capacity ``memory``. Attribute names may carry the driver's domain (``gpu.nvidia.com/uuid``).
  v1beta1 nests attributes and capacity under ``basic``; v1beta2 and v1 do not.
- Consumers: ``status.reservedFor`` entries of resource ``pods`` (a claim is only ever reserved
  for pods of its own namespace).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gpuwatch.collectors.dra_slices import (
    DeviceKey,
    DraNode,
    Published,
    dra_nodes,
    identity,
    published_devices,
)
from gpuwatch.domain.words import counted

JsonObject = Mapping[str, Any]
#: A consumer pod: (namespace, name, uid).
Consumer = tuple[str, str, str]
K = TypeVar("K", bound=Hashable)

GROUP = "resource.k8s.io"
#: The versions gpuwatch reads, best first.
VERSIONS: tuple[str, ...] = ("v1", "v1beta2", "v1beta1")
DEFAULT_GPU_DRIVERS: tuple[str, ...] = ("gpu.nvidia.com",)
NOT_LISTED = "not listed"


@dataclass(frozen=True)
class DraDevice:
    """One device allocated to a ResourceClaim (a ``dra_devices`` row without ids and times)."""

    claim_namespace: str
    claim_name: str
    claim_uid: str
    request: str
    driver: str
    pool: str
    device: str
    node: str | None
    gpu_uuid: str | None
    mig_profile: str | None
    mig_uuid: str | None
    product: str | None
    memory_mib: int | None
    device_class: str | None
    consumers: tuple[Consumer, ...]


@dataclass(frozen=True)
class DraState:
    """What the API server showed of DRA; ``off_reason`` is empty when attribution is on.

    ``api_version``: the ``resource.k8s.io`` version read (``v1``); ``devices``: the GPU devices
    claims hold, ordered by claim; ``gpu_nodes``: nodes whose ResourceSlices publish devices of a
    GPU driver, ``nodes`` what those slices say of each; ``gpu_classes``: DeviceClasses that
    select a GPU driver's devices.
    """

    api_version: str | None
    off_reason: str
    devices: tuple[DraDevice, ...] = ()
    gpu_nodes: frozenset[str] = frozenset()
    nodes: Mapping[str, DraNode] = field(default_factory=dict, hash=False)
    gpu_classes: frozenset[str] = frozenset()

    @property
    def on(self) -> bool:
        return not self.off_reason

    def summary(self) -> str:
        """One line for the collect output."""
        if not self.on:
            return f"DRA attribution off: {self.off_reason}"
        devices = counted(len(self.devices), "device")
        claims = counted(len({d.claim_uid for d in self.devices}), "claim")
        return f"DRA attribution on ({GROUP}/{self.api_version}): {devices} in {claims}"


def dra_off(reason: str, api_version: str | None = None) -> DraState:
    """DRA attribution off, for ``reason``."""
    return DraState(api_version, reason or NOT_LISTED)


def served_versions(group: JsonObject) -> list[str]:
    """The versions an APIGroup object (``GET /apis/resource.k8s.io``) lists as served."""
    return [
        str(v.get("version") or "")
        for v in group.get("versions") or []
        if isinstance(v, Mapping) and v.get("version")
    ]


def pick_version(group: JsonObject) -> str | None:
    """The best of :data:`VERSIONS` the group serves (whatever its preferredVersion), or None."""
    served = set(served_versions(group))
    return next((version for version in VERSIONS if version in served), None)


# -- ResourceClaims ---------------------------------------------------------------------------


def request_classes(claim: JsonObject) -> dict[str, str]:
    """Request name → deviceClassName, ``<request>/<subrequest>`` for ``firstAvailable``.

    v1beta1 names the class on the request; v1beta2 and v1 under ``exactly``.
    """
    devices = ((claim.get("spec") or {}).get("devices")) or {}
    out: dict[str, str] = {}
    for request in devices.get("requests") or []:
        name = str(request.get("name") or "")
        exact = request.get("exactly") if isinstance(request.get("exactly"), Mapping) else request
        if exact.get("deviceClassName"):
            out[name] = str(exact["deviceClassName"])
        for sub in request.get("firstAvailable") or []:
            if sub.get("name") and sub.get("deviceClassName"):
                out[f"{name}/{sub['name']}"] = str(sub["deviceClassName"])
    return out


def consumers(claim: JsonObject) -> tuple[Consumer, ...]:
    """The pods a claim is reserved for, as sorted (namespace, name, uid)."""
    namespace = str((claim.get("metadata") or {}).get("namespace") or "")
    reserved = (claim.get("status") or {}).get("reservedFor") or []
    return tuple(
        sorted(
            {
                (namespace, str(ref["name"]), str(ref.get("uid") or ""))
                for ref in reserved
                if ref.get("resource") == "pods" and not ref.get("apiGroup") and ref.get("name")
            }
        )
    )


def claim_devices(
    claim: JsonObject,
    published: Mapping[DeviceKey, Published],
    gpu_drivers: Sequence[str],
) -> list[DraDevice]:
    """The GPU devices allocated to one claim (none without ``status.allocation``)."""
    meta = claim.get("metadata") or {}
    allocation = (claim.get("status") or {}).get("allocation") or {}
    claim_fields: dict[str, Any] = {
        "claim_namespace": str(meta.get("namespace") or ""),
        "claim_name": str(meta.get("name") or ""),
        "claim_uid": str(meta.get("uid") or ""),
        "consumers": consumers(claim),
    }
    classes = request_classes(claim)
    out: dict[tuple[str, str, str], DraDevice] = {}
    for result in (allocation.get("devices") or {}).get("results") or []:
        key = tuple(str(result.get(k) or "") for k in ("driver", "pool", "device"))
        driver, pool, name = key
        if driver not in gpu_drivers or result.get("adminAccess") is True or not name:
            continue
        request = str(result.get("request") or "")
        device_class = classes.get(request) or classes.get(request.split("/", maxsplit=1)[0])
        out.setdefault(
            (driver, pool, name),
            DraDevice(
                request=request,
                driver=driver,
                pool=pool,
                device=name,
                device_class=device_class,
                **claim_fields,
                **identity(published.get((driver, pool, name))),
            ),
        )
    return list(out.values())


def gpu_classes(classes: Iterable[JsonObject], gpu_drivers: Sequence[str]) -> frozenset[str]:
    """DeviceClasses whose CEL selectors name a GPU driver in quotes, as in
    ``device.driver == "gpu.nvidia.com"``."""
    out = set()
    for item in classes:
        name = str((item.get("metadata") or {}).get("name") or "")
        selectors = (item.get("spec") or {}).get("selectors") or []
        text = " ".join(str((s.get("cel") or {}).get("expression") or "") for s in selectors)
        if name and any(f'"{d}"' in text or f"'{d}'" in text for d in gpu_drivers):
            out.add(name)
    return frozenset(out)


def parse_dra(
    claims: Iterable[JsonObject],
    slices: Iterable[JsonObject],
    classes: Iterable[JsonObject],
    api_version: str,
    gpu_drivers: Sequence[str] = DEFAULT_GPU_DRIVERS,
) -> DraState:
    """DRA attribution on, from listed claims, slices and device classes at ``api_version``.

    The shapes of every version are read (v1beta1's ``basic`` devices and requests naming
    their class, v1beta2 and v1's flat devices and ``exactly`` requests), whatever
    ``api_version`` says: it is recorded, not trusted.
    """
    published = published_devices(slices, gpu_drivers)
    devices = [
        device
        for claim in sorted(claims, key=_claim_key)
        for device in claim_devices(claim, published, gpu_drivers)
    ]
    nodes = dra_nodes(published)
    return DraState(
        api_version, "", tuple(devices), frozenset(nodes), nodes, gpu_classes(classes, gpu_drivers)
    )


def _claim_key(claim: JsonObject) -> tuple[str, str]:
    meta = claim.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


# -- pods -------------------------------------------------------------------------------------


def consumer_gpus(devices: Iterable[DraDevice]) -> dict[Consumer, tuple[str | None, int]]:
    """Per consumer pod (namespace, name, uid): the device class of most of its GPU devices
    (ties: the first by name; the driver where no class is known) and how many it holds.
    A device shared by k pods counts 1 for each of them."""
    return _count_held(devices, lambda consumer: consumer)


def pod_claim_gpus(devices: Iterable[DraDevice]) -> dict[tuple[str, str], tuple[str | None, int]]:
    """Per pod (namespace, name): the device class and number of GPU devices it holds through
    claims, as :func:`consumer_gpus` counts them, whatever the pod's uid."""
    return _count_held(devices, lambda consumer: consumer[:2])


def _count_held(
    devices: Iterable[DraDevice], key: Callable[[Consumer], K]
) -> dict[K, tuple[str | None, int]]:
    held: dict[K, Counter[str]] = {}
    for device in devices:
        for consumer in device.consumers:
            held.setdefault(key(consumer), Counter())[device.device_class or device.driver] += 1
    return {pod: _main_class(classes) for pod, classes in held.items()}


def _main_class(held: Counter[str]) -> tuple[str, int]:
    name = min(held, key=lambda cls: (-held[cls], cls))
    return name, sum(held.values())
