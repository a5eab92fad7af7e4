"""Reading queues, quotas and queued work from the Kubernetes API (Kueue, Volcano).

For each scheduler, the served versions come from ``GET /apis/<group>`` (an APIGroup) and the
best of :data:`~gpuwatch.domain.scheduling.KUEUE_VERSIONS` (``v1beta2``, ``v1beta1``) or
:data:`~gpuwatch.domain.scheduling.VOLCANO_VERSIONS` is read, whatever the server prefers.
Its objects are listed, all namespaces, with the client's ``CustomObjectsApi`` through the
source's own bounded, paginated and retried lists, then parsed by
:mod:`gpuwatch.collectors.kueue_parse` and :mod:`gpuwatch.collectors.volcano_parse`.

Both are optional: a group the server does not serve (404), an identity not allowed to read it
(401/403), or an object the parsers cannot read turns that scheduler off with a reason, and the
collection goes on. Connection errors and 5xx fail as every other list does, after the same
retries.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from kubernetes import client

from gpuwatch.collectors.kube_errors import KubeStatusError
from gpuwatch.collectors.kueue_parse import parse_kueue
from gpuwatch.collectors.sched_state import SchedState, SourceState, kueue_off, volcano_off
from gpuwatch.collectors.volcano_parse import parse_volcano
from gpuwatch.domain.scheduling import (
    KUEUE_GROUP,
    KUEUE_VERSIONS,
    VOLCANO_GROUP,
    VOLCANO_VERSIONS,
)

log = logging.getLogger(__name__)

KUEUE_RESOURCES = ("clusterqueues", "resourceflavors", "localqueues", "workloads")
VOLCANO_RESOURCES = ("queues", "podgroups")
#: The access queue and gang attribution needs, as a ClusterRole would grant it (optional).
KUEUE_RBAC_NEEDED = f"get, list on {', '.join(KUEUE_RESOURCES)} ({KUEUE_GROUP})"
VOLCANO_RBAC_NEEDED = f"get, list on {', '.join(VOLCANO_RESOURCES)} ({VOLCANO_GROUP})"

#: ``get_json(what, method)``: one JSON object; ``list_objects(resource, method)``: every item.
GetJson = Callable[[str, Callable[..., Any]], dict[str, Any]]
ListObjects = Callable[[str, Callable[..., Any]], list[dict[str, Any]]]
Objects = dict[str, list[dict[str, Any]]]


def pick_version(group: Mapping[str, Any], versions: Sequence[str]) -> str | None:
    """The best of ``versions`` an APIGroup object lists as served, or None."""
    served = {
        str(v.get("version") or "") for v in group.get("versions") or [] if isinstance(v, Mapping)
    }
    return next((version for version in versions if version in served), None)


def _served(group: Mapping[str, Any]) -> str:
    listed = [str(v.get("version")) for v in group.get("versions") or [] if isinstance(v, Mapping)]
    return ", ".join(v for v in listed if v) or "none"


def _group_getter(api: Any, group: str) -> Callable[..., Any]:
    """``GET /apis/<group>`` with the list calls' keywords (paging ones ignored)."""

    def get(**kwargs: Any) -> Any:
        return api.call_api(
            f"/apis/{group}",
            "GET",
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            response_types_map={},
            _return_http_data_only=True,
            _preload_content=kwargs["_preload_content"],
            _request_timeout=kwargs["_request_timeout"],
        )

    return get


def _off_reason(exc: KubeStatusError, group: str, version: str | None, rbac: str) -> str:
    """Why a scheduler is off after an answer no retry changes; anything but 401/403/404
    fails."""
    if exc.status in (401, 403):
        return f"forbidden: grant {rbac} (HTTP {exc.status} listing {exc.what})"
    if exc.status == 404:
        return (
            f"{group} is not served"
            if version is None
            else f"{group}/{version} {exc.what}: not served"
        )
    raise exc


class Read(NamedTuple):
    """One API group as read: the version, why it is off (empty: on), resource → items."""

    version: str | None
    off_reason: str
    objects: Objects


def read_group(
    api: Any,
    get_json: GetJson,
    list_objects: ListObjects,
    group: str,
    versions: Sequence[str],
    resources: Sequence[str],
) -> Read:
    """One API group: every resource listed, or off with the reason."""
    rbac = KUEUE_RBAC_NEEDED if group == KUEUE_GROUP else VOLCANO_RBAC_NEEDED
    version: str | None = None
    try:
        document = get_json(f"{group} versions", _group_getter(api, group))
        version = pick_version(document, versions)
        if version is None:
            served = _served(document)
            return Read(
                None, f"{group} serves none of {', '.join(versions)} (served: {served})", {}
            )
        custom = client.CustomObjectsApi(api)
        objects = {
            resource: list_objects(
                resource,
                functools.partial(custom.list_cluster_custom_object, group, version, resource),
            )
            for resource in resources
        }
    except KubeStatusError as exc:
        return Read(version, _off_reason(exc, group, version, rbac), {})
    return Read(version, "", objects)


def read_queues(api: Any, get_json: GetJson, list_objects: ListObjects) -> SchedState:
    """What the API server shows of Kueue and Volcano; each off, with the reason, where it
    cannot be read."""
    kueue = read_group(api, get_json, list_objects, KUEUE_GROUP, KUEUE_VERSIONS, KUEUE_RESOURCES)
    volcano = read_group(
        api, get_json, list_objects, VOLCANO_GROUP, VOLCANO_VERSIONS, VOLCANO_RESOURCES
    )
    return sched_state(kueue, volcano)


def _with_kueue(state: SchedState, read: Read) -> SchedState:
    if read.off_reason:
        return replace(state, kueue=kueue_off(read.off_reason, read.version))
    try:
        parsed = parse_kueue(*(read.objects.get(r, []) for r in KUEUE_RESOURCES))
    except ValueError as exc:
        return replace(state, kueue=kueue_off(f"unreadable {exc}", read.version))
    return replace(
        state,
        kueue=SourceState("Kueue", KUEUE_GROUP, read.version, ""),
        queue_flavors=(*state.queue_flavors, *parsed.queue_flavors),
        workloads=(*state.workloads, *parsed.workloads),
        local_queues=parsed.local_queues,
        kueue_owners=parsed.owners,
        kueue_groups=parsed.groups,
    )


def _with_volcano(state: SchedState, read: Read) -> SchedState:
    if read.off_reason:
        return replace(state, volcano=volcano_off(read.off_reason, read.version))
    try:
        parsed = parse_volcano(*(read.objects.get(r, []) for r in VOLCANO_RESOURCES))
    except ValueError as exc:
        return replace(state, volcano=volcano_off(f"unreadable {exc}", read.version))
    return replace(
        state,
        volcano=SourceState("Volcano", VOLCANO_GROUP, read.version, ""),
        queue_flavors=(*state.queue_flavors, *parsed.queue_flavors),
        workloads=(*state.workloads, *parsed.workloads),
        pod_groups=parsed.pod_groups,
    )


def sched_state(kueue: Read, volcano: Read) -> SchedState:
    """The state from what was listed; objects the parsers cannot read turn their scheduler
    off with the reason (logged, as every reason a scheduler is off)."""
    state = _with_volcano(_with_kueue(SchedState(), kueue), volcano)
    for source in (state.kueue, state.volcano):
        if not source.on:
            log.info("queue attribution: %s", source.summary())
    return state
