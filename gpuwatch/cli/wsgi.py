"""Serving the dashboard: waitress for one process, gunicorn for several workers.

One worker (the default) is a waitress server with threads: no fork, works everywhere. With
``--workers N`` (``dashboard.workers``) gunicorn forks N worker processes, each with threads,
and each worker builds its own app and database engine after the fork (an engine's
connections must never cross a fork). The master restarts a worker that dies.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpuwatch.cli.context import RuntimeFailure

#: Seconds a worker may spend on one request before gunicorn replaces it.
WORKER_TIMEOUT_S = 120
#: Seconds a worker gets to finish its requests on SIGTERM.
GRACEFUL_TIMEOUT_S = 30

WsgiApp = Callable[..., Any]


@contextmanager
def shared_folder() -> Iterator[Path]:
    """A folder of this user's only (mode 0700) in which the workers share their expensive
    answers (:mod:`gpuwatch.app.shared`), in the temporary folder (``TMPDIR``), removed when
    the server stops. Only the process that made it removes it: a worker leaving the block
    when it exits (gunicorn ends a worker with ``SystemExit`` in the forked process) does not.
    """
    owner = os.getpid()
    folder = Path(tempfile.mkdtemp(prefix="gpuwatch-serve-"))
    try:
        yield folder
    finally:
        if os.getpid() == owner:
            shutil.rmtree(folder, ignore_errors=True)


def serve_threads(app: WsgiApp, host: str, port: int, threads: int) -> None:
    """Serve ``app`` from this process with waitress."""
    from waitress import serve as wsgi_serve

    try:
        wsgi_serve(app, host=host, port=port, threads=threads, ident="gpuwatch")
    except OSError as exc:
        raise RuntimeFailure(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None


def gunicorn_options(host: str, port: int, workers: int, threads: int) -> dict[str, object]:
    """The gunicorn settings of ``serve --workers``: gthread workers, logs on stderr."""
    return {
        "bind": f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
        "workers": workers,
        "worker_class": "gthread",
        "threads": threads,
        "timeout": WORKER_TIMEOUT_S,
        "graceful_timeout": GRACEFUL_TIMEOUT_S,
        "preload_app": False,
        "accesslog": None,
        "errorlog": "-",
        "proc_name": "gpuwatch-dashboard",
        "control_socket_disable": True,
    }


def serve_workers(
    factory: Callable[[], WsgiApp], host: str, port: int, workers: int, threads: int
) -> None:
    """Serve the app that ``factory`` builds, once in every one of ``workers`` processes."""
    try:
        from gunicorn.app.base import BaseApplication
    except ImportError:  # pragma: no cover - gunicorn is a dependency on POSIX
        raise RuntimeFailure("--workers needs gunicorn (POSIX only): use --workers 1") from None

    options = gunicorn_options(host, port, workers, threads)

    class _Dashboard(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            for key, value in options.items():
                if value is not None:
                    self.cfg.set(key, value)

        def load(self) -> WsgiApp:
            return factory()

    _Dashboard().run()
