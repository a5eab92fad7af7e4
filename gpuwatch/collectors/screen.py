"""Hostile series never stop a collection: each series' labels are checked against what the store
can hold before anything is written (pure, no I/O).

A label that names something (the GPU UUID, the node, the pod and its namespace) and does not fit
its column, holds control characters or a number out of range makes its series skipped: cutting
it could merge two GPUs or two pods into one. A descriptive label (the model name, the MIG
profile, the device) is cut to its column's length. The limits are the store's column lengths,
read from :mod:`gpuwatch.store.models`, so SQLite (which would store anything) and PostgreSQL
(which would refuse the page) keep exactly the same rows.

Every skipped or changed series is counted by reason (:class:`SeriesIssues`), for the ``collect``
output and the Data health page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import String

from gpuwatch.store.models import Gpu, Node, Pod, PodSampleHourly, WorkloadSampleHourly

#: Largest value of the integer columns a series' labels fill.
INT32_MAX = 2**31 - 1
SMALLINT_MAX = 2**15 - 1
#: Reasons for series without a point that could be read (see :class:`SeriesIssues`).
NO_UUID = "no GPU UUID label"
MALFORMED_VALUES = "malformed values (not a number, null or missing) skipped"


def _length(model: type[Any], column: str) -> int:
    kind = model.__table__.c[column].type
    assert isinstance(kind, String) and kind.length is not None
    return int(kind.length)


def _limits() -> dict[str, int]:
    """Per identity fact, the most characters every column it is stored in holds."""
    return {
        "uuid": _length(Gpu, "uuid"),
        "node": _length(Node, "name"),
        "namespace": _length(Pod, "namespace"),
        "pod": min(_length(Pod, "name"), _length(Pod, "workload_name")),
        "model_name": min(
            _length(Gpu, "model_name"),
            _length(Node, "gpu_model"),
            _length(PodSampleHourly, "gpu_model"),
            _length(WorkloadSampleHourly, "gpu_model"),
        ),
        "mig_profile": _length(Gpu, "mig_profile"),
        "device": _length(Gpu, "device"),
    }


#: Per identity fact: the most characters the store keeps (its columns' lengths).
LIMITS: Mapping[str, int] = _limits()
#: Facts that name a thing: a value that does not fit skips the series.
KEY_FACTS = ("uuid", "node", "namespace", "pod")
#: Facts that describe a thing: a value that does not fit is cut to the limit.
TEXT_FACTS = ("model_name", "mig_profile", "device")
#: Label names in messages.
_NAMES = {
    "uuid": "UUID",
    "node": "node",
    "namespace": "namespace",
    "pod": "pod",
    "model_name": "modelName",
    "mig_profile": "GPU_I_PROFILE",
    "device": "device",
}


def _control(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def screen_identity(identity: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """``identity`` (:func:`gpuwatch.collectors.dcgm_labels.series_identity`) made fit for the
    store: (the identity, or None when the series is skipped; the reasons, empty when unchanged)."""
    for fact in KEY_FACTS:
        value = identity.get(fact)
        if not isinstance(value, str):
            continue
        if len(value) > LIMITS[fact]:
            return None, [f"{_NAMES[fact]} longer than {LIMITS[fact]} characters"]
        if _control(value):
            return None, [f"control characters in {_NAMES[fact]}"]
    if not 0 <= identity["slot"] <= SMALLINT_MAX or identity["mig_gi_id"] > INT32_MAX:
        return None, ["GPU instance or vGPU number out of range"]
    fixed = dict(identity)
    notes: list[str] = []
    for fact in TEXT_FACTS:
        value = identity.get(fact)
        if isinstance(value, str) and (len(value) > LIMITS[fact] or _control(value)):
            clean = "".join(c for c in value if not (ord(c) < 32 or ord(c) == 127))
            fixed[fact] = clean[: LIMITS[fact]] or None
            notes.append(f"{_NAMES[fact]} cut to {LIMITS[fact]} characters")
    index = identity.get("gpu_index")
    if index is not None and index > INT32_MAX:
        fixed["gpu_index"] = None
        notes.append("gpu index out of range (dropped)")
    return fixed, notes


#: Labels an example names first: those that tell a GPU apart.
_FIRST = ("UUID", "uuid", "Hostname", "hostname", "gpu", "modelName")


def example(labels: Mapping[str, Any], values: int = 4, chars: int = 24) -> str:
    """A series' metric and its first few telling labels, each value cut short: one line."""

    def short(value: object) -> str:
        text = str(value)
        return repr(text if len(text) <= chars else text[:chars] + "…")

    names = [n for n in _FIRST if n in labels]
    names += sorted(n for n in labels if n not in names and n != "__name__")
    shown = ",".join(f"{n}={short(labels[n])}" for n in names[:values])
    more = ",…" if len(names) > values else ""
    return f"{labels.get('__name__', '')}{{{shown}{more}}}"


@dataclass(frozen=True)
class SeriesIssues:
    """Series skipped or changed, per reason: the series (their labels' JSON) and an example;
    and the points skipped for a malformed value."""

    series: Mapping[str, frozenset[bytes]] = field(default_factory=dict)
    examples: Mapping[str, str] = field(default_factory=dict)
    bad_points: int = 0

    def __bool__(self) -> bool:
        return bool(self.series) or self.bad_points > 0

    def merge(self, other: SeriesIssues) -> SeriesIssues:
        """Both: a series counted once per reason, whatever the pages it came back in."""
        if not other:
            return self
        if not self:
            return other
        series = dict(self.series)
        for reason, keys in other.series.items():
            series[reason] = series.get(reason, frozenset()) | keys
        examples = {**other.examples, **self.examples}
        return SeriesIssues(series, examples, self.bad_points + other.bad_points)

    def counts(self) -> dict[str, int]:
        """Series per reason, largest first."""
        ranked = sorted(self.series.items(), key=lambda item: (-len(item[1]), item[0]))
        return {reason: len(keys) for reason, keys in ranked}

    def lines(self) -> list[str]:
        """One line per reason: the count, the reason and an example series."""
        out = []
        for reason, count in self.counts().items():
            text = f"{count:,} series: {reason}"
            if reason == MALFORMED_VALUES:
                text += f" ({self.bad_points:,} points)"
            out.append(f"{text}, e.g. {self.examples.get(reason, '?')}")
        return out


class IssueCounter:
    """Collects the issues of one page, series by series."""

    def __init__(self) -> None:
        self._series: dict[str, set[bytes]] = {}
        self._examples: dict[str, str] = {}
        self._bad_points = 0

    def add(self, reason: str, key: bytes, labels: Mapping[str, Any]) -> None:
        keys = self._series.setdefault(reason, set())
        if not keys:
            self._examples[reason] = example(labels)
        keys.add(key)

    def bad_points(self, count: int) -> None:
        self._bad_points += count

    def result(self) -> SeriesIssues:
        series = {reason: frozenset(keys) for reason, keys in self._series.items()}
        return SeriesIssues(series, dict(self._examples), self._bad_points)
