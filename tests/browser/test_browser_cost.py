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


def _traces(driver: Any) -> list[str]:
    names: list[str] = driver.execute_script(
        "return document.querySelector('#cost-chart .js-plotly-plot').data.map(t => t.name);"
    )
    return names


#: The tallest bar of the first series (the group that cost most): found by its value, so a
#: bar too thin to click is never the one clicked.
TALLEST_BAR = (
    "const plot = document.querySelector('#cost-chart .js-plotly-plot');"
    "const ys = plot.data[0].y; const i = ys.indexOf(Math.max(...ys));"
    "const trace = plot.querySelectorAll('.barlayer .trace.bars')[0];"
    "return trace ? trace.querySelectorAll('.point path')[i] : null;"
)


def _open_tallest_bar(driver: Any, landed: str) -> bool:
    """Click the tallest bar (again, if a redraw swallowed the click) until the page changed."""
    if landed in driver.current_url:
        return True
    try:
        bar = driver.execute_script(TALLEST_BAR)
        if bar is not None:
            ActionChains(driver).move_to_element(bar).click().perform()
    except StaleElementReferenceException:
        return False
    return landed in driver.current_url


def _option(driver: Any, text: str) -> Any:
    """The open dropdown's option that reads ``text`` (None until the list is shown)."""
    for option in driver.find_elements(By.CSS_SELECTOR, "[role=option]"):
        try:
            if option.text.strip() == text and option.is_displayed():
                return option
        except StaleElementReferenceException:
            continue
    return None


def test_group_by_namespace_then_open_one(driver: Any, served: Served) -> None:
    open_page(driver, served, "/cost?window=3d", "cost")
    wait_for_graphs(driver)
    assert _traces(driver)[-1] == "unallocated"
    _tab_to(driver, lambda e: e.get_attribute("id") == "cost-by")
    _press(driver, Keys.ENTER)  # opens the list
    wait(driver).until(lambda d: _option(d, "Namespace")).click()
    wait(driver).until(lambda d: "by=namespace" in d.current_url)
    assert "window=3d" in driver.current_url
    wait(driver).until(lambda d: "by namespace" in _text(d, "#cost-chart .gtitle"))
    href = driver.execute_script(  # the namespace that cost most: the first series
        "return document.querySelector('#cost-chart .js-plotly-plot').data[0].customdata[0];"
    )
    assert href.startswith("/workloads?")
    wait(driver).until(lambda d: _open_tallest_bar(d, "/workloads?"))
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
