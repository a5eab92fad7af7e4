"""Cost over time in Chromium: the grouping chosen by keyboard lands in the URL, the stack's
legend names each group, and a click on a bar opens that group's page."""

from __future__ import annotations

from typing import Any

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as ec

from tests.browser.conftest import Served
from tests.browser.test_browser_dashboard import open_page, severe, wait, wait_for_graphs

pytestmark = [pytest.mark.browser]


def _active_class(driver: Any) -> str:
    return str(driver.switch_to.active_element.get_attribute("class") or "")


def _traces(driver: Any) -> list[str]:
    names: list[str] = driver.execute_script(
        "return document.querySelector('#cost-chart .js-plotly-plot').data.map(t => t.name);"
    )
    return names


def test_group_by_namespace_then_open_one(driver: Any, served: Served) -> None:
    open_page(driver, served, "/cost?window=3d", "cost")
    wait_for_graphs(driver)
    assert _traces(driver)[-1] == "unallocated"
    picker = driver.find_element(By.CSS_SELECTOR, "#cost-by")
    picker.click()
    wait(driver).until(lambda d: "dash-dropdown-search" in (_active_class(d)))
    ActionChains(driver).send_keys("Namespace", Keys.ARROW_DOWN, Keys.ENTER).perform()
    wait(driver).until(lambda d: "by=namespace" in d.current_url)
    assert "window=3d" in driver.current_url
    wait(driver).until(
        lambda d: "by namespace" in d.find_element(By.CSS_SELECTOR, "#cost-chart .gtitle").text
    )
    href = driver.execute_script(  # the namespace that cost most: the first series
        "return document.querySelector('#cost-chart .js-plotly-plot').data[0].customdata[0];"
    )
    assert href.startswith("/workloads?")
    bar = wait(driver).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, "#cost-chart .trace.bars .point path"))
    )
    ActionChains(driver).move_to_element(bar).click().perform()
    wait(driver).until(ec.presence_of_element_located((By.ID, "workloads-body")))
    assert driver.current_url.endswith(href)
    assert severe(driver) == []
