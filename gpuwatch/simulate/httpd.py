"""A stdlib HTTP server running in a background thread: start, stop, URL, context manager."""

from __future__ import annotations

import functools
import threading
from http.server import ThreadingHTTPServer
from typing import Self


class BackgroundServer:
    """Base of the simulated servers; subclasses say which HTTP server to build."""

    thread_name = "gpuwatch-simulated-server"

    def __init__(self, host: str, port: int) -> None:
        self._address = (host, port)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def _make_server(self, address: tuple[str, int]) -> ThreadingHTTPServer:
        raise NotImplementedError

    def start(self) -> Self:
        if self._httpd is None:
            self._httpd = self._make_server(self._address)
            serve = functools.partial(self._httpd.serve_forever, poll_interval=0.05)
            self._thread = threading.Thread(target=serve, name=self.thread_name, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            if self._thread is not None:
                self._thread.join()
            self._httpd, self._thread = None, None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the server is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"
