"""The dashboard in real Chromium under its Content-Security-Policy: every page renders and its
callbacks run with no CSP violation, an injected inline script is refused, and serving every
page never writes to the store (Dash renders each page's body by a callback)."""

from __future__ import annotations

from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec

from tests.browser.conftest import WRITES, Served, file_digest
from tests.browser.test_browser_dashboard import (
    PAGES,
    detail_pages,
    open_page,
    wait,
    wait_for_graphs,
)

pytestmark = [
    pytest.mark.browser,
]


def _every_page(served: Served) -> list[tuple[str, str]]:
    return [*PAGES, *detail_pages(served)]


def _csp_messages(driver: Any) -> list[str]:
    messages = [str(entry["message"]) for entry in driver.get_log("browser")]
    return [m for m in messages if "Content Security Policy" in m or "Refused to" in m]


def test_every_page_renders_and_runs_its_callbacks_under_the_csp(
    driver: Any, served: Served
) -> None:
    for path, page in _every_page(served):
        driver.get_log("browser")
        open_page(driver, served, path, page)
        wait_for_graphs(driver)
        assert not driver.find_elements(By.CSS_SELECTOR, "._dash-loading"), page
        assert _csp_messages(driver) == [], page


def test_the_policy_is_enforced_on_injected_inline_script(driver: Any, served: Served) -> None:
    open_page(driver, served, "/", "overview")
    driver.get_log("browser")
    ran = driver.execute_script(
        "const s = document.createElement('script');"
        "s.textContent = 'window.gwInjected = true;';"
        "document.body.appendChild(s);"
        "return window.gwInjected === true;"
    )
    assert ran is False
    assert any("inline script" in m for m in _csp_messages(driver))


def test_serving_every_page_never_writes_to_the_store(driver: Any, served: Served) -> None:
    for path, page in _every_page(served):
        open_page(driver, served, path, page)
        wait_for_graphs(driver)
    driver.get(served.url + "/reports")
    wait(driver).until(ec.presence_of_element_located((By.ID, "reports-body")))
    assert any(s.lstrip().upper().startswith("SELECT") for s in served.statements)
    writes = [s for s in served.statements if WRITES.match(s)]
    assert writes == []
    assert file_digest(served.path) == served.digest
