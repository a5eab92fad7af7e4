"""axe-core in real Chromium on every page, its data tables drawn: no serious or critical
violation anywhere on the page.

The page is checked with the axe-core that ``axe-selenium-python`` bundles (3.1), the data
tables with axe-core 4.4 (from ``axe-core-python``). axe 3.1 fails every empty ARIA row group
(AG Grid keeps empty ones for full-width and pinned rows) and ``autocomplete="off"`` on number
inputs; axe 4 asks for review of the first and accepts the second, and checks the rest of the
grid (headers, cells, filter inputs, pagination) as strictly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import axe_core_python  # type: ignore[import-untyped]
import pytest
from axe_selenium_python import Axe  # type: ignore[import-untyped]
from selenium.webdriver.common.by import By

from tests.browser.conftest import Served
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
OTHER_PAGES = [("/queues", "queues")]
#: True once every data table on the page has drawn its rows.
#: axe-core 4.4, for the data tables.
AXE_4 = str(Path(axe_core_python.__file__).with_name("axe.min.js"))
TABLES = ".gw-datagrid"
TABLES_DRAWN = (
    "return Array.from(document.querySelectorAll('.gw-datagrid'))"
    ".every(g => g.querySelector('.ag-row'));"
)


def serious(driver: Any) -> list[str]:
    """Each serious or critical violation on the page, with the elements it names."""
    wait(driver).until(lambda d: d.execute_script(TABLES_DRAWN))
    found = _violations(Axe(driver), {"exclude": [[TABLES]]})
    if driver.find_elements(By.CSS_SELECTOR, TABLES):
        found += _violations(Axe(driver, script_url=AXE_4), {"include": [[TABLES]]})
    return found


def _violations(axe: Any, context: dict[str, Any]) -> list[str]:
    axe.inject()
    found = axe.run(context=context)
    return [
        f"{v['id']} ({v['impact']}): {[node['target'] for node in v['nodes']]}"
        for v in found["violations"]
        if v["impact"] in ("serious", "critical")
    ]


@pytest.mark.parametrize(
    ("path", "page"), PAGES + OTHER_PAGES, ids=[p for _, p in PAGES + OTHER_PAGES]
)
def test_no_serious_violation(driver: Any, served: Served, path: str, page: str) -> None:
    open_page(driver, served, path, page)
    wait_for_graphs(driver)
    assert serious(driver) == []


def test_no_serious_violation_on_detail_pages(driver: Any, served: Served) -> None:
    for path, page in detail_pages(served):
        open_page(driver, served, path, page)
        wait_for_graphs(driver)
        assert serious(driver) == [], page


def test_the_check_finds_what_it_is_for(driver: Any, served: Served) -> None:
    """A page with a nameless button and grey-on-grey text fails it: the check is live."""
    open_page(driver, served, "/", "overview")
    driver.execute_script(
        "const b = document.createElement('button'); document.body.appendChild(b);"
        "const p = document.createElement('p'); p.textContent = 'faint';"
        "p.style.color = '#dddddd'; document.body.appendChild(p);"
    )
    found = serious(driver)
    assert [v.split(" ")[0] for v in found] == ["button-name", "color-contrast"]


def test_the_table_check_finds_what_it_is_for(driver: Any, served: Served) -> None:
    """A nameless button inside a data table fails it: the tables are checked too."""
    open_page(driver, served, "/teams", "teams")
    wait(driver).until(lambda d: d.execute_script(TABLES_DRAWN))
    driver.execute_script(
        "document.querySelector('.gw-datagrid .ag-root')"
        ".appendChild(document.createElement('button'));"
    )
    assert [v.split(" ")[0] for v in serious(driver)] == ["button-name"]
