"""The Queues page in real Chromium, on copies of the browser fleet: one with a cohort, a
waiting Workload and a stalled gang (tests/browser/queue_store.py: $48.00 of idle quota, the
gang ``jobset/qa-train`` stalled for $12.00), and one without queues."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from werkzeug.serving import make_server

from gpuwatch.app.data import DashboardData
from gpuwatch.app.server import create_app
from gpuwatch.config import Settings
from gpuwatch.store.engine import make_engine
from tests.browser.conftest import Served
from tests.browser.queue_store import add_queues, drop_queues, settings_for
from tests.browser.test_browser_dashboard import card_value, screenshot, severe, wait

pytestmark = [
    pytest.mark.browser,
]


def serve_copy(served: Served, folder: Path, change: Callable[[Path], Settings]) -> Iterator[str]:
    """A dashboard on a copy of the browser fleet, changed by ``change`` (its settings)."""
    path = folder / "fleet.db"
    shutil.copyfile(served.path, path)
    settings = change(path)
    engine = make_engine(f"sqlite:///{path}")
    app = create_app(engine, settings, data=DashboardData(engine, settings), warm=True)
    server = make_server("127.0.0.1", 0, app.server, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=30)
        engine.dispose()


@pytest.fixture(scope="module")
def queued(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = Path(tmp_path_factory.mktemp("queued-fleet"))
    yield from serve_copy(served, folder, lambda path: settings_for(add_queues(path)))


def no_queues(path: Path) -> Settings:
    drop_queues(path)
    return Settings()


@pytest.fixture(scope="module")
def unqueued(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve_copy(served, Path(tmp_path_factory.mktemp("unqueued-fleet")), no_queues)


def open_queues(driver: Any, url: str) -> None:
    driver.get(url + "/queues")
    wait(driver).until(ec.presence_of_element_located((By.ID, "queues-body")))


def table_rows(driver: Any, table: str) -> list[list[str]]:
    rows = driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")
    return [[td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in rows]


def test_queues_page_shows_idle_quota_dollars_and_the_stalled_gang(
    driver: Any, queued: str
) -> None:
    driver.get_log("browser")
    open_queues(driver, queued)
    assert card_value(driver, "queues-idle-quota") == "$48.00"
    assert card_value(driver, "queues-stalled") == "$12.00"
    idle = next(r for r in table_rows(driver, "queues-table") if r[0] == "qa-idle")
    assert idle[-2:] == ["12.0", "$48.00"]
    (gang,) = table_rows(driver, "queues-gangs")
    assert gang[0] == "jobset qa-train"
    assert gang[-2:] == ["3.0", "$12.00"]
    assert driver.find_element(By.ID, "nav-queues").get_attribute("class").endswith("gw-active")
    screenshot(driver, "queues")
    assert severe(driver) == []


def test_a_store_without_queues_says_so(driver: Any, unqueued: str) -> None:
    driver.get_log("browser")
    open_queues(driver, unqueued)
    note = driver.find_element(By.ID, "queues-none").text
    assert note.startswith("No queues: the store holds no Kueue ClusterQueue or Volcano queue")
    assert not driver.find_elements(By.ID, "queues-table")
    assert driver.find_elements(By.CSS_SELECTOR, "#queues-gangs-none")
    assert severe(driver) == []
