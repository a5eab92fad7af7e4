"""Reads pods, their owners, nodes and namespaces from the Kubernetes API (the official client).

Client configuration as kubectl finds it: an explicit kubeconfig, else ``$KUBECONFIG``, else
``~/.kube/config``, else the in-cluster service account. Lists are paginated (``limit`` and
``continue``), read as raw JSON (``_preload_content=False``) and handed to the pure parsers in
:mod:`gpuwatch.collectors.kube_parse`. Connection errors, 5xx and 429 are retried with
exponential backoff; 401/403 fail at once naming the RBAC gpuwatch needs. Credentials never
appear in messages. DRA (``resource.k8s.io``) is read after the core lists by
:mod:`gpuwatch.collectors.kube_dra` through the same lists; it is optional: not served or not
allowed, it is turned off with a reason and the snapshot goes on. Queues and queued work (Kueue,
Volcano) are read the same way by :mod:`gpuwatch.collectors.kube_queues`, each optional.

Every list is bounded: at most ``list_max_pages`` pages and ``list_timeout_s`` of wall time (its
retries and restarts included), and a continue token the server already gave for that list is an
error, never a loop. Each request runs in a daemon thread (:mod:`gpuwatch.collectors.stop`)
while the calling thread waits on it or on the stop request.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from gpuwatch.collectors.dra_parse import DEFAULT_GPU_DRIVERS, DraState
from gpuwatch.collectors.kube_dra import DRA_RBAC_NEEDED, read_dra
from gpuwatch.collectors.kube_errors import (
    Expired,
    Failure,
    KubeConfigError,
    KubeError,
    KubeStatusError,
    failure_reason,
    status_text,
)
from gpuwatch.collectors.kube_parse import KubeSnapshot, build_snapshot
from gpuwatch.collectors.kube_queues import KUEUE_RBAC_NEEDED, VOLCANO_RBAC_NEEDED, read_queues
from gpuwatch.collectors.retry import RetriesExhausted, RetryPolicy
from gpuwatch.collectors.sched_state import SchedState
from gpuwatch.collectors.stop import NEVER, Stop

if TYPE_CHECKING:
    from gpuwatch.config import Settings

__all__ = [
    "DRA_RBAC_NEEDED",
    "KUEUE_RBAC_NEEDED",
    "RBAC_NEEDED",
    "VOLCANO_RBAC_NEEDED",
    "KubeConfigError",
    "KubeError",
    "KubeSource",
    "KubeStatusError",
]

#: The access gpuwatch needs, as a ClusterRole would grant it (DRA's is optional; so are the
#: queues', named in their own off reasons: KUEUE_RBAC_NEEDED, VOLCANO_RBAC_NEEDED).
RBAC_NEEDED = (
    "get, list on pods, nodes, namespaces (core), replicasets, deployments, statefulsets, "
    f"daemonsets (apps), jobs, cronjobs (batch); for DRA attribution also {DRA_RBAC_NEEDED}"
)
_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
_GONE = 410


class KubeSource:
    """The Kubernetes API as a source of :class:`KubeSnapshot` s."""

    def __init__(
        self,
        kubeconfig: str | None = None,
        context: str | None = None,
        timeout_s: float = 30.0,
        retries: int = 3,
        page_size: int = 500,
        team_label: str = "team",
        base_delay_s: float = 0.5,
        max_delay_s: float = 8.0,
        list_max_pages: int = 1000,
        list_timeout_s: float = 300.0,
        stop: Stop = NEVER,
        dra_gpu_drivers: Sequence[str] = DEFAULT_GPU_DRIVERS,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.context = context
        self.timeout_s = timeout_s
        self.retries = max(0, retries)
        self.page_size = page_size
        self.team_label = team_label
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.list_max_pages = max(1, list_max_pages)
        self.list_timeout_s = list_timeout_s
        self.stop = stop
        self.dra_gpu_drivers = tuple(dra_gpu_drivers)
        self._api: Any = None
        self._host = ""

    @classmethod
    def from_settings(cls, settings: Settings, stop: Stop = NEVER) -> KubeSource:
        kube = settings.kubernetes
        return cls(
            list_max_pages=kube.list_max_pages,
            list_timeout_s=kube.list_timeout.total_seconds(),
            stop=stop,
            kubeconfig=kube.kubeconfig,
            context=kube.context,
            timeout_s=kube.timeout.total_seconds(),
            retries=kube.retries,
            page_size=kube.page_size,
            team_label=settings.labels.team,
            dra_gpu_drivers=kube.dra_gpu_drivers,
        )

    # -- configuration -----------------------------------------------------------------------
    def _kubeconfig_path(self) -> str | None:
        """The kubeconfig to load, as kubectl picks it; None means in-cluster."""
        if self.kubeconfig:
            path = Path(self.kubeconfig).expanduser()
            if not path.is_file():
                raise KubeConfigError(f"kubeconfig {path} not found")
            return str(path)
        env = os.environ.get("KUBECONFIG", "")
        if env.strip(os.pathsep):
            paths = [p for p in env.split(os.pathsep) if p]
            if not any(Path(p).expanduser().is_file() for p in paths):
                raise KubeConfigError(f"no kubeconfig found at $KUBECONFIG ({env})")
            return env
        default = Path.home() / ".kube" / "config"
        return str(default) if default.is_file() else None

    def _configuration(self) -> Any:
        cfg = client.Configuration()
        path = self._kubeconfig_path()
        try:
            if path is not None:
                config.load_kube_config(
                    config_file=path,
                    context=self.context,
                    client_configuration=cfg,
                    persist_config=False,
                )
            else:
                config.load_incluster_config(client_configuration=cfg)
        except config.ConfigException as exc:
            why = " ".join(str(exc).split())
            if path is None:
                raise KubeConfigError(
                    "no Kubernetes configuration found: set kubernetes.kubeconfig or $KUBECONFIG, "
                    f"create ~/.kube/config, or run inside a cluster ({why})"
                ) from exc
            raise KubeConfigError(f"kubeconfig {path}: {why}") from exc
        except (OSError, yaml.YAMLError, ValueError, KeyError, TypeError) as exc:
            raise KubeConfigError(f"kubeconfig {path}: unreadable ({type(exc).__name__})") from exc
        cfg.retries = 0  # retries and backoff are ours
        return cfg

    def _client(self) -> Any:
        if self._api is None:
            cfg = self._configuration()
            self._host = str(cfg.host)
            self._api = client.ApiClient(cfg)
        return self._api

    @property
    def url(self) -> str:
        """The API server's URL (known once configured)."""
        self._client()
        return self._host

    def close(self) -> None:
        if self._api is not None:
            self._api.rest_client.pool_manager.clear()
            self._api.close()
            self._api = None

    def __enter__(self) -> KubeSource:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------------------
    def snapshot(self, now_ts: int) -> KubeSnapshot:
        """Pods, nodes, namespaces, ReplicaSets and Jobs, all namespaces, as a snapshot."""
        api = self._client()
        core, apps, batch = client.CoreV1Api(api), client.AppsV1Api(api), client.BatchV1Api(api)
        pods = self._list("pods", core.list_pod_for_all_namespaces)
        nodes = self._list("nodes", core.list_node)
        namespaces = self._list("namespaces", core.list_namespace)
        replicasets = self._list("replicasets", apps.list_replica_set_for_all_namespaces)
        jobs = self._list("jobs", batch.list_job_for_all_namespaces)
        dra = self.dra_state()
        sched = self.sched_state()
        try:
            return build_snapshot(
                pods, nodes, namespaces, replicasets, jobs, self.team_label, now_ts, dra, sched
            )
        except ValueError as exc:
            raise KubeError(f"Kubernetes API at {self._host} returned {exc}") from exc

    def dra_state(self) -> DraState:
        """DRA's GPU devices (:mod:`gpuwatch.collectors.kube_dra`); off, with the reason, where
        the API server does not serve them or gpuwatch may not read them."""
        return read_dra(self._client(), self._get_json, self._list, self.dra_gpu_drivers)

    def sched_state(self) -> SchedState:
        """Kueue's and Volcano's queues and queued work (:mod:`gpuwatch.collectors.kube_queues`);
        each off, with the reason, where not served or not allowed."""
        return read_queues(self._client(), self._get_json, self._list)

    def _get_json(self, what: str, method: Callable[..., Any]) -> dict[str, Any]:
        """One JSON object (a discovery document), bounded and retried as a list page is."""
        deadline = time.monotonic() + self.list_timeout_s
        raw = self._bounded(what, lambda: self._raw(what, method, None), 0, deadline)
        body = self._json(what, raw)
        if not isinstance(body, dict):
            raise KubeError(f"Kubernetes API at {self._host} returned no object for {what}")
        return body

    def _list(self, resource: str, method: Callable[..., Any]) -> list[dict[str, Any]]:
        """Every item of a list, page by page; an expired continue token restarts the list."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        restarts = pages = 0
        seen: set[str] = set()
        deadline = time.monotonic() + self.list_timeout_s
        while True:
            try:
                body = self._bounded_page(resource, method, token, pages, deadline)
            except Expired:
                restarts += 1
                if restarts > self.retries:
                    raise KubeError(
                        f"Kubernetes API at {self._host} kept expiring the {resource} list "
                        f"(410) after {restarts} restarts"
                    ) from None
                items, token, seen = [], None, set()
                continue
            pages += 1
            items.extend(body["items"])
            token = body["continue"]
            if not token:
                return items
            self._check_token(resource, token, seen, pages)
            seen.add(token)

    def _check_token(self, resource: str, token: str, seen: set[str], pages: int) -> None:
        where = f"Kubernetes API at {self._host}"
        if token in seen:
            raise KubeError(
                f"{where} repeated a continue token listing {resource} (page {pages}): "
                "the list would never end"
            )
        if pages >= self.list_max_pages:
            raise KubeError(
                f"{where} still had more {resource} after {pages} pages of {self.page_size} "
                f"(kubernetes.list_max_pages): the list was not read"
            )

    def _bounded_page(
        self,
        resource: str,
        method: Callable[..., Any],
        token: str | None,
        pages: int,
        deadline: float,
    ) -> dict[str, Any]:
        """One page, decoded."""
        raw = self._bounded(resource, lambda: self._raw(resource, method, token), pages, deadline)
        return self._decode(resource, raw)

    def _bounded(
        self, resource: str, call: Callable[[], bytes], pages: int, deadline: float
    ) -> bytes:
        """``call()`` in a daemon thread; the stop request and the list's deadline end the wait
        at once."""
        try:
            return self.stop.run(call, max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise KubeError(
                f"Kubernetes API at {self._host} did not finish listing {resource} within "
                f"{self.list_timeout_s:g}s (kubernetes.list_timeout; {pages} page"
                f"{'' if pages == 1 else 's'} read)"
            ) from None

    def _raw(self, resource: str, method: Callable[..., Any], token: str | None) -> bytes:
        """One response body, retried."""
        policy = RetryPolicy(self.retries, self.base_delay_s, self.max_delay_s, stop=self.stop)
        try:
            return policy.call(
                f"listing {resource} from the Kubernetes API",
                lambda: self._fetch(resource, method, token),
                lambda _exc: True,
                (Failure,),
            )
        except RetriesExhausted as done:
            self._give_up(resource, done)

    def _give_up(self, resource: str, done: RetriesExhausted) -> NoReturn:
        failure = done.failure
        if not isinstance(failure, Failure):  # only Failure is retried: never the case
            failure = Failure(str(failure), unreachable=False)
        attempts = done.attempts
        if failure.unreachable:
            raise KubeError(
                f"Kubernetes API at {self._host} unreachable after {attempts} attempts: "
                f"{failure.text}"
            )
        raise KubeError(
            f"Kubernetes API at {self._host} failed listing {resource} after {attempts} "
            f"attempts: {failure.text}"
        )

    def _fetch(self, resource: str, method: Callable[..., Any], token: str | None) -> bytes:
        """One list request's body; raises Failure (retryable), Expired or KubeError."""
        try:
            response = method(
                limit=self.page_size,
                _continue=token,
                _preload_content=False,
                _request_timeout=self.timeout_s,
            )
            try:
                return bytes(response.data)
            finally:
                response.release_conn()
        except ApiException as exc:
            self._check_status(resource, exc, token)
            raise Failure(status_text(exc), unreachable=False) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Failure(failure_reason(exc), unreachable=True) from exc

    def _check_status(self, resource: str, exc: ApiException, token: str | None) -> None:
        """Raise at once for answers a retry cannot change; return for retryable ones."""
        status = int(exc.status or 0)
        if status in _RETRYABLE_STATUS:
            return
        if status == _GONE and token:
            raise Expired
        where = f"Kubernetes API at {self._host}"
        if status == 401:
            text = (
                f"{where} rejected the credentials listing {resource} (HTTP 401 Unauthorized): "
                f"gpuwatch needs an identity allowed {RBAC_NEEDED}"
            )
        elif status == 403:
            text = (
                f"{where} forbids listing {resource} (HTTP 403 Forbidden): "
                f"grant gpuwatch's identity {RBAC_NEEDED}"
            )
        else:
            text = f"{where} refused listing {resource}: {status_text(exc)}"
        raise KubeStatusError(text, status, resource) from None

    def _decode(self, resource: str, raw: bytes) -> dict[str, Any]:
        """``{"items": [...], "continue": token or None}`` from a list response body."""
        body = self._json(resource, raw)
        items = body.get("items") if isinstance(body, dict) else None
        if items is None and isinstance(body, dict) and "items" in body:
            items = []  # an empty list may arrive as null
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise KubeError(
                f"Kubernetes API at {self._host} returned no {resource} list (no items array)"
            )
        metadata = body.get("metadata") or {}
        token = metadata.get("continue") if isinstance(metadata, dict) else None
        return {"items": items, "continue": str(token) if token else None}

    def _json(self, resource: str, raw: bytes) -> Any:
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            detail = (
                f": {exc.msg} at char {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
            )
            raise KubeError(
                f"Kubernetes API at {self._host} returned malformed JSON listing {resource}{detail}"
            ) from None
