"""Every page at a phone's, a tablet's, a laptop's and a desktop's width: nothing wider than
the window (tables scroll inside their card), and the cards two-up on a phone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.browser.conftest import Served
from tests.browser.test_browser_dashboard import PAGES, detail_pages, open_page, wait_for_graphs

pytestmark = [
    pytest.mark.browser,
]
WIDTHS = (390, 768, 1366, 1920)


def every_page(served: Served) -> list[tuple[str, str]]:
    return [*PAGES, ("/queues", "queues"), *detail_pages(served)]


@pytest.fixture
def sized(driver: Any) -> Iterator[Any]:
    """The driver; its window back at the suite's size afterwards."""
    yield driver
    driver.set_window_size(1440, 1000)


def overflow(driver: Any) -> tuple[int, int]:
    """The page's scrolling width and the window's inner width (CSS pixels)."""
    widths = driver.execute_script(
        "return [document.scrollingElement.scrollWidth, window.innerWidth];"
    )
    return int(widths[0]), int(widths[1])


@pytest.mark.parametrize("width", WIDTHS)
def test_no_page_is_wider_than_the_window(sized: Any, served: Served, width: int) -> None:
    sized.set_window_size(width, 900)
    wider = []
    for path, page in every_page(served):
        open_page(sized, served, path, page)
        wait_for_graphs(sized)
        scroll, inner = overflow(sized)
        assert inner == width
        if scroll > inner:
            wider.append((page, scroll))
    assert wider == []


def test_cards_are_two_up_on_a_phone(sized: Any, served: Served) -> None:
    sized.set_window_size(390, 900)
    open_page(sized, served, "/", "overview")
    cards = sized.find_elements(By.CSS_SELECTOR, "#overview-body .gw-card")
    tops = [round(card.rect["y"]) for card in cards[:4]]
    assert tops[0] == tops[1] < tops[2] == tops[3]
