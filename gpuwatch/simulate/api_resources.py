"""What the simulated Kubernetes API serves: its resources and their discovery documents.

``resources_for(dra_version, kueue_version, volcano)`` gives the resource table of a server
that serves ``resource.k8s.io`` in that one version, Kueue (``kueue.x-k8s.io``) in one version
or not at all, and Volcano (``scheduling.volcano.sh/v1beta1``) or not;
``discovery(resources, path)`` answers ``/version``, ``/api``, ``/apis``, ``/apis/<group>`` (an
``APIGroup``) and ``/apis/<group>/<version>`` (an ``APIResourceList``), or None for any other
path. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuwatch.domain.scheduling import KUEUE_GROUP, KUEUE_VERSIONS, VOLCANO_GROUP, VOLCANO_VERSIONS

DRA_GROUP = "resource.k8s.io"
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1")
VOLCANO_PREFIX = f"/apis/{VOLCANO_GROUP}/{VOLCANO_VERSIONS[0]}"
#: Kueue's resources and Volcano's: name → (kind, namespaced).
KUEUE_KINDS = {
    "clusterqueues": ("ClusterQueue", False),
    "localqueues": ("LocalQueue", True),
    "resourceflavors": ("ResourceFlavor", False),
    "workloads": ("Workload", True),
}
VOLCANO_KINDS = {"queues": ("Queue", False), "podgroups": ("PodGroup", True)}
_VERSION = {
    **{"major": "1", "minor": "34", "gitVersion": "v1.34.1", "gitCommit": "", "gitTreeState": ""},
    **{"buildDate": "", "goVersion": "", "compiler": "gc", "platform": "linux/amd64"},
}

_HEALTHY = {"status": "ok"}
_STATIC: dict[str, dict[str, Any]] = {
    "/version": _VERSION,
    "/healthz": _HEALTHY,
    "/readyz": _HEALTHY,
    "/livez": _HEALTHY,
    "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
}


@dataclass(frozen=True)
class Resource:
    prefix: str  # "/api/v1" or "/apis/<group>/<version>"
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return self.prefix.removeprefix("/apis/").removeprefix("/api/")

    @property
    def group(self) -> str:
        """The API group ("" for core)."""
        return self.api_version.split("/")[0] if "/" in self.api_version else ""


RESOURCES: dict[str, Resource] = {
    "pods": Resource("/api/v1", "Pod", namespaced=True),
    "nodes": Resource("/api/v1", "Node", namespaced=False),
    "namespaces": Resource("/api/v1", "Namespace", namespaced=False),
    "replicasets": Resource("/apis/apps/v1", "ReplicaSet", namespaced=True),
    "deployments": Resource("/apis/apps/v1", "Deployment", namespaced=True),
    "statefulsets": Resource("/apis/apps/v1", "StatefulSet", namespaced=True),
    "daemonsets": Resource("/apis/apps/v1", "DaemonSet", namespaced=True),
    "jobs": Resource("/apis/batch/v1", "Job", namespaced=True),
    "cronjobs": Resource("/apis/batch/v1", "CronJob", namespaced=True),
}


def resources_for(
    dra_version: str = "v1", kueue_version: str | None = None, volcano: bool = False
) -> dict[str, Resource]:
    """The served resources: the core, apps and batch ones, ``resource.k8s.io``'s claims,
    slices and device classes in ``dra_version`` only, Kueue's ClusterQueues, LocalQueues,
    ResourceFlavors and Workloads in ``kueue_version`` only (None: Kueue is not served), and
    Volcano's Queues and PodGroups where ``volcano``."""
    if dra_version not in DRA_VERSIONS:
        raise ValueError(f"unknown {DRA_GROUP} version {dra_version!r}: one of {DRA_VERSIONS}")
    if kueue_version is not None and kueue_version not in KUEUE_VERSIONS:
        raise ValueError(
            f"unknown {KUEUE_GROUP} version {kueue_version!r}: one of {KUEUE_VERSIONS} or None"
        )
    prefix = f"/apis/{DRA_GROUP}/{dra_version}"
    served = {
        **RESOURCES,
        "resourceclaims": Resource(prefix, "ResourceClaim", namespaced=True),
        "resourceslices": Resource(prefix, "ResourceSlice", namespaced=False),
        "deviceclasses": Resource(prefix, "DeviceClass", namespaced=False),
    }
    if kueue_version is not None:
        kueue = f"/apis/{KUEUE_GROUP}/{kueue_version}"
        served.update({n: Resource(kueue, k, ns) for n, (k, ns) in KUEUE_KINDS.items()})
    if volcano:
        served.update({n: Resource(VOLCANO_PREFIX, k, ns) for n, (k, ns) in VOLCANO_KINDS.items()})
    return served


def discovery(resources: Mapping[str, Resource], path: str) -> dict[str, Any] | None:
    """The discovery document at ``path``, None when ``path`` is not a discovery path."""
    if path in _STATIC:
        return dict(_STATIC[path])
    prefixes = sorted({r.prefix for r in resources.values() if r.prefix != "/api/v1"})
    if path == "/apis":
        groups = [_group(prefix) for prefix in prefixes]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
    for prefix in prefixes:
        if path == prefix.rsplit("/", 1)[0]:
            return {"kind": "APIGroup", "apiVersion": "v1", **_group(prefix)}
    if path == "/api/v1" or path in prefixes:
        return _resource_list(resources, path)
    return None


def _group(prefix: str) -> dict[str, Any]:
    group_version = prefix.removeprefix("/apis/")
    version = {"groupVersion": group_version, "version": group_version.split("/")[1]}
    return {"name": group_version.split("/")[0], "versions": [version], "preferredVersion": version}


def _resource_list(resources: Mapping[str, Resource], prefix: str) -> dict[str, Any]:
    listed = [
        {
            "name": name,
            "singularName": resource.kind.lower(),
            "namespaced": resource.namespaced,
            "kind": resource.kind,
            "verbs": ["get", "list"],
        }
        for name, resource in resources.items()
        if resource.prefix == prefix
    ]
    group_version = prefix.removeprefix("/apis/").removeprefix("/api/")
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": listed,
    }
