"""GPU health in real Chromium, on a copy of the browser fleet with a failing GPU
(tests/browser/health_store.py): the drain list names its node and the $6.00 paid for it while
failing, the timeline draws, a node link opens the node, and the workload's efficiency panel
shows engine vs SM vs tensor activity."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from werkzeug.serving import make_server

from gpuwatch.app.data import DashboardData
from gpuwatch.app.server import create_app
from gpuwatch.store.engine import make_engine
from tests.browser.conftest import Served
from tests.browser.health_store import FailingGpu, add_failing_gpu, settings_for
from tests.browser.test_browser_dashboard import (
    card_value,
    screenshot,
    severe,
    wait,
    wait_for_graphs,
)

pytestmark = [
    pytest.mark.browser,
]
WORKLOAD = "/workload?cluster=prod-us-east&namespace=llm-training&kind=Job&name=llm-pretrain"


@dataclass(frozen=True)
class Failing:
    url: str
    gpu: FailingGpu


@pytest.fixture(scope="module")
def failing(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Failing]:
    path = Path(tmp_path_factory.mktemp("failing-fleet")) / "fleet.db"
    shutil.copyfile(served.path, path)
    gpu = add_failing_gpu(path)
    engine = make_engine(f"sqlite:///{path}")
    settings = settings_for(gpu)
    app = create_app(engine, settings, data=DashboardData(engine, settings), warm=True)
    server = make_server("127.0.0.1", 0, app.server, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Failing(f"http://127.0.0.1:{server.server_port}", gpu)
    finally:
        server.shutdown()
        thread.join(timeout=30)
        engine.dispose()


def open_body(driver: Any, url: str, page: str) -> None:
    driver.get(url)
    wait(driver).until(ec.presence_of_element_located((By.ID, f"{page}-body")))


def drain_rows(driver: Any) -> list[list[str]]:
    rows = driver.find_elements(By.CSS_SELECTOR, "#gpu-health-drain tbody tr")
    return [[td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in rows]


def test_drain_list_names_the_failing_gpu_and_its_dollars(driver: Any, failing: Failing) -> None:
    driver.get_log("browser")
    open_body(driver, failing.url + "/gpu-health", "gpu-health")
    wait_for_graphs(driver)
    gpu = failing.gpu
    (row,) = drain_rows(driver)
    assert row[0] == gpu.node
    assert row[1] == gpu.gpu_uuid[:12]
    assert row[4] == "XID 79: GPU has fallen off the bus"
    assert row[5] == "2026-11-16 08:30 UTC"
    assert row[7] == "$6.00"
    assert card_value(driver, "gpu-health-failing") == "1"
    assert card_value(driver, "gpu-health-paid-failing") == "$6.00"
    bars = driver.execute_script(
        "return document.querySelectorAll('#gpu-health-timeline .barlayer .point').length;"
    )
    assert bars >= 2  # the failing GPU: healthy, then failing
    assert driver.find_element(By.ID, "nav-gpu-health").get_attribute("class").endswith("gw-active")
    screenshot(driver, "gpu-health-failing")
    assert severe(driver) == []


def test_drain_list_links_open_the_node(driver: Any, failing: Failing) -> None:
    open_body(driver, failing.url + "/gpu-health?window=24h", "gpu-health")
    driver.find_element(By.CSS_SELECTOR, "#gpu-health-drain tbody tr td a.gw-link").click()
    wait(driver).until(ec.presence_of_element_located((By.ID, "node-body")))
    assert "/node?" in driver.current_url and "window=24h" in driver.current_url
    wait(driver).until(lambda d: failing.gpu.node in d.find_element(By.TAG_NAME, "h1").text)


def test_workload_page_shows_its_efficiency(driver: Any, failing: Failing) -> None:
    driver.get_log("browser")
    open_body(driver, failing.url + WORKLOAD, "workload")
    wait_for_graphs(driver)
    cells = driver.find_elements(By.CSS_SELECTOR, "#workload-efficiency-table tbody tr td")
    texts = [c.text for c in cells]
    assert texts[2:6] == ["80.0%", "20.0%", "30.0%", "10.0%"]
    assert texts[9:] == ["1.5 GPU·h", "$6.00", "input-bound"]
    lines = driver.execute_script(
        "return Array.from(document.querySelectorAll("
        "'#workload-efficiency-timeline .legendtext')).map(e => e.textContent);"
    )
    assert lines == ["engine active", "SM active", "tensor active", "DRAM active"]
    assert not driver.find_elements(By.ID, "workload-efficiency-unavailable")
    screenshot(driver, "workload-efficiency")
    assert severe(driver) == []
