"""`gpuwatch serve --workers N`: gunicorn forks N workers that each serve every page with the
security headers, and the master replaces a worker that dies."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuwatch.cli.commands_demo import build_demo_database
from gpuwatch.cli.wsgi import gunicorn_options
from tests.support.prometheus import wait_until
from tests.test_app_security import PAGES, Server, serving

NOW_TS = 1_794_823_200


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found |= {int(p) for p in text}
    return found


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, int]]:
    folder = tmp_path_factory.mktemp("serve-workers")
    env = {"GPUWATCH_DASHBOARD__THREADS": "2"}
    with serving(folder, env, ("--workers", "2")) as server:
        wait_until(lambda: len(_children(server.pid)) == 2, "two workers", 180)
        yield server, server.pid


def test_the_options_run_threaded_workers_with_logs_on_stderr() -> None:
    options = gunicorn_options("::1", 8050, 4, 8)
    assert options["bind"] == "[::1]:8050"
    assert (options["workers"], options["worker_class"], options["threads"]) == (4, "gthread", 8)
    assert options["preload_app"] is False
    assert options["errorlog"] == "-"
    assert options["control_socket_disable"] is True


def test_two_workers_serve_every_page_with_the_security_headers(
    two_workers: tuple[Server, int],
) -> None:
    server, pid = two_workers
    assert len(_children(pid)) == 2
    for path in PAGES:
        reply = server.get(path)
        assert reply.status == 200, path
        assert "content-security-policy" in reply.headers, path
        assert reply.headers["x-content-type-options"] == "nosniff", path
    assert "with 2 workers × 2 threads" in server.log_text()


def test_a_worker_that_dies_is_replaced(two_workers: tuple[Server, int]) -> None:
    server, pid = two_workers
    before = _children(pid)
    victim = min(before)
    os.kill(victim, signal.SIGKILL)

    def replaced() -> bool:
        now = _children(pid)
        return len(now) == 2 and victim not in now

    wait_until(replaced, "a replacement worker", 120)
    wait_until(lambda: server.get("/healthz").status == 200, "the dashboard after a restart", 120)
    assert server.get("/teams").status == 200


def test_the_workers_share_a_folder_that_outlives_a_worker_and_not_the_server(
    tmp_path: Path,
) -> None:
    build_demo_database(tmp_path / "gpuwatch.db", days=2, step_s=1800, seed=3, now_ts=NOW_TS)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {"GPUWATCH_DASHBOARD__THREADS": "2", "TMPDIR": str(temporary)}
    with serving(tmp_path, env, ("--workers", "2")) as server:
        wait_until(lambda: len(_children(server.pid)) == 2, "two workers", 180)
        assert server.get("/").status == 200
        (shared,) = temporary.glob("gpuwatch-serve-*")
        assert shared.stat().st_mode & 0o777 == 0o700
        # A data version's folder, with the answers a page or the warm-up computed.
        wait_until(lambda: list(shared.glob("*/*.pickle")), "a shared answer", 120)
        before = _children(server.pid)
        victim = min(before)
        os.kill(victim, signal.SIGTERM)  # a worker that exits on its own (SystemExit)

        def replaced() -> bool:
            now = _children(server.pid)
            return len(now) == 2 and victim not in now

        wait_until(replaced, "a replacement worker", 120)
        assert shared.is_dir(), "a worker's exit removed the server's shared folder"
        assert server.get("/teams").status == 200
    assert not shared.exists()
