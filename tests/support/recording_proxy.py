"""A reverse proxy on 127.0.0.1 that records what reaches it (path, query, headers) and may
rewrite an answer on its way back: what a tenant-aware gateway or a partial query layer would do
in front of a real server."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.support.stub_http import send_json

#: ``rewrite(path, query, body)``: the body to send back instead (None: the upstream's).
Rewrite = Callable[[str, dict[str, str], bytes], bytes | None]


@dataclass(frozen=True)
class Seen:
    """One request as the proxy saw it: method, path, query (or form) and headers."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:
        self._relay(None)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._relay(self.rfile.read(length))

    def _relay(self, form: bytes | None) -> None:
        parts = urlsplit(self.path)
        query = dict(parse_qsl(parts.query))
        if form is not None:
            query |= dict(parse_qsl(form.decode()))
        proxy = self.server.proxy
        seen = Seen(self.command, parts.path, query, dict(self.headers.items()))
        with proxy.lock:
            proxy.seen.append(seen)
        status, body = proxy.forward(self.path, form, self.headers.get("Content-Type"))
        with proxy.lock:
            proxy.answered.append((seen, status))
        if status == 200 and proxy.rewrite is not None:
            body = proxy.rewrite(parts.path, query, body) or body
        send_json(self, status, body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, proxy: RecordingProxy) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.proxy = proxy


class RecordingProxy:
    """Forwards every request to ``upstream`` (headers other than the hop's dropped), records it
    in ``seen``, and passes a 200 answer through ``rewrite``."""

    def __init__(self, upstream: str, rewrite: Rewrite | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.rewrite = rewrite
        self.lock = threading.Lock()
        self.seen: list[Seen] = []
        #: Each request with the status of the upstream's answer, in the order answered.
        self.answered: list[tuple[Seen, int]] = []
        self._server = _Server(self)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def forward(self, path: str, form: bytes | None, content_type: str | None) -> tuple[int, bytes]:
        headers = {"Accept-Encoding": "identity"}
        if content_type:
            headers["Content-Type"] = content_type
        request = urllib.request.Request(f"{self.upstream}{path}", data=form, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as exc:
            return int(exc.code), bytes(exc.read())

    def requests_to(self, path: str) -> list[Seen]:
        with self.lock:
            return [seen for seen in self.seen if seen.path == path]

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
