"""A private PostgreSQL server for the test session (initdb + pg_ctl on a free port)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.binaries import PG_BIN_DIRS, require_binary


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_postgres(cmd: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


@contextmanager
def private_postgres() -> Iterator[str]:
    """Start a throwaway cluster; yields a SQLAlchemy URL of a server to create databases on."""
    initdb = require_binary("initdb", "postgresql", PG_BIN_DIRS)
    pg_ctl = str(Path(initdb).with_name("pg_ctl"))
    # Not under pytest's 0700 temp root: the postgres user must be able to enter it.
    root = Path(tempfile.mkdtemp(prefix="gpuwatch-pg-", dir="/tmp"))
    root.chmod(0o777)
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    port = free_port()
    subprocess.run(
        _as_postgres([initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8"]),
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
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
            _as_postgres([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]),
            capture_output=True,
            check=False,
        )
        shutil.rmtree(root, ignore_errors=True)
