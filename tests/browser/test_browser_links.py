"""Links all the way down, in Chromium: from an alert's subject to its GPU, node, namespace
and pod."""

from __future__ import annotations

from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec

from tests.browser.conftest import Served
from tests.browser.test_browser_dashboard import open_page, severe, wait

pytestmark = [pytest.mark.browser]
IDLE = "#alerts-GPUAllocatedIdle"


def _first_link(driver: Any, href_start: str) -> Any:
    return wait(driver).until(
        ec.element_to_be_clickable((By.CSS_SELECTOR, f"{IDLE} a.gw-link[href^='{href_start}']"))
    )


@pytest.mark.parametrize(
    ("href_start", "landed"),
    [
        ("/gpu?uuid=GPU-", "gpu-history"),
        ("/node?", "node-body"),
        ("/workloads?", "workloads-body"),
        ("/pod?", "pod-body"),
    ],
)
def test_an_alert_subject_opens_its_gpu_node_namespace_and_pod(
    driver: Any, served: Served, href_start: str, landed: str
) -> None:
    open_page(driver, served, "/alerts", "alerts")
    link = _first_link(driver, href_start)
    href = link.get_attribute("href")
    link.click()
    wait(driver).until(ec.presence_of_element_located((By.ID, landed)))
    assert driver.current_url == href
    assert severe(driver) == []
