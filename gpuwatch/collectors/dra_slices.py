"""Pure parsers of DRA ResourceSlices: what each GPU device a driver publishes is.

The NVIDIA driver (``gpu.nvidia.com``) publishes attributes ``type`` (``gpu`` or ``mig``),
``uuid``, ``parentUUID`` (a MIG device's GPU), ``profile``, ``productName`` and the capacity
``memory``; attribute names may carry the driver's domain (``gpu.nvidia.com/uuid``). v1beta1
nests attributes and capacity under ``basic``; v1beta2 and v1 do not. A pool's slices of older
generations (being replaced) are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

JsonObject = Mapping[str, Any]
#: (driver, pool, device name)
DeviceKey = tuple[str, str, str]
_MIB = 1024 * 1024


@dataclass(frozen=True)
class DraNode:
    """What a node's ResourceSlices publish of GPU drivers: physical GPUs (whole GPUs, and the
    GPUs MIG devices belong to), and the first product name and whole-GPU memory seen."""

    gpu_count: int
    product: str | None
    memory_mib: int | None


@dataclass(frozen=True)
class Published:
    """A device as its slice publishes it: attributes (short names) and capacity quantities."""

    node: str | None
    attributes: Mapping[str, object]
    capacity: Mapping[str, object]


def _short_names(values: Mapping[str, Any], driver: str) -> dict[str, Any]:
    """Attribute or capacity names without the driver's own domain; other domains kept."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        domain, _, short = str(name).rpartition("/")
        key = short if domain in ("", driver) else str(name)
        if key not in out or domain == "":  # an unqualified name wins over the qualified one
            out[key] = value
    return out


def _attribute(value: object) -> object:
    """The value of a typed attribute (``{"string": ...}``, ``{"int": ...}``, ...)."""
    if not isinstance(value, Mapping):
        return None
    for kind in ("string", "int", "version", "bool"):
        if value.get(kind) is not None:
            return value[kind]
    return None


def _published(device: JsonObject, slice_node: str | None, driver: str) -> Published:
    basic = device.get("basic")
    body: JsonObject = basic if isinstance(basic, Mapping) else device
    attributes = _short_names(body.get("attributes") or {}, driver)
    return Published(
        node=slice_node or body.get("nodeName") or None,
        attributes={name: _attribute(value) for name, value in attributes.items()},
        capacity=_short_names(body.get("capacity") or {}, driver),
    )


def _newest_slices(slices: Iterable[JsonObject]) -> list[JsonObject]:
    """The slices of each pool's newest generation (older ones are being replaced)."""
    listed = [s for s in slices if isinstance(s.get("spec"), Mapping)]
    newest: dict[tuple[str, str], int] = {}
    for item in listed:
        key, generation = _pool_of(item)
        newest[key] = max(newest.get(key, generation), generation)
    return [s for s in listed if _pool_of(s)[1] == newest[_pool_of(s)[0]]]


def _pool_of(item: JsonObject) -> tuple[tuple[str, str], int]:
    spec = item["spec"]
    pool = spec.get("pool") or {}
    try:
        generation = int(pool.get("generation") or 0)
    except (TypeError, ValueError):
        generation = 0
    return (str(spec.get("driver") or ""), str(pool.get("name") or "")), generation


def published_devices(
    slices: Iterable[JsonObject], gpu_drivers: Sequence[str]
) -> dict[DeviceKey, Published]:
    """(driver, pool, device name) → what the GPU drivers' slices say of each device."""
    out: dict[DeviceKey, Published] = {}
    for item in _newest_slices(slices):
        (driver, pool), _ = _pool_of(item)
        if driver not in gpu_drivers:
            continue
        node = item["spec"].get("nodeName") or None
        for device in item["spec"].get("devices") or []:
            if isinstance(device, Mapping) and device.get("name"):
                out[(driver, pool, str(device["name"]))] = _published(device, node, driver)
    return out


def _memory_mib(quantity: object) -> int | None:
    """MiB of a capacity (``{"value": "80Gi"}``, or a bare quantity as older versions had)."""
    if isinstance(quantity, Mapping):
        quantity = quantity.get("value")
    if not isinstance(quantity, str | int) or isinstance(quantity, bool):
        return None
    try:
        number = Decimal(parse_quantity(str(quantity)))
    except (ValueError, ArithmeticError):
        return None
    return int(number // _MIB) if number >= 0 else None


def _text(value: object) -> str | None:
    return str(value) if value not in (None, "") else None


def _is_mig(attributes: Mapping[str, object]) -> bool:
    kind = _text(attributes.get("type"))
    if kind is not None:
        return kind.lower() == "mig"
    uuid = _text(attributes.get("uuid")) or ""
    return bool(attributes.get("parentUUID")) or uuid.startswith("MIG-")


IDENTITY_FIELDS = ("node", "gpu_uuid", "mig_profile", "mig_uuid", "product", "memory_mib")


def identity(published: Published | None) -> dict[str, Any]:
    """The DraDevice fields a slice gives: node, GPU and MIG identity, product, memory."""
    if published is None:
        return dict.fromkeys(IDENTITY_FIELDS)
    attrs = published.attributes
    mig = _is_mig(attrs)
    return {
        "node": published.node,
        "gpu_uuid": _text(attrs.get("parentUUID" if mig else "uuid")),
        "mig_profile": _text(attrs.get("profile")) if mig else None,
        "mig_uuid": _text(attrs.get("uuid")) if mig else None,
        "product": _text(attrs.get("productName")),
        "memory_mib": _memory_mib(published.capacity.get("memory")),
    }


def dra_nodes(published: Mapping[DeviceKey, Published]) -> dict[str, DraNode]:
    """Per node, what the GPU drivers' slices publish there (see :class:`DraNode`): GPUs are
    told apart by UUID (a MIG device's by its parent's), else by the whole GPU's device name."""
    gpus: dict[str, set[str]] = {}
    products: dict[str, str | None] = {}
    memory: dict[str, int | None] = {}
    for (_, pool, name), device in sorted(published.items()):
        if device.node is None:
            continue
        facts, mig = identity(device), _is_mig(device.attributes)
        physical = facts["gpu_uuid"] or (None if mig else f"{pool}/{name}")
        gpus.setdefault(device.node, set()).update([physical] if physical else [])
        products[device.node] = products.get(device.node) or facts["product"]
        if not mig:  # a MIG device's memory is its slice's
            memory[device.node] = memory.get(device.node) or facts["memory_mib"]
    return {
        node: DraNode(len(held), products.get(node), memory.get(node))
        for node, held in sorted(gpus.items())
    }
