"""What the Kubernetes API showed of queues, quotas and queued work (Kueue, Volcano).

Pure data, built by :mod:`gpuwatch.collectors.kube_queues` from the parsers
:mod:`gpuwatch.collectors.kueue_parse` and :mod:`gpuwatch.collectors.volcano_parse`, and read by
:mod:`gpuwatch.collectors.gangs` (a pod's queue and gang) and the store writes. Each source is
optional: one that was not read carries the reason (``off_reason``) and contributes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuwatch.domain.scheduling import KUEUE_GROUP, VOLCANO_GROUP

#: Why a source is off when the Kubernetes API was not read for it at all.
NOT_LISTED = "not listed"

#: ``(namespace, name)`` of a LocalQueue, PodGroup, ...
NamespacedName = tuple[str, str]
#: ``(namespace, owner kind, owner name)`` of a Kueue Workload's owner (``Job``, ``JobSet``).
OwnerKey = tuple[str, str, str]


@dataclass(frozen=True)
class SourceState:
    """One scheduler's API as read: the version read, or why it was not (``off_reason``)."""

    name: str
    group: str
    api_version: str | None
    off_reason: str

    @property
    def on(self) -> bool:
        return not self.off_reason

    def summary(self) -> str:
        if not self.on:
            return f"{self.name} off: {self.off_reason}"
        return f"{self.name} on ({self.group}/{self.api_version})"


def kueue_off(reason: str, api_version: str | None = None) -> SourceState:
    return SourceState("Kueue", KUEUE_GROUP, api_version, reason or NOT_LISTED)


def volcano_off(reason: str, api_version: str | None = None) -> SourceState:
    return SourceState("Volcano", VOLCANO_GROUP, api_version, reason or NOT_LISTED)


@dataclass(frozen=True)
class GangFacts:
    """What a scheduler object says of a gang: its queue and how many pods it needs at once."""

    queue: str | None
    size: int | None


@dataclass(frozen=True)
class SchedState:
    """Queues and queued work, ready for the store (rows without ids, cluster or seen times).

    ``queue_flavors``: ``queue_flavors`` rows without ``last_seen_ts`` (``first_seen_ts``: the
    queue's creation, None when unknown);
    ``workloads``: ``sched_workloads`` rows without ``last_seen_ts``;
    ``local_queues``: a Kueue LocalQueue → its ClusterQueue;
    ``kueue_owners``: a Kueue Workload's owner → the Workload's queue and pod count;
    ``kueue_groups``: a Kueue Workload by its own name (plain-pod groups are named so);
    ``pod_groups``: a Volcano PodGroup → its queue and ``minMember``.
    """

    kueue: SourceState = field(default_factory=lambda: kueue_off(NOT_LISTED))
    volcano: SourceState = field(default_factory=lambda: volcano_off(NOT_LISTED))
    queue_flavors: tuple[dict[str, Any], ...] = ()
    workloads: tuple[dict[str, Any], ...] = ()
    local_queues: Mapping[NamespacedName, str] = field(default_factory=dict, hash=False)
    kueue_owners: Mapping[OwnerKey, GangFacts] = field(default_factory=dict, hash=False)
    kueue_groups: Mapping[NamespacedName, GangFacts] = field(default_factory=dict, hash=False)
    pod_groups: Mapping[NamespacedName, GangFacts] = field(default_factory=dict, hash=False)

    def summary(self) -> str:
        """One line for the collect output."""
        quotas = len(self.queue_flavors)
        work = len(self.workloads)
        read = (
            f"; {quotas} GPU quota{'' if quotas == 1 else 's'}, "
            f"{work} queued workload{'' if work == 1 else 's'} asking for GPUs"
            if self.kueue.on or self.volcano.on
            else ""
        )
        return f"Queues: {self.kueue.summary()}; {self.volcano.summary()}{read}"
