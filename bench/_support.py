"""Shared pieces of the benchmarks: paths, timing, child processes, Prometheus and PostgreSQL.

Every benchmark runs from the repository root (``.venv/bin/python bench/NAME.py``); generated
data lives under ``$GPUWATCH_BENCH_DIR`` (default ``/tmp/gpuwatch-bench``) so reruns are fast.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BENCH_DIR = Path(os.environ.get("GPUWATCH_BENCH_DIR", "/tmp/gpuwatch-bench"))
PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def binary(name: str, extra_dirs: Sequence[Path] = ()) -> str:
    """The path of an installed program, or exit naming the Debian package to install."""
    found = shutil.which(name)
    for folder in extra_dirs:
        if found:
            break
        candidate = folder / name
        found = str(candidate) if candidate.is_file() else None
    if not found:
        package = "postgresql" if extra_dirs else "prometheus"
        sys.exit(f"{name} not found: install Debian's {package} package")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(
    check: Callable[[], bool], what: str, timeout_s: float = 120.0, interval_s: float = 0.2
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval_s)
    raise RuntimeError(f"timed out after {timeout_s:.0f}s waiting for {what}")


# --- measurements -------------------------------------------------------------------------


@dataclass
class Measure:
    """Repeated measurements of one thing: seconds, peak RSS (MiB) and items processed."""

    name: str
    seconds: list[float] = field(default_factory=list)
    rss_mib: list[float] = field(default_factory=list)
    items: list[int] = field(default_factory=list)
    unit: str = "rows"
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, seconds: float, rss_mib: float | None = None, items: int | None = None) -> None:
        self.seconds.append(seconds)
        if rss_mib is not None:
            self.rss_mib.append(rss_mib)
        if items is not None:
            self.items.append(items)

    @property
    def median_s(self) -> float:
        return statistics.median(self.seconds) if self.seconds else float("nan")


def print_table(title: str, measures: Sequence[Measure]) -> None:
    """The results as a fixed-width table on standard output."""
    print(f"\n{title}")
    head = (
        f"{'measurement':<44} {'runs':>4} {'median s':>9} {'min s':>8} {'max s':>8} "
        f"{'peak RSS MiB':>12} {'items':>12} {'items/s':>11}"
    )
    print(head)
    print("-" * len(head))
    for m in measures:
        if not m.seconds:
            print(f"{m.name:<44} {'0':>4}  (not run) {m.note}")
            continue
        rss = f"{max(m.rss_mib):,.0f}" if m.rss_mib else "-"
        items = int(statistics.median(m.items)) if m.items else 0
        rate = f"{items / m.median_s:,.0f}" if items and m.median_s > 0 else "-"
        print(
            f"{m.name:<44} {len(m.seconds):>4} {m.median_s:>9.2f} {min(m.seconds):>8.2f} "
            f"{max(m.seconds):>8.2f} {rss:>12} {items:>12,} {rate:>11}"
            + (f"  {m.unit}; {m.note}" if m.note else f"  {m.unit}" if items else "")
        )


def machine_line() -> str:
    """What the figures were measured on, for the tables' header."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    prom = shutil.which("prometheus")
    version = ""
    if prom:
        out = subprocess.run([prom, "--version"], capture_output=True, text=True, check=False)
        version = (out.stdout or out.stderr).split("\n", 1)[0].split(" (", 1)[0]
    return (
        f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{version or 'prometheus not found'}, load average {load}"
    )


@dataclass(frozen=True)
class ChildResult:
    seconds: float
    rss_mib: float
    payload: dict[str, Any]


def run_child(
    argv: Sequence[str], env: dict[str, str] | None = None, limit_gb: float = 0.0
) -> ChildResult:
    """Run ``python argv...`` in a fresh interpreter; its last stdout line is a JSON payload.

    Returns the wall time, the child's own peak RSS (``wait4``, not the parent's) and payload.
    ``limit_gb`` > 0 caps the child's address space, so that a run too big for the machine
    fails with MemoryError instead of calling in the kernel's OOM killer.
    """

    def limit() -> None:
        if limit_gb > 0:
            cap = int(limit_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    start = time.perf_counter()
    with tempfile.TemporaryFile() as err_file:
        proc = subprocess.Popen(
            [sys.executable, *argv],
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=err_file,
            preexec_fn=limit,  # noqa: PLW1509 - only setrlimit, no threads involved
        )
        assert proc.stdout is not None
        out = proc.stdout.read().decode()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        err_file.seek(0)
        err = err_file.read().decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"child {argv[0]} failed ({proc.returncode}): {err.strip()[-3000:]}")
    lines = [line for line in out.splitlines() if line.strip()]
    payload = json.loads(lines[-1]) if lines else {}
    return ChildResult(seconds, usage.ru_maxrss / 1024.0, payload)


def emit(payload: dict[str, Any]) -> None:
    """A child's result: one JSON line on standard output (see :func:`run_child`)."""
    payload.setdefault(
        "self_peak_rss_mib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    )
    print(json.dumps(payload), flush=True)


# --- Prometheus ---------------------------------------------------------------------------


def answers(url: str) -> bool:
    """Whether ``url`` answers 200 within 2 s."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


@contextmanager
def prometheus(tsdb: Path, extra: Sequence[str] = ()) -> Iterator[str]:
    """A Debian ``prometheus`` serving ``tsdb`` (no scrapes) on 127.0.0.1; yields its URL."""
    config = tsdb.parent / "prometheus.yml"
    config.write_text("global: {}\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (tsdb.parent / "prometheus.log").open("ab")
    proc = subprocess.Popen(
        [
            binary("prometheus"),
            f"--config.file={config}",
            f"--storage.tsdb.path={tsdb}",
            "--storage.tsdb.retention.time=10y",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        ready = f"{url}/-/ready"
        wait_until(lambda: answers(ready) or proc.poll() is not None, "Prometheus ready", 300)
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited; see {tsdb.parent / 'prometheus.log'}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


# --- PostgreSQL ---------------------------------------------------------------------------


def _as_postgres(cmd: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


@contextmanager
def postgres_server() -> Iterator[str]:
    """A private PostgreSQL cluster kept under the bench folder (data survives between runs).

    Yields ``postgresql+psycopg://postgres@127.0.0.1:PORT``; stopped on exit.
    """
    initdb = binary("initdb", PG_BIN_DIRS)
    pg_ctl = str(Path(initdb).with_name("pg_ctl"))
    root = BENCH_DIR / "postgres"
    data = root / "data"
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    BENCH_DIR.chmod(0o777)
    root.mkdir(exist_ok=True)
    root.chmod(0o777)
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    if not (data / "PG_VERSION").exists():
        subprocess.run(
            _as_postgres([initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8"]),
            check=True,
            capture_output=True,
        )
    pid_file = data / "postmaster.pid"
    running = subprocess.run(
        _as_postgres([pg_ctl, "-D", str(data), "status"]), capture_output=True, check=False
    )
    if running.returncode == 0 and pid_file.exists():
        # Already started by another benchmark: share it, leave it running.
        port = int(pid_file.read_text().splitlines()[3])
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
        return
    port = free_port()
    # fsync off: benchmark data is disposable. Memory settings of a small dedicated server.
    options = (
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
        "-c shared_buffers=512MB -c work_mem=64MB -c maintenance_work_mem=512MB "
        "-c max_wal_size=4GB -c synchronous_commit=off"
    )
    subprocess.run(
        _as_postgres(
            [pg_ctl, "-D", str(data), "-o", options, "-w", "-l", str(root / "log"), "start"]
        ),
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(
            _as_postgres([pg_ctl, "-D", str(data), "-m", "fast", "stop"]),
            capture_output=True,
            check=False,
        )


def create_database(server_url: str, name: str, drop: bool = False) -> str:
    """Create database ``name`` on the server (dropping it first if asked); returns its URL."""
    import psycopg

    dsn = server_url.replace("postgresql+psycopg://", "postgresql://") + "/postgres"
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists and drop:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            exists = None
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server_url}/{name}"


def database_exists(server_url: str, name: str) -> bool:
    import psycopg

    dsn = server_url.replace("postgresql+psycopg://", "postgresql://") + "/postgres"
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    return row is not None
