"""What a DCGM series' labels say: its GPU unit, its exporter and the pod it is attributed to.

The configured label schema gives, per fact, the labels to try in order (``exported_pod`` before
``pod``, ``UUID`` before ``uuid``, ...). For the pod, the choice is made per exporter (scrape
target and node): when any series of an exporter carries the preferred ``exported_*`` label, that
exporter's plain ``pod``/``namespace`` name the exporter itself and are ignored. Pure, no I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from gpuwatch.domain.labels import LabelVariants

#: Label sets whose meaning is remembered between pages (a fleet's series come back every
#: page; a few thousand bytes each). Keyed without ``__name__`` (:func:`unnamed`), a GPU unit
#: is one or two label sets whatever the number of fields: enough for 50,000 GPUs.
REMEMBERED_SERIES = 1 << 16
_NAME = re.compile(rb',?"__name__":"(?:[^"\\]|\\.)*"')


def unnamed(key: bytes) -> bytes:
    """A series' labels (JSON bytes) without ``__name__``: what they say of a GPU unit does not
    depend on it, and ``last_over_time`` keeps it where ``avg_over_time`` drops it.

    >>> unnamed(b'{"UUID":"GPU-1","__name__":"DCGM_FI_DEV_FB_USED","gpu":"0"}')
    b'{"UUID":"GPU-1","gpu":"0"}'
    >>> unnamed(b'{"__name__":"A","gpu":"0"}'), unnamed(b'{"__name__":"A"}')
    (b'{"gpu":"0"}', b'{}')
    """
    if b'"__name__"' not in key:
        return key
    out = _NAME.sub(b"", key, count=1)
    return b"{" + out[2:] if out.startswith(b"{,") else out


def _first(labels: Mapping[str, str], names: Sequence[str]) -> str | None:
    for name in names:
        value = labels.get(name)
        if value:
            return value
    return None


#: One exporter as seen through its series: (job, instance, node). The node is part of it
#: because one scrape target can carry several exporters' series (federation, aggregation).
Target = tuple[str, str, str]


def _target(labels: Mapping[str, str], variants: LabelVariants) -> Target:
    node = _first(labels, variants.hostname) or ""
    return labels.get("job", ""), labels.get("instance", ""), node


@functools.lru_cache(maxsize=REMEMBERED_SERIES)
def label_facts(key: bytes, variants: LabelVariants) -> tuple[dict[str, str], Target, int | None]:
    """A series' labels (from their JSON bytes), its exporter, and the index in
    ``variants.pod`` of the first pod label it carries (None: none)."""
    labels: dict[str, str] = orjson.loads(key)
    preferred = next((n for n, name in enumerate(variants.pod) if labels.get(name)), None)
    return labels, _target(labels, variants), preferred


def pod_label_choice(keys: Iterable[bytes], variants: LabelVariants) -> dict[Target, int]:
    """Per exporter, the index in ``variants.pod`` of the most preferred pod label it uses,
    from the label sets ``keys`` (JSON bytes, :func:`unnamed`) of all its series."""
    choice: dict[Target, int] = {}
    for key in keys:
        _, target, index = label_facts(key, variants)
        if index is not None:
            choice[target] = min(index, choice.get(target, index))
    return choice


def _slot(labels: Mapping[str, str]) -> int:
    raw = labels.get("vgpu", "")
    if not raw:
        return 0
    match = re.search(r"(\d+)$", raw)
    return int(match.group(1)) if match else 0


def series_identity(
    labels: Mapping[str, str], variants: LabelVariants, pod_index: int | None
) -> dict[str, Any] | None:
    """The GPU unit and attribution a series' labels describe; None without a GPU UUID."""
    uuid = _first(labels, variants.uuid)
    if not uuid:
        return None
    gi = labels.get("GPU_I_ID", "")
    attributed: dict[str, str | None] = {"pod": None, "namespace": None, "container": None}
    if pod_index is not None:
        for fact in ("pod", "namespace", "container"):
            names: tuple[str, ...] = getattr(variants, fact)
            name = names[min(pod_index, len(names) - 1)]
            attributed[fact] = labels.get(name) or None
    if attributed["pod"] is None:
        attributed["namespace"] = attributed["container"] = None
    claim = labels.get("dra_claim_name")
    hostname_label = next((n for n in variants.hostname if labels.get(n)), None)
    style = "exported" if pod_index == 0 and len(variants.pod) > 1 else "standard"
    if hostname_label and hostname_label != variants.hostname[0]:
        style += "+" + hostname_label
    return {
        "uuid": uuid,
        "mig_gi_id": int(gi) if gi.isdigit() else -1,
        "slot": _slot(labels),
        "has_vgpu": bool(labels.get("vgpu")),
        "node": labels.get(hostname_label) if hostname_label else None,
        "model_name": labels.get("modelName") or None,
        "mig_profile": labels.get("GPU_I_PROFILE") or None,
        "gpu_index": int(labels["gpu"]) if labels.get("gpu", "").isdigit() else None,
        "device": labels.get("device") or None,
        "label_style": style,
        # A device held through a ResourceClaim (dcgm-exporter with DRA pod-resources).
        "dra_claim": f"{labels.get('dra_claim_namespace', '')}/{claim}" if claim else None,
        **attributed,
    }
