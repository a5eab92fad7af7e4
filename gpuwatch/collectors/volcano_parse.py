"""Pure parsers of Volcano objects (``scheduling.volcano.sh/v1beta1``, plain JSON).

- Queue → one ``queue_flavors`` row per GPU resource of ``spec.deserved`` or
  ``spec.capability`` (flavor ``""``): nominal = ``deserved``, else ``capability``; borrowing
  limit = ``capability`` − ``deserved`` where both are given, 0 with ``capability`` alone (the
  queue may not exceed it), unlimited with ``deserved`` alone. Cohort: ``spec.parent``, else
  ``root`` (every Volcano queue shares the cluster under the root queue).
- PodGroup → a ``sched_workloads`` row when ``spec.minResources`` asks for GPUs: the GPUs of
  ``minResources``, ``minMember`` pods, ``spec.queue`` (default ``default``), and its state
  from ``status.phase``: ``Pending``/``Inqueue`` → pending, ``Running``/``Unknown`` (some
  members run) → admitted, ``Completed`` → finished; admitted since the ``Scheduled``
  condition's lastTransitionTime.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpuwatch.collectors.kube_nodes import is_gpu_resource, parse_quantity
from gpuwatch.collectors.kube_parse import controller_ref, epoch_seconds
from gpuwatch.collectors.sched_state import GangFacts, NamespacedName
from gpuwatch.domain.scheduling import WorkloadState

JsonObject = Mapping[str, Any]
KIND = "volcano"
ROOT_QUEUE = "root"
DEFAULT_QUEUE = "default"
#: The owner kind of a PodGroup no controller owns.
POD_GROUP_OWNER = "PodGroup"
_STATES: dict[str, WorkloadState] = {
    "Pending": "pending",
    "Inqueue": "pending",
    "Running": "admitted",
    "Unknown": "admitted",
    "Completed": "finished",
}


def _gpu_quantities(resources: object) -> dict[str, int]:
    if not isinstance(resources, Mapping):
        return {}
    return {
        str(name): parse_quantity(value)
        for name, value in sorted(resources.items())
        if is_gpu_resource(str(name))
    }


def _meta(obj: JsonObject) -> JsonObject:
    return obj.get("metadata") or {}


def parse_queue(queue: JsonObject) -> list[dict[str, Any]]:
    """``queue_flavors`` rows of a Volcano Queue's GPU resources; ``first_seen_ts`` is its
    creation (None when not given)."""
    spec = queue.get("spec") or {}
    created = epoch_seconds(_meta(queue).get("creationTimestamp"))
    capability = _gpu_quantities(spec.get("capability"))
    deserved = _gpu_quantities(spec.get("deserved"))
    rows = []
    for resource in sorted({*capability, *deserved}):
        cap, share = capability.get(resource), deserved.get(resource)
        borrowing: float | None
        if share is None:
            nominal, borrowing = cap, 0.0
        else:
            nominal, borrowing = share, (None if cap is None else float(max(0, cap - share)))
        rows.append(
            {
                "kind": KIND,
                "queue": str(_meta(queue).get("name") or ""),
                "cohort": str(spec.get("parent") or ROOT_QUEUE),
                "flavor": "",
                "gpu_resource": resource,
                "gpu_model": None,
                "nominal_gpus": float(nominal or 0),
                "borrowing_limit_gpus": borrowing,
                "lending_limit_gpus": None,
                "first_seen_ts": created,
            }
        )
    return rows


def _scheduled_ts(pod_group: JsonObject) -> int | None:
    for condition in (pod_group.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Scheduled" and str(condition.get("status")) == "True":
            return epoch_seconds(condition.get("lastTransitionTime"))
    return None


def pod_group_queue(pod_group: JsonObject) -> str:
    return str((pod_group.get("spec") or {}).get("queue") or DEFAULT_QUEUE)


def parse_pod_group(pod_group: JsonObject) -> dict[str, Any] | None:
    """A ``sched_workloads`` row (without ``last_seen_ts``); None when it asks for no GPU."""
    spec = pod_group.get("spec") or {}
    gpus = _gpu_quantities(spec.get("minResources"))
    gpus = {name: n for name, n in gpus.items() if n > 0}
    if not gpus:
        return None
    resource = max(gpus, key=lambda name: (gpus[name], name))
    state = _STATES.get(str((pod_group.get("status") or {}).get("phase") or ""), "pending")
    meta = _meta(pod_group)
    name = str(meta.get("name") or "")
    ref = controller_ref(pod_group)
    owner = (str(ref["kind"]), str(ref["name"])) if ref else (POD_GROUP_OWNER, name)
    return {
        "kind": KIND,
        "namespace": str(meta.get("namespace") or ""),
        "name": name,
        "uid": str(meta.get("uid") or ""),
        "queue": pod_group_queue(pod_group),
        "flavor": None,
        "owner_kind": owner[0],
        "owner_name": owner[1],
        "gpu_resource": resource,
        "gpus_requested": float(gpus[resource]),
        "pod_count": int(spec.get("minMember") or 0),
        "state": state,
        "created_ts": epoch_seconds(meta.get("creationTimestamp")),
        "admitted_ts": _scheduled_ts(pod_group) if state != "pending" else None,
        "finished_ts": None,
        "evictions": 0,
    }


@dataclass(frozen=True)
class VolcanoParsed:
    """Volcano's objects as rows, and PodGroups by ``(namespace, name)``."""

    queue_flavors: list[dict[str, Any]]
    workloads: list[dict[str, Any]]
    pod_groups: dict[NamespacedName, GangFacts]


def parse_volcano(queues: Iterable[JsonObject], pod_groups: Iterable[JsonObject]) -> VolcanoParsed:
    """Rows and the PodGroup index; raises ValueError naming an object it cannot read."""
    quota_rows: list[dict[str, Any]] = []
    for queue in sorted(queues, key=lambda q: str(_meta(q).get("name") or "")):
        try:
            quota_rows.extend(parse_queue(queue))
        except ValueError as exc:
            raise ValueError(f"Queue {_meta(queue).get('name')}: {exc}") from exc
    rows: list[dict[str, Any]] = []
    index: dict[NamespacedName, GangFacts] = {}
    for group in pod_groups:
        meta = _meta(group)
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        try:
            row = parse_pod_group(group)
        except ValueError as exc:
            raise ValueError(f"PodGroup {key[0]}/{key[1]}: {exc}") from exc
        min_member = int((group.get("spec") or {}).get("minMember") or 0)
        index[key] = GangFacts(pod_group_queue(group), min_member or None)
        if row is not None:
            rows.append(row)
    rows.sort(key=lambda r: (r["namespace"], r["name"], r["uid"]))
    return VolcanoParsed(quota_rows, rows, index)
