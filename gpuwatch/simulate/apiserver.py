"""A small Kubernetes API stand-in: serves given objects as real-shaped list JSON over HTTP.

Enough of the API for gpuwatch's collector and ``kubectl get``: ``GET`` lists of pods, nodes,
namespaces (core/v1), replicasets, deployments, statefulsets, daemonsets (apps/v1), jobs and
cronjobs (batch/v1), resourceclaims, resourceslices and deviceclasses (``resource.k8s.io`` in
the one version the server is made with), Kueue's clusterqueues, localqueues, resourceflavors
and workloads (``kueue.x-k8s.io`` in one version, where asked) and Volcano's queues and
podgroups (``scheduling.volcano.sh/v1beta1``, where asked), cluster-wide and per namespace,
with the API server's list semantics:
items ordered by namespace and name, ``limit`` honoured, a ``metadata.continue`` token and
``remainingItemCount`` while more remain, ``410 Expired`` for a token from an older
``resourceVersion``, and ``Status`` error bodies. Also ``/version``, ``/api``, ``/apis``,
``/apis/<group>``, ``/healthz``, and fault injection for tests (no sleeps: every fault is counted,
not timed), including RBAC that forbids one API group's lists (``forbid_group``).
"""

from __future__ import annotations

import base64
import copy
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import yaml

from gpuwatch.simulate.api_resources import RESOURCES, Resource, discovery, resources_for
from gpuwatch.simulate.httpd import BackgroundServer
from gpuwatch.simulate.kueue_decl import QUEUE_RESOURCES
from gpuwatch.simulate.volcano_decl import VOLCANO_RESOURCES

__all__ = ["RESOURCES", "KubeApiServer", "RecordedRequest", "kubeconfig_for"]


_REASONS = {
    **{400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 410: "Expired"},
    **{429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"},
}
_MALFORMED_BODY = b'{"kind": "List", "apiVersion": "v1", "metadata": {}, "items": [{"metadata": '


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server answered: path without query, and the query parameters."""

    path: str
    query: dict[str, str]


@dataclass
class _Fault:
    path_prefix: str
    status: int
    times: int
    malformed: bool = False
    continued_only: bool = False


def _status_body(code: int, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": _REASONS.get(code, "Unknown"),
        "code": code,
    }


def _key(resource: Resource, obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    return f"{meta.get('namespace') or ''}/{name}" if resource.namespaced else name


def _encode_continue(resource_version: int, start: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": resource_version, "start": start})
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), str(data["start"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError("continue key is not valid") from exc


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes
    timeout = 30
    server: _HttpServer

    def do_GET(self) -> None:
        status, body = self.server.api.respond(self.path, self.headers.get("Authorization"))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests and the simulator read the request log instead."""


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], api: KubeApiServer) -> None:
        super().__init__(address, _Handler)
        self.api = api


class KubeApiServer(BackgroundServer):
    """Serves ``objects`` (resource name such as ``"pods"`` → objects) like a Kubernetes API.

    ``token``: when given, requests must carry ``Authorization: Bearer <token>`` (else 401).
    ``dra_version``: the one ``resource.k8s.io`` version served (``v1``, ``v1beta2``, ``v1beta1``).
    ``kueue_version``: the one ``kueue.x-k8s.io`` version served (``v1beta2``, ``v1beta1``);
    None: Kueue is not served. ``volcano``: whether ``scheduling.volcano.sh/v1beta1`` is served.
    """

    def __init__(
        self,
        objects: Mapping[str, list[dict[str, Any]]],
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        dra_version: str = "v1",
        kueue_version: str | None = None,
        volcano: bool = False,
    ) -> None:
        self._resources = resources_for(dra_version, kueue_version, volcano)
        self.dra_version = dra_version
        self._forbidden: set[str] = set()
        self._lock = threading.Lock()
        self._objects: dict[str, list[dict[str, Any]]] = {}
        self._resource_version = 1000
        self._faults: list[_Fault] = []
        self._deny: int | None = None
        self._requests: list[RecordedRequest] = []
        self._token = token
        super().__init__(host, port)
        self.set_objects(objects)

    def _make_server(self, address: tuple[str, int]) -> ThreadingHTTPServer:
        return _HttpServer(address, self)

    def set_objects(self, objects: Mapping[str, list[dict[str, Any]]]) -> None:
        """Replace the served objects (a new resourceVersion: older continue tokens expire).
        Kueue's and Volcano's objects are dropped when the resource table does not serve them."""
        known = self._resources
        unknown = sorted(set(objects) - set(known) - {*QUEUE_RESOURCES, *VOLCANO_RESOURCES})
        if unknown:
            raise ValueError(f"unknown resources {unknown}: expected some of {sorted(known)}")
        with self._lock:
            self._resource_version += 1
            self._objects = {}
            for name, resource in known.items():
                items = [self._listed(obj) for obj in objects.get(name, [])]
                self._objects[name] = sorted(items, key=lambda obj: _key(resource, obj))

    def _listed(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        item = copy.deepcopy(dict(obj))
        item.pop("kind", None)  # list items carry neither kind nor apiVersion
        item.pop("apiVersion", None)
        item.setdefault("metadata", {}).setdefault("resourceVersion", str(self._resource_version))
        return item

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request answered so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def fail_next(
        self, path_prefix: str, status: int = 500, times: int = 1, malformed: bool = False
    ) -> None:
        """Answer the next ``times`` requests under ``path_prefix`` with ``status`` and a Status
        body, or (``malformed``) with 200 and truncated JSON."""
        with self._lock:
            self._faults.append(_Fault(path_prefix, 200 if malformed else status, times, malformed))

    def expire_next_continue(self, path_prefix: str, times: int = 1) -> None:
        """Answer the next ``times`` continued list requests with ``410 Expired``."""
        with self._lock:
            self._faults.append(_Fault(path_prefix, 410, times, continued_only=True))

    def deny(self, status: int | None) -> None:
        """Answer every request with 401 or 403 from now on; None serves again."""
        if status not in (None, 401, 403):
            raise ValueError("deny() takes 401, 403 or None")
        with self._lock:
            self._deny = status

    def forbid_group(self, group: str) -> None:
        """Answer 403 to every list of ``group``'s resources (``resource.k8s.io``), as RBAC
        does for a service account without a role for them; discovery stays open."""
        with self._lock:
            self._forbidden.add(group)

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()
            self._deny = None
            self._forbidden.clear()

    def respond(self, target: str, authorization: str | None) -> tuple[int, bytes]:
        """Status and JSON body for ``GET target`` (also usable without a socket)."""
        split = urlsplit(target)
        path = split.path.rstrip("/") or "/"
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        with self._lock:
            self._requests.append(RecordedRequest(path, query))
            refusal = self._refusal(path, query, authorization)
            if refusal is not None:
                return refusal
            status, body = self._route(path, query)
        return status, json.dumps(body, separators=(",", ":")).encode()

    def _refusal(
        self, path: str, query: Mapping[str, str], authorization: str | None
    ) -> tuple[int, bytes] | None:
        if self._token is not None and authorization != f"Bearer {self._token}":
            return 401, json.dumps(_status_body(401, "Unauthorized")).encode()
        if self._deny is not None:
            return self._deny, json.dumps(self._denial(path)).encode()
        forbidden = self._forbidden_list(path)
        if forbidden is not None:
            return 403, json.dumps(forbidden).encode()
        for fault in self._faults:
            if (
                fault.times <= 0
                or not path.startswith(fault.path_prefix)
                or (fault.continued_only and not query.get("continue"))
            ):
                continue
            fault.times -= 1
            if fault.malformed:
                return 200, _MALFORMED_BODY
            message = "the provided continue parameter is too old" if fault.status == 410 else ""
            return fault.status, json.dumps(_status_body(fault.status, message)).encode()
        return None

    def _denial(self, path: str) -> dict[str, Any]:
        if self._deny == 401:
            return _status_body(401, "Unauthorized")
        what = path.rsplit("/", 1)[-1] or "resource"
        user = "system:serviceaccount:gpuwatch:gpuwatch"
        return _status_body(403, f'{what} is forbidden: User "{user}" cannot list "{what}"')

    def _forbidden_list(self, path: str) -> dict[str, Any] | None:
        """The 403 body for a list of a forbidden group's resource, else None."""
        for name, resource in self._resources.items():
            if resource.group not in self._forbidden or not path.startswith(resource.prefix):
                continue
            if path.endswith(f"/{name}"):
                user = "system:serviceaccount:gpuwatch:gpuwatch"
                message = (
                    f'{name}.{resource.group} is forbidden: User "{user}" cannot list resource '
                    f'"{name}" in API group "{resource.group}" at the cluster scope'
                )
                return _status_body(403, message)
        return None

    def _route(self, path: str, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        document = discovery(self._resources, path)
        if document is not None:
            return 200, document
        for name, resource in self._resources.items():
            if path == f"{resource.prefix}/{name}":
                return self._list(name, resource, None, query)
            scoped = f"{resource.prefix}/namespaces/"
            if resource.namespaced and path.startswith(scoped):
                namespace, _, tail = path.removeprefix(scoped).partition("/")
                if namespace and tail == name:
                    return self._list(name, resource, namespace, query)
        return 404, _status_body(404, "the server could not find the requested resource")

    def _list(
        self, name: str, resource: Resource, namespace: str | None, query: Mapping[str, str]
    ) -> tuple[int, dict[str, Any]]:
        unsupported = sorted({"labelSelector", "fieldSelector", "watch"} & set(query))
        if unsupported:
            return 400, _status_body(400, f"unsupported query parameters {unsupported}")
        try:
            limit = int(query.get("limit") or 0)
            start_after = self._start_after(query.get("continue"))
        except ValueError as exc:
            return 400, _status_body(400, f"invalid list request: {exc}")
        if start_after is None:
            return 410, _status_body(410, "the provided continue parameter is too old")
        items = [
            obj
            for obj in self._objects[name]
            if (namespace is None or (obj.get("metadata") or {}).get("namespace") == namespace)
            and _key(resource, obj) > start_after
        ]
        page = items[:limit] if limit > 0 else items
        metadata: dict[str, Any] = {"resourceVersion": str(self._resource_version)}
        if len(page) < len(items):
            metadata["continue"] = _encode_continue(
                self._resource_version, _key(resource, page[-1])
            )
            metadata["remainingItemCount"] = len(items) - len(page)
        kind, api_version = f"{resource.kind}List", resource.api_version
        return 200, {"kind": kind, "apiVersion": api_version, "metadata": metadata, "items": page}

    def _start_after(self, token: str | None) -> str | None:
        """The key after which a page starts ("" for the first page); None when expired."""
        if not token:
            return ""
        resource_version, start = _decode_continue(token)
        return start if resource_version == self._resource_version else None


def kubeconfig_for(
    server_url: str, path: str | Path, token: str | None = None, context: str = "gpuwatch-sim"
) -> Path:
    """Write a kubeconfig whose current context points at ``server_url`` (plain HTTP)."""
    user: dict[str, Any] = {"token": token} if token else {}
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server_url}}],
        "users": [{"name": context, "user": user}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
        "preferences": {},
    }
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    target.chmod(0o600)
    return target
