"""Live servers for a simulated fleet: a dcgm-exporter endpoint and a Kubernetes API.

:class:`ExporterServer` answers, over HTTP on a background thread:

- ``GET /metrics``: the cluster's exposition text at the instant of the request (every node;
  ``?node=NAME`` for one node, ``503`` while that node's exporter is in an outage window);
- ``GET /targets``: Prometheus HTTP service discovery listing one target per node (the address
  the request came to, with ``__param_node``), so Prometheus scrapes each node's exporter as its
  own target, as it does in a real cluster;
- ``GET /health``: ``OK``.

The series of one instant are computed once, for every node of the cluster, and shared by every
request in that second (each node's exporter is scraped as its own target).
:class:`LiveKubeApi` is a :class:`KubeApiServer` whose objects follow the clock: they are rebuilt
from the fleet at most every ``refresh_s`` seconds, when a list starts (never in the middle of a
paginated list).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from gpuwatch.simulate.apiserver import KubeApiServer
from gpuwatch.simulate.exposition import (
    CONTENT_TYPE,
    Series,
    build_series,
    exporter_down,
    format_series,
    sd_targets,
)
from gpuwatch.simulate.fleet import Fleet
from gpuwatch.simulate.generate import sample_at
from gpuwatch.simulate.httpd import BackgroundServer
from gpuwatch.simulate.kube_objects import kube_objects
from gpuwatch.simulate.volcano_decl import VOLCANO_CLUSTER

Clock = Callable[[], float]
_TEXT = "text/plain; charset=utf-8"


def _check_cluster(fleet: Fleet, cluster: str) -> None:
    if cluster not in fleet.clusters:
        raise ValueError(f"no simulated cluster {cluster!r}: choose one of {list(fleet.clusters)}")


class ExporterServer(BackgroundServer):
    """Serves the dcgm-exporter view of ``cluster`` in ``fleet`` at the time ``clock`` says."""

    def __init__(
        self,
        fleet: Fleet,
        cluster: str,
        host: str = "127.0.0.1",
        port: int = 9400,
        clock: Clock = time.time,
    ) -> None:
        _check_cluster(fleet, cluster)
        self.fleet = fleet
        self.cluster = cluster
        self.nodes = frozenset(n.name for n in fleet.nodes if n.cluster == cluster)
        self._clock = clock
        super().__init__(host, port)
        self._lock = threading.Lock()
        self._cached: tuple[int, list[Series]] | None = None

    def _make_server(self, address: tuple[str, int]) -> ThreadingHTTPServer:
        return _ExporterHttp(address, self)

    def _series(self, ts: int) -> list[Series]:
        with self._lock:
            if self._cached is None or self._cached[0] != ts:
                samples = sample_at(self.fleet, ts)
                self._cached = (ts, build_series(self.fleet, ts, samples, self.cluster))
            return self._cached[1]

    def respond(self, target: str, host_header: str | None = None) -> tuple[int, str, bytes]:
        """``(status, content type, body)`` for ``GET target`` (also usable without a socket)."""
        split = urlsplit(target)
        path = split.path.rstrip("/") or "/"
        query = dict(parse_qsl(split.query))
        if path == "/metrics":
            return self._metrics(query.get("node"))
        if path == "/targets":
            address = host_header or self.url.removeprefix("http://")
            body = json.dumps(sd_targets(self.fleet, self.cluster, address))
            return 200, "application/json", body.encode()
        if path in ("/health", "/healthz"):
            return 200, _TEXT, b"OK\n"
        if path == "/":
            index = "dcgm-exporter (simulated): /metrics, /metrics?node=NAME, /targets, /health\n"
            return 200, _TEXT, index.encode()
        return 404, _TEXT, b"404 page not found\n"

    def _metrics(self, node: str | None) -> tuple[int, str, bytes]:
        ts = int(self._clock())
        if node is not None:
            if node not in self.nodes:
                return 404, _TEXT, f"no node {node} in cluster {self.cluster}\n".encode()
            if exporter_down(self.fleet, self.cluster, node, ts):
                return 503, _TEXT, f"the exporter on {node} is down\n".encode()
        series = self._series(ts)
        if node is not None:
            series = [s for s in series if s.node == node]
        return 200, CONTENT_TYPE, format_series(series).encode()


class _ExporterHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = 30
    server: _ExporterHttp

    def do_GET(self) -> None:
        status, content_type, body = self.server.exporter.respond(
            self.path, self.headers.get("Host")
        )
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the scraper gave up (timeout or shutdown)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a scrape every few seconds per node would flood the terminal."""


class _ExporterHttp(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], exporter: ExporterServer) -> None:
        super().__init__(address, _ExporterHandler)
        self.exporter = exporter


class LiveKubeApi(KubeApiServer):
    """The Kubernetes API of ``cluster`` in ``fleet``, its objects following ``clock``;
    ``resource.k8s.io`` served in ``dra_version``, Kueue served in ``kueue_version``, Volcano
    (``scheduling.volcano.sh/v1beta1``) where ``volcano``; None: in the cluster that runs it
    (``research-eu``), so another cluster's API answers 404 for it, as one without Volcano does."""

    def __init__(
        self,
        fleet: Fleet,
        cluster: str,
        host: str = "127.0.0.1",
        port: int = 8001,
        clock: Clock = time.time,
        refresh_s: int = 15,
        dra_version: str = "v1",
        kueue_version: str = "v1beta1",
        volcano: bool | None = None,
    ) -> None:
        _check_cluster(fleet, cluster)
        self.fleet = fleet
        self.kueue_version = kueue_version
        self.cluster = cluster
        self._clock = clock
        self._refresh_s = max(1, refresh_s)
        self._bucket = self._current_bucket()
        self._refresh_lock = threading.Lock()
        objects = kube_objects(fleet, self._bucket, cluster, dra_version, kueue_version)
        served = cluster == VOLCANO_CLUSTER if volcano is None else volcano
        super().__init__(
            objects,
            host,
            port,
            dra_version=dra_version,
            kueue_version=kueue_version,
            volcano=served,
        )

    def _current_bucket(self) -> int:
        now = int(self._clock())
        return now - now % self._refresh_s

    def respond(self, target: str, authorization: str | None) -> tuple[int, bytes]:
        query = dict(parse_qsl(urlsplit(target).query))
        if not query.get("continue"):
            with self._refresh_lock:
                bucket = self._current_bucket()
                if bucket != self._bucket:
                    objects = kube_objects(
                        self.fleet, bucket, self.cluster, self.dra_version, self.kueue_version
                    )
                    self.set_objects(objects)
                    self._bucket = bucket
        return super().respond(target, authorization)
