"""Time on the dashboard in Chromium: Cost over time's grouping lands in the URL and a click on
a bar opens that group's page; the Overview compares with the previous period from the
keyboard."""

from __future__ import annotations

from typing import Any

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as ec

from tests.browser.conftest import Served
from tests.browser.test_browser_dashboard import (
    _press,
    _tab_to,
    open_page,
    severe,
    wait,
    wait_for_graphs,
)

pytestmark = [pytest.mark.browser]


def _focus(driver: Any, by: str, selector: str) -> None:
    """Focus the element, found again if a callback redrew it meanwhile."""

    def focused(d: Any) -> bool:
        try:
            element = d.find_element(by, selector)
            d.execute_script("arguments[0].focus()", element)
            return bool(d.switch_to.active_element == element)
        except StaleElementReferenceException:
            return False

    wait(driver).until(focused)


def _text(driver: Any, selector: str) -> str:
    """The element's text, read again if a callback redrew it; empty while it is missing."""
    for _ in range(5):
        try:
            found = driver.find_elements(By.CSS_SELECTOR, selector)
            return str(found[0].text) if found else ""
        except StaleElementReferenceException:
            continue
    return ""


def _click(driver: Any, selector: str) -> bool:
    """Click the first such element; False (to try again) while it is missing or redrawn."""
    try:
        found = driver.find_elements(By.CSS_SELECTOR, selector)
        if found:
            ActionChains(driver).move_to_element(found[0]).click().perform()
        return bool(found)
    except StaleElementReferenceException:
        return False


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
    _tab_to(driver, lambda e: e.get_attribute("id") == "cost-by")
    _press(driver, Keys.ENTER)
    wait(driver).until(lambda d: "dash-options-list-option" in _active_class(d))  # on "Team"
    _press(driver, Keys.ARROW_DOWN, Keys.ENTER)  # the next: "Namespace"
    wait(driver).until(lambda d: "by=namespace" in d.current_url)
    assert "window=3d" in driver.current_url
    wait(driver).until(lambda d: "by namespace" in _text(d, "#cost-chart .gtitle"))
    href = driver.execute_script(  # the namespace that cost most: the first series
        "return document.querySelector('#cost-chart .js-plotly-plot').data[0].customdata[0];"
    )
    assert href.startswith("/workloads?")
    wait(driver).until(lambda d: _click(d, "#cost-chart .trace.bars .point path"))
    wait(driver).until(ec.presence_of_element_located((By.ID, "workloads-body")))
    assert driver.current_url.endswith(href)
    assert severe(driver) == []


def test_compare_with_the_previous_period_from_the_keyboard(driver: Any, served: Served) -> None:
    open_page(driver, served, "/?window=24h", "overview")
    wait_for_graphs(driver)
    _focus(driver, By.CSS_SELECTOR, "#overview-compare input[type=checkbox]")
    ActionChains(driver).send_keys(Keys.SPACE).perform()
    wait(driver).until(lambda d: "compare=previous" in d.current_url)
    delta = wait(driver).until(lambda d: _text(d, "#card-total-cost .gw-card-delta"))
    assert delta.startswith("vs previous period: ")
    assert _text(driver, "#overview-compare-period").startswith("Previous period: ")
    assert "window=24h" in driver.current_url
    assert severe(driver) == []
