"""A scripted HTTP server on 127.0.0.1 for sources that misbehave: endless pagination, requests
that are accepted and never answered, a proxy that stops forwarding at some point."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

#: What an answer function returns to hold a request open, unanswered, until the server closes.
HOLD = None
Answer = tuple[int, bytes] | None
#: How long a held request is kept open at most (a safety net: the server's close releases it).
_HOLD_LIMIT_S = 600.0


def send_json(handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    """Answer ``handler``'s request with ``status`` and a JSON ``body``."""
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = dict(parse_qsl(parts.query))
        stub = self.server.stub
        with stub.lock:
            stub.requests.append((parts.path, query))
        answer = stub.answer(parts.path, query)
        if answer is HOLD:
            stub.held.set()
            stub.release.wait(_HOLD_LIMIT_S)
            self.close_connection = True
            return
        status, body = answer
        send_json(self, status, body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, stub: StubServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.stub = stub


class StubServer:
    """Answers each GET with ``answer(path, query)``: ``(status, body)``, or :data:`HOLD`.

    ``held`` is set when a request is first held; ``requests`` lists (path, query) in order.
    """

    def __init__(self, answer: Callable[[str, dict[str, str]], Answer]) -> None:
        self.answer = answer
        self.lock = threading.Lock()
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.held = threading.Event()
        self.release = threading.Event()
        self._server = _Server(self)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> StubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()


def pod_list(continue_token: str | None, items: list[dict[str, Any]] | None = None) -> bytes:
    """A real-shaped ``PodList`` page (also read for the other core and apps lists)."""
    metadata: dict[str, Any] = {"resourceVersion": "1"}
    if continue_token:
        metadata["continue"] = continue_token
    body = {"kind": "List", "apiVersion": "v1", "metadata": metadata, "items": items or []}
    return json.dumps(body).encode()


def forward(base_url: str, path: str, query: dict[str, str]) -> tuple[int, bytes]:
    """The answer of the server at ``base_url`` to ``GET path?query``."""
    request = urllib.request.Request(
        f"{base_url}{path}?{urllib.parse.urlencode(query)}",
        headers={"Accept-Encoding": "identity"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return int(response.status), bytes(response.read())
