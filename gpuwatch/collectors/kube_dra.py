"""Reading Dynamic Resource Allocation from the Kubernetes API (``resource.k8s.io``).

The served versions come from ``GET /apis/resource.k8s.io`` (an APIGroup); the best of ``v1``,
``v1beta2`` and ``v1beta1`` is read, whatever the server prefers. ResourceClaims (all
namespaces), ResourceSlices and DeviceClasses are listed through the source's own bounded,
paginated and retried lists, then parsed by :func:`gpuwatch.collectors.dra_parse.parse_dra`.

DRA is optional: a server that does not serve the group (404), or an identity not allowed to
read it (401/403), turns DRA attribution off with a reason and the collection goes on.
Connection errors and 5xx fail as every other list does, after the same retries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kubernetes import client

from gpuwatch.collectors.dra_parse import (
    GROUP,
    VERSIONS,
    DraState,
    dra_off,
    parse_dra,
    pick_version,
    served_versions,
)
from gpuwatch.collectors.kube_errors import KubeStatusError

#: The access DRA attribution needs, as a ClusterRole would grant it.
DRA_RBAC_NEEDED = f"get, list on resourceclaims, resourceslices, deviceclasses ({GROUP})"
NOT_SERVED = f"{GROUP} is not served"
NO_GPU_DRIVERS = "kubernetes.dra_gpu_drivers is empty"
#: The client's API class of each version read.
_APIS: dict[str, Callable[[Any], Any]] = {
    "v1": client.ResourceV1Api,
    "v1beta2": client.ResourceV1beta2Api,
    "v1beta1": client.ResourceV1beta1Api,
}

#: ``get_json(what, method)``: one JSON object; ``list_objects(resource, method)``: every item.
GetJson = Callable[[str, Callable[..., Any]], dict[str, Any]]
ListObjects = Callable[[str, Callable[..., Any]], list[dict[str, Any]]]


def read_dra(
    api: Any, get_json: GetJson, list_objects: ListObjects, gpu_drivers: Sequence[str]
) -> DraState:
    """What the API server shows of DRA; off, with the reason, where it cannot be read."""
    if not gpu_drivers:
        return dra_off(NO_GPU_DRIVERS)
    version: str | None = None
    try:
        group = get_json(f"{GROUP} versions", _group_getter(api))
        version = pick_version(group)
        if version is None:
            served = ", ".join(served_versions(group)) or "none"
            return dra_off(f"{GROUP} serves none of {', '.join(VERSIONS)} (served: {served})")
        versioned = _APIS[version](api)
        claims = list_objects("resourceclaims", versioned.list_resource_claim_for_all_namespaces)
        slices = list_objects("resourceslices", versioned.list_resource_slice)
        classes = list_objects("deviceclasses", versioned.list_device_class)
    except KubeStatusError as exc:
        return dra_off(_off_reason(exc, version), version)
    return parse_dra(claims, slices, classes, version, gpu_drivers)


def _group_getter(api: Any) -> Callable[..., Any]:
    """``GET /apis/resource.k8s.io`` with the list calls' keywords (paging ones ignored)."""
    group_api = client.ResourceApi(api)

    def get(**kwargs: Any) -> Any:
        return group_api.get_api_group(
            _preload_content=kwargs["_preload_content"],
            _request_timeout=kwargs["_request_timeout"],
        )

    return get


def _off_reason(exc: KubeStatusError, version: str | None) -> str:
    """Why DRA is off after an answer no retry changes; anything but 401/403/404 fails."""
    if exc.status in (401, 403):
        return f"forbidden: grant {DRA_RBAC_NEEDED} (HTTP {exc.status} listing {exc.what})"
    if exc.status == 404:
        return NOT_SERVED if version is None else f"{GROUP}/{version} {exc.what}: not served"
    raise exc
