"""axe-core in real Chromium on every page: no serious or critical violation.

The tables (``dash_table.DataTable``, deprecated by Dash) are left out of the check: their
pagination buttons have no name and their filter inputs no label, which the page cannot
change. Everything else on every page is checked.
"""

from __future__ import annotations

from typing import Any

import pytest
from axe_selenium_python import Axe  # type: ignore[import-untyped]

from tests.browser.conftest import Served
from tests.browser.test_browser_dashboard import PAGES, detail_pages, open_page, wait_for_graphs

pytestmark = [
    pytest.mark.browser,
    pytest.mark.filterwarnings("ignore:The dash_table.DataTable will be removed"),
]
OTHER_PAGES = [("/queues", "queues")]
#: What axe may not check: the deprecated table component (see the module's docstring).
LEFT_OUT = [[".dash-table-container"]]


def serious(driver: Any) -> list[str]:
    """Each serious or critical violation on the page, with the elements it names."""
    axe = Axe(driver)
    axe.inject()
    found = axe.run(context={"exclude": LEFT_OUT})
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
