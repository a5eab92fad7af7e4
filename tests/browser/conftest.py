"""Real Chromium against the dashboard served on 127.0.0.1, on a small simulated fleet.

The fleet is built once per session; one pod carries a hostile name (markup) so that every
page shows how user-controlled strings are rendered. Screenshots go to artifacts/screenshots/.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine, event
from werkzeug.serving import make_server

from gpuwatch.app.data import DashboardData
from gpuwatch.app.server import create_app
from gpuwatch.cli.commands_demo import build_demo_database
from gpuwatch.config import Settings
from gpuwatch.store.engine import make_engine
from tests.support.binaries import require_binary

NOW_TS = 1_794_823_200  # a Monday 12:00 UTC
HOSTILE = "<img src=x onerror=alert(1)>"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
HEADLESS_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--window-size=1440,1000",
)


#: Statements that change a database: the dashboard must never issue one.
WRITES = re.compile(
    r"^\s*(INSERT|UPDATE|DELETE|REPLACE|UPSERT|MERGE|CREATE|DROP|ALTER|TRUNCATE|VACUUM|"
    r"REINDEX|ANALYZE|ATTACH|DETACH|PRAGMA\s+\w+\s*=)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Served:
    url: str
    engine: Engine
    settings: Settings
    hostile_pod_id: int
    path: Path
    #: sha256 of the SQLite file before the dashboard started
    digest: str
    #: every SQL statement the store's engine issued while serving
    statements: list[str]


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _recorded(engine: Engine) -> list[str]:
    statements: list[str] = []

    @event.listens_for(engine, "before_cursor_execute")
    def record(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        statements.append(statement)

    return statements


def _make_hostile(path: Path) -> int:
    """Give one recently running pod (and its workload) a name that is markup."""
    with closing(sqlite3.connect(path)) as conn, conn:
        (pod_id,) = conn.execute(
            "SELECT pod_id FROM gpu_samples WHERE pod_id IS NOT NULL "
            "ORDER BY ts DESC, gpu_id LIMIT 1"
        ).fetchone()
        conn.execute(
            "UPDATE pods SET name = ?, workload_name = ?, workload_kind = 'Pod' WHERE id = ?",
            (HOSTILE, HOSTILE, pod_id),
        )
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return int(pod_id)


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    require_binary("chromium", "chromium")
    require_binary("chromedriver", "chromium-driver")
    path = Path(tmp_path_factory.mktemp("browser-fleet")) / "fleet.db"
    build_demo_database(path, days=3, step_s=900, seed=7, now_ts=NOW_TS)
    pod_id = _make_hostile(path)
    digest = file_digest(path)
    engine = make_engine(f"sqlite:///{path}")
    statements = _recorded(engine)
    settings = Settings()
    app = create_app(engine, settings, data=DashboardData(engine, settings), warm=True)
    server = make_server("127.0.0.1", 0, app.server, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        yield Served(url, engine, settings, pod_id, path, digest, statements)
    finally:
        server.shutdown()
        thread.join(timeout=30)
        engine.dispose()


@pytest.fixture(scope="session")
def downloads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(tmp_path_factory.mktemp("downloads"))


@pytest.fixture(scope="session")
def driver(served: Served, downloads: Path) -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.remote.remote_connection import RemoteConnection

    RemoteConnection.set_timeout(60)
    options = webdriver.ChromeOptions()
    options.binary_location = require_binary("chromium", "chromium")
    for flag in HEADLESS_FLAGS:
        options.add_argument(flag)
    options.add_experimental_option(
        "prefs",
        {"download.default_directory": str(downloads), "download.prompt_for_download": False},
    )
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(require_binary("chromedriver", "chromium-driver"))
    browser = webdriver.Chrome(service=service, options=options)
    browser.execute_cdp_cmd(
        "Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture
def clean_downloads(downloads: Path) -> Path:
    for item in downloads.iterdir():
        if item.is_file():
            item.unlink()
        else:
            shutil.rmtree(item)
    return downloads
