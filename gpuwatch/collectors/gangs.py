"""A pod's gang and queue (docs/collectors.md#queues-and-gangs), pure.

Gang, the first that applies (:data:`~gpuwatch.domain.scheduling.GANG_KINDS`):

- ``kueue``: the pod's Kueue pod group (label ``kueue.x-k8s.io/pod-group-name``; size from the
  ``kueue.x-k8s.io/pod-group-total-count`` annotation, else the group's Workload), or the
  Workload of its owner Job, or of that Job's JobSet, when the owner is Kueue's (it, or the pod,
  carries ``kueue.x-k8s.io/queue-name``, or a Workload names it as owner): name
  ``<kind>/<name>`` in lower-case kind (``job/train-a``), size the Workload's Σ pod set counts,
  else the Job's parallelism;
- ``volcano``: annotation ``scheduling.k8s.io/group-name`` (the PodGroup), size ``minMember``;
- ``jobset``: label ``jobset.sigs.k8s.io/jobset-name``, size Σ parallelism of its Jobs
  (replicas × parallelism);
- ``job``: an owner Job with parallelism > 1 that runs its pods together: Indexed, or without
  ``completions`` (a work queue), or with ``completions`` = ``parallelism``; size = parallelism.

Queue: Kueue: the ClusterQueue of the LocalQueue the pod's (or its owner Job's) queue label
names in its namespace, else the one its Kueue gang's Workload was admitted to; Volcano: its
PodGroup's ``spec.queue``; else None.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpuwatch.collectors.sched_state import GangFacts, SchedState
from gpuwatch.domain.scheduling import (
    JOBSET_NAME_LABEL,
    KUEUE_POD_GROUP_LABEL,
    KUEUE_POD_GROUP_SIZE_ANNOTATION,
    KUEUE_QUEUE_LABEL,
    VOLCANO_GROUP_ANNOTATION,
    GangKind,
)

JsonObject = Mapping[str, Any]


@dataclass(frozen=True)
class JobFacts:
    """What a Job says of the gang of its pods."""

    labels: Mapping[str, str]
    parallelism: int
    completions: int | None
    indexed: bool
    #: The Job's controller (``("JobSet", name)``), else None.
    owner: tuple[str, str] | None

    @property
    def runs_together(self) -> bool:
        """Parallelism > 1 with all of its pods wanted at once."""
        together = self.indexed or self.completions in (None, self.parallelism)
        return self.parallelism > 1 and together


JobIndex = Mapping[tuple[str, str], JobFacts]


@dataclass(frozen=True)
class PodGang:
    """A pod's queue and gang (all None: neither)."""

    queue: str | None = None
    gang_kind: GangKind | None = None
    gang_name: str | None = None
    gang_size: int | None = None

    def row(self) -> dict[str, Any]:
        """The ``pods`` columns."""
        return {
            "queue": self.queue,
            "gang_kind": self.gang_kind,
            "gang_name": self.gang_name,
            "gang_size": self.gang_size,
        }


def _meta(obj: JsonObject) -> JsonObject:
    return obj.get("metadata") or {}


def _strings(mapping: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in mapping.items()} if isinstance(mapping, Mapping) else {}


def _controller(obj: JsonObject) -> tuple[str, str] | None:
    for ref in _meta(obj).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") is True and ref.get("name"):
            return str(ref.get("kind") or ""), str(ref["name"])
    return None


def _int(value: object) -> int | None:
    try:
        return int(str(value).strip()) if value is not None else None
    except ValueError:
        return None


def job_facts(jobs: Iterable[JsonObject]) -> dict[tuple[str, str], JobFacts]:
    """``(namespace, Job)`` → its :class:`JobFacts`."""
    index: dict[tuple[str, str], JobFacts] = {}
    for job in jobs:
        meta, spec = _meta(job), job.get("spec") or {}
        index[(str(meta.get("namespace") or ""), str(meta.get("name") or ""))] = JobFacts(
            labels=_strings(meta.get("labels")),
            parallelism=_int(spec.get("parallelism")) or 1,
            completions=_int(spec.get("completions")),
            indexed=spec.get("completionMode") == "Indexed",
            owner=_controller(job),
        )
    return index


@dataclass(frozen=True)
class _Pod:
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    job_name: str | None
    job: JobFacts | None


def _pod(pod: JsonObject, jobs: JobIndex) -> _Pod:
    meta = _meta(pod)
    namespace = str(meta.get("namespace") or "")
    owner = _controller(pod)
    job_name = owner[1] if owner is not None and owner[0] == "Job" else None
    job = jobs.get((namespace, job_name)) if job_name else None
    labels, annotations = _strings(meta.get("labels")), _strings(meta.get("annotations"))
    return _Pod(namespace, labels, annotations, job_name, job)


def _kueue_owner(p: _Pod, sched: SchedState) -> tuple[str, str, GangFacts | None] | None:
    """The pod's Kueue-managed owner (``JobSet`` over ``Job``) and its Workload's facts."""
    if p.job_name is None:
        return None
    owners = [("Job", p.job_name)]
    if p.job is not None and p.job.owner is not None and p.job.owner[0] == "JobSet":
        owners.insert(0, p.job.owner)
    labelled = KUEUE_QUEUE_LABEL in p.labels or (
        p.job is not None and KUEUE_QUEUE_LABEL in p.job.labels
    )
    for kind, name in owners:
        facts = sched.kueue_owners.get((p.namespace, kind, name))
        if facts is not None:
            return kind, name, facts
    return (*owners[0], None) if labelled else None


def _kueue_gang(p: _Pod, sched: SchedState, jobs: JobIndex) -> PodGang | None:
    group = p.labels.get(KUEUE_POD_GROUP_LABEL)
    if group:
        facts = sched.kueue_groups.get((p.namespace, group))
        size = _int(p.annotations.get(KUEUE_POD_GROUP_SIZE_ANNOTATION))
        size = size if size is not None else (facts.size if facts else None)
        return PodGang(facts.queue if facts else None, "kueue", group, size)
    owner = _kueue_owner(p, sched)
    if owner is None:
        return None
    kind, name, facts = owner
    size = facts.size if facts is not None else None
    if size is None and kind == "JobSet":
        size = _jobset_size(p.namespace, name, jobs)
    if size is None and kind == "Job" and p.job is not None:
        size = p.job.parallelism
    queue = facts.queue if facts is not None else None
    return PodGang(queue, "kueue", f"{kind.lower()}/{name}", size)


def _jobset_size(namespace: str, jobset: str, jobs: JobIndex) -> int | None:
    sizes = [
        job.parallelism
        for (ns, _), job in jobs.items()
        if ns == namespace
        and (job.owner == ("JobSet", jobset) or job.labels.get(JOBSET_NAME_LABEL) == jobset)
    ]
    return sum(sizes) if sizes else None


def _other_gang(p: _Pod, sched: SchedState, jobs: JobIndex) -> PodGang | None:
    group = p.annotations.get(VOLCANO_GROUP_ANNOTATION)
    if group:
        facts = sched.pod_groups.get((p.namespace, group))
        queue, size = (facts.queue, facts.size) if facts is not None else (None, None)
        return PodGang(queue, "volcano", group, size)
    jobset = p.labels.get(JOBSET_NAME_LABEL)
    if jobset:
        return PodGang(None, "jobset", jobset, _jobset_size(p.namespace, jobset, jobs))
    if p.job_name is not None and p.job is not None and p.job.runs_together:
        return PodGang(None, "job", p.job_name, p.job.parallelism)
    return None


def _local_queue(p: _Pod, sched: SchedState) -> str | None:
    local = p.labels.get(KUEUE_QUEUE_LABEL) or (p.job.labels if p.job else {}).get(
        KUEUE_QUEUE_LABEL
    )
    return sched.local_queues.get((p.namespace, local)) if local else None


def pod_gang(pod: JsonObject, jobs: JobIndex, sched: SchedState) -> PodGang:
    """The pod's queue and gang."""
    p = _pod(pod, jobs)
    gang = _kueue_gang(p, sched, jobs) or _other_gang(p, sched, jobs) or PodGang()
    queue = _local_queue(p, sched) or gang.queue
    return PodGang(queue, gang.gang_kind, gang.gang_name, gang.gang_size)
