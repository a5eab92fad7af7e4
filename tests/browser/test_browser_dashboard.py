"""Every page in real Chromium: renders without console errors, shows the analytics' numbers,
keeps filters in the URL, downloads the right files, drills down to one GPU, and shows
hostile names as text."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from gpuwatch.alerts.render import OPERATOR_FILE, render_rules, rule_params_from_settings
from gpuwatch.analytics import columns as c
from gpuwatch.analytics.costing import prepare
from gpuwatch.analytics.render import render_csv as recommendations_csv
from gpuwatch.analytics.summary import summarize
from gpuwatch.app import format as fmt
from gpuwatch.app.data import DashboardData, Filters
from gpuwatch.app.views import hourly_rows, recommendations, window_bounds
from gpuwatch.app.views_store import default_week, weekly_csv
from gpuwatch.report.inputs import load_inputs, price_book_from
from tests.browser.conftest import HOSTILE, SCREENSHOTS, Served

pytestmark = [
    pytest.mark.browser,
]
WAIT_S = 60

PAGES = [
    ("/", "overview"),
    ("/teams", "teams"),
    ("/cost", "cost"),
    ("/workloads", "workloads"),
    ("/gpus", "gpus"),
    ("/savings", "savings"),
    ("/reports", "reports"),
    ("/alerts", "alerts"),
    ("/gpu-health", "gpu-health"),
    ("/health", "health"),
]


WORKLOAD_PAGE = (
    "/workload?cluster=prod-us-east&namespace=llm-training&kind=Job&name=llm-pretrain",
    "workload",
)


def detail_pages(served: Served) -> list[tuple[str, str]]:
    """A node's, a GPU's (by UUID), a workload's and a pod's page of the served fleet."""
    snap = DashboardData(served.engine, served.settings, background=False).current()
    unit = snap.units.iloc[0]
    pod = snap.pods[
        snap.pods["pod_id"].isin(
            set(hourly_rows(snap, Filters(window="30d"))["pod_id"].astype(int))
        )
    ].iloc[0]
    return [
        (f"/node?cluster={unit['cluster']}&name={unit['node']}", "node"),
        (f"/gpu?uuid={unit['gpu_uuid']}", "gpu"),
        WORKLOAD_PAGE,
        (f"/pod?cluster={pod['cluster']}&namespace={pod['namespace']}&name={pod['pod']}", "pod"),
    ]


def wait(driver: Any) -> WebDriverWait:
    return WebDriverWait(driver, WAIT_S)


def open_page(driver: Any, served: Served, path: str, page: str) -> None:
    driver.get(served.url + path)
    wait(driver).until(ec.presence_of_element_located((By.ID, f"{page}-body")))


def severe(driver: Any) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def screenshot(driver: Any, name: str) -> None:
    height = int(driver.execute_script("return document.body.scrollHeight"))
    driver.set_window_size(1440, min(max(height + 40, 1000), 6000))
    driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))
    driver.set_window_size(1440, 1000)


def wait_for_graphs(driver: Any) -> None:
    """Until every graph on the page has drawn (queried afresh: pages may re-render)."""
    script = (
        "return Array.from(document.querySelectorAll('.dash-graph'))"
        ".every(e => e.querySelector('.main-svg') !== null);"
    )
    wait(driver).until(lambda d: d.execute_script(script))


def card_value(driver: Any, key: str) -> str:
    element = driver.find_element(By.CSS_SELECTOR, f"#card-{key} .gw-card-value")
    return str(element.text)


def expected_totals(served: Served, f: Filters) -> Any:
    snap = DashboardData(served.engine, served.settings, background=False).current()
    start, end = window_bounds(snap, f)
    inputs = load_inputs(served.engine, start, end)
    costed = prepare(inputs.samples, inputs.pods, price_book_from(served.settings))
    if f.cluster:
        costed = costed[costed["cluster"].astype(object).eq(f.cluster).to_numpy(dtype=bool)]
    return summarize(costed, [], served.settings.thresholds.idle_util_pct / 100).iloc[0]


@pytest.mark.parametrize(("path", "page"), PAGES, ids=[p for _, p in PAGES])
def test_page_renders_without_console_errors(
    driver: Any, served: Served, path: str, page: str
) -> None:
    driver.get_log("browser")
    open_page(driver, served, path, page)
    wait_for_graphs(driver)
    assert driver.find_elements(By.CSS_SELECTOR, ".gw-nav-link.gw-active")
    assert not driver.find_elements(By.CSS_SELECTOR, ".gw-empty")
    screenshot(driver, page)
    assert severe(driver) == []


def test_detail_pages_render(driver: Any, served: Served) -> None:
    for path, page in detail_pages(served):
        driver.get_log("browser")
        open_page(driver, served, path, page)
        wait_for_graphs(driver)
        screenshot(driver, page)
        assert severe(driver) == []


def test_headline_numbers_equal_the_analytics(driver: Any, served: Served) -> None:
    open_page(driver, served, "/", "overview")
    total = expected_totals(served, Filters())
    assert card_value(driver, "total-cost") == fmt.usd(total[c.CAPACITY_COST_USD])
    assert card_value(driver, "idle-cost") == fmt.usd(total[c.IDLE_COST_USD])
    assert card_value(driver, "unallocated-cost") == fmt.usd(total[c.UNALLOCATED_COST_USD])
    assert card_value(driver, "efficiency") == fmt.pct(total[c.EFFICIENCY_PCT])


def test_filter_change_updates_url_and_figures(driver: Any, served: Served) -> None:
    open_page(driver, served, "/", "overview")
    before = card_value(driver, "total-cost")
    driver.find_element(
        By.XPATH, "//div[contains(@class,'gw-window')]//label[contains(., '24 hours')]"
    ).click()
    wait(driver).until(lambda d: "window=24h" in d.current_url)
    day = expected_totals(served, Filters(window="24h"))
    wait(driver).until(lambda d: card_value(d, "total-cost") == fmt.usd(day[c.CAPACITY_COST_USD]))
    assert card_value(driver, "total-cost") != before
    cluster = driver.find_element(
        By.XPATH, "//div[@class='gw-filter'][label[text()='Cluster']]//button"
    )
    cluster.click()
    option = wait(driver).until(
        ec.element_to_be_clickable((By.XPATH, "//*[@role='option'][contains(., 'research-eu')]"))
    )
    option.click()
    wait(driver).until(
        lambda d: "cluster=research-eu" in d.current_url and "window=24h" in d.current_url
    )
    narrowed = expected_totals(served, Filters(cluster="research-eu", window="24h"))
    wait(driver).until(
        lambda d: card_value(d, "total-cost") == fmt.usd(narrowed[c.CAPACITY_COST_USD])
    )
    driver.find_element(By.ID, "nav-teams").click()
    wait(driver).until(ec.presence_of_element_located((By.ID, "teams-body")))
    assert "cluster=research-eu" in driver.current_url


#: Records the outputs of each callback request the page makes from now on.
RECORD_CALLBACKS = (
    "window.__gwCalls = [];"
    "const send = window.fetch;"
    "window.fetch = function (url, options) {"
    "  if (String(url).includes('_dash-update-component')) {"
    "    window.__gwCalls.push(JSON.parse(options.body).output);"
    "  }"
    "  return send.apply(this, arguments);"
    "};"
)


def _redrawn(driver: Any, window: str, before: str) -> None:
    def drawn(d: Any) -> bool:
        if f"window={window}" not in d.current_url:
            return False
        try:  # the card is replaced while the page is drawn again
            changed = card_value(d, "total-cost") != before
        except StaleElementReferenceException:
            return False
        return changed and not d.find_elements(By.CSS_SELECTOR, "[data-dash-is-loading='true']")

    wait(driver).until(drawn)


def test_a_filter_change_asks_the_server_for_the_url_and_the_page_only(
    driver: Any, served: Served
) -> None:
    """The page drawn again does not call its controls' callbacks for nothing (Dash calls a
    callback whose inputs were just inserted unless its output was inserted with them)."""
    open_page(driver, served, "/", "overview")
    wait_for_graphs(driver)
    driver.execute_script(RECORD_CALLBACKS)
    for window, label in (("24h", "24 hours"), ("3d", "3 days")):
        before = card_value(driver, "total-cost")
        driver.find_element(
            By.XPATH, f"//div[contains(@class,'gw-window')]//label[contains(., '{label}')]"
        ).click()
        _redrawn(driver, window, before)
    calls = driver.execute_script("return window.__gwCalls")
    page = ".._pages_content.children..._pages_store.data.."
    # The first window's page was drawn before the second click: anything it set off is in.
    url = calls[0]  # the filter bar's: the URL's new query
    assert url.endswith(".search")
    assert calls[:4] == [url, page, url, page]


def _query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def _retype(driver: Any, element_id: str, *keys: str) -> None:
    box = driver.find_element(By.ID, element_id)
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.BACK_SPACE, *keys)


def test_any_range_is_typed_applied_and_kept_in_the_url(driver: Any, served: Served) -> None:
    open_page(driver, served, "/?cluster=research-eu", "overview")
    wait_for_graphs(driver)
    assert driver.find_element(By.ID, "gw-range-error").text == ""  # nothing said unasked
    _retype(driver, "gw-range-from", "2026-11-14")
    _retype(driver, "gw-range-to", "2026-11-15 06:00", Keys.ENTER)
    window = "2026-11-14..2026-11-15T06"
    wait(driver).until(lambda d: f"window={window}" in d.current_url)
    assert "cluster=research-eu" in driver.current_url
    ranged = expected_totals(served, Filters(cluster="research-eu", window=window))
    wait(driver).until(
        lambda d: card_value(d, "total-cost") == fmt.usd(ranged[c.CAPACITY_COST_USD])
    )
    subtitle = driver.find_element(By.CSS_SELECTOR, ".gw-subtitle").text
    assert "(2026-11-14 00:00 to 2026-11-15 06:00 UTC)" in subtitle
    assert driver.find_element(By.ID, "gw-range-to").get_attribute("value") == "2026-11-15T06"
    _retype(driver, "gw-range-to", "2026-11-10", Keys.ENTER)  # before From: refused, and why
    wait(driver).until(
        lambda d: "ends before it starts" in d.find_element(By.ID, "gw-range-error").text
    )
    assert f"window={window}" in driver.current_url
    _retype(driver, "gw-range-to", "2026-11-15")
    driver.find_element(By.ID, "gw-range-apply").click()  # the button applies as Enter does
    wait(driver).until(lambda d: _query(d.current_url).get("window") == ["2026-11-14..2026-11-15"])
    assert _query(driver.current_url)["cluster"] == ["research-eu"]


def downloaded(folder: Path, name: str) -> str:
    target = folder / name
    WebDriverWait(None, WAIT_S, poll_frequency=0.2).until(lambda _: target.is_file())
    return target.read_text(encoding="utf-8")


def test_csv_and_yaml_downloads(driver: Any, served: Served, clean_downloads: Path) -> None:
    data = DashboardData(served.engine, served.settings, background=False)
    snap = data.current()
    open_page(driver, served, "/savings?window=3d", "savings")
    driver.find_element(By.ID, "savings-download-button").click()
    expected = recommendations_csv(recommendations(snap, Filters(window="3d")))
    assert downloaded(clean_downloads, "gpuwatch-recommendations-3d.csv") == expected
    week = default_week(snap)
    assert week is not None
    open_page(driver, served, "/reports", "reports")
    driver.find_element(By.ID, "reports-download-button").click()
    assert downloaded(clean_downloads, f"gpuwatch-weekly-{week}.csv") == weekly_csv(
        data, snap, week
    )
    open_page(driver, served, "/alerts", "alerts")
    driver.find_element(By.ID, "alerts-download-button").click()
    rules = render_rules(rule_params_from_settings(served.settings))[OPERATOR_FILE]
    assert downloaded(clean_downloads, OPERATOR_FILE) == rules


def test_drill_down_from_workload_to_gpu_history(driver: Any, served: Served) -> None:
    open_page(driver, served, "/", "overview")
    driver.find_element(By.CSS_SELECTOR, "#overview-top-workloads a.gw-link").click()
    wait(driver).until(ec.presence_of_element_located((By.ID, "workload-body")))
    assert "/workload?" in driver.current_url
    driver.find_element(By.CSS_SELECTOR, "#workload-gpus a.gw-link").click()
    wait(driver).until(ec.presence_of_element_located((By.ID, "gpu-history")))
    assert "/gpu?uuid=GPU-" in driver.current_url
    wait(driver).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#gpu-history .main-svg"))
    wait(driver).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#gpu-holders .ag-row"))


def test_from_a_workload_to_its_pod_and_the_pods_gpu(driver: Any, served: Served) -> None:
    open_page(driver, served, WORKLOAD_PAGE[0], "workload")
    pod = wait(driver).until(
        ec.element_to_be_clickable((By.CSS_SELECTOR, "#workload-pods a.gw-link"))
    )
    name = pod.text
    pod.click()
    wait(driver).until(ec.presence_of_element_located((By.ID, "pod-body")))
    assert f"name={name}" in driver.current_url and "/pod?" in driver.current_url
    assert driver.find_element(By.TAG_NAME, "h1").text == f"Pod {name}"
    wait(driver).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#pod-phases .main-svg"))
    gpu = wait(driver).until(ec.element_to_be_clickable((By.CSS_SELECTOR, "#pod-gpus a.gw-link")))
    gpu.click()
    wait(driver).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#gpu-history .main-svg"))
    assert "/gpu?uuid=GPU-" in driver.current_url
    assert severe(driver) == []


def test_from_the_team_bar_to_one_gpu_by_clicking_only(driver: Any, served: Served) -> None:
    open_page(driver, served, "/", "overview")
    wait_for_graphs(driver)
    bars = driver.find_elements(By.CSS_SELECTOR, "#overview-idle-by-team .point path")
    team = driver.execute_script(  # the top bar: the team with the largest idle cost
        "const d = document.getElementById('overview-idle-by-team')"
        ".querySelector('.js-plotly-plot').data[0]; return d.y[d.y.length - 1];"
    )
    ActionChains(driver).move_to_element(bars[-1]).click().perform()
    wait(driver).until(ec.presence_of_element_located((By.ID, "workloads-body")))
    assert f"team={team}" in driver.current_url.replace("%20", " ")
    cell = wait(driver).until(
        ec.element_to_be_clickable((By.CSS_SELECTOR, "#workloads-table a.gw-link"))
    )
    cell.click()
    wait(driver).until(ec.presence_of_element_located((By.ID, "workload-body")))
    driver.find_element(By.CSS_SELECTOR, "#workload-gpus a.gw-link").click()
    wait(driver).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#gpu-history .main-svg"))
    assert "/gpu?uuid=GPU-" in driver.current_url


def test_hostile_names_are_shown_as_text(driver: Any, served: Served) -> None:
    open_page(driver, served, "/workloads?window=24h", "workloads")
    snap = DashboardData(served.engine, served.settings, background=False).current()
    pod = snap.pods[snap.pods["pod_id"].eq(served.hostile_pod_id)].iloc[0]
    href = Filters().href(
        "/workload", cluster=pod["cluster"], namespace=pod["namespace"], kind="Pod", name=HOSTILE
    )
    driver.get(served.url + href)
    wait(driver).until(ec.presence_of_element_located((By.ID, "workload-body")))
    wait(driver).until(lambda d: HOSTILE in d.find_element(By.TAG_NAME, "h1").text)
    assert HOSTILE in driver.find_element(By.ID, "workload-pods").text
    assert driver.execute_script("return document.querySelectorAll('img[src=\"x\"]').length") == 0
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018


def _press(driver: Any, *keys: str) -> None:
    """Keys as a keyboard sends them: to whatever has the focus."""
    ActionChains(driver).send_keys(*keys).perform()


def _tab_to(driver: Any, found: Any, most: int = 60) -> Any:
    """Press Tab until ``found(active element)`` holds; the element (fails after ``most``)."""
    for _ in range(most):
        _press(driver, Keys.TAB)
        active = driver.switch_to.active_element
        try:
            if found(active):
                return active
        except StaleElementReferenceException:
            continue  # a callback redrew that control: the next Tab goes on from the new one
    raise AssertionError(f"no such control within {most} Tab presses")


def test_filters_work_from_the_keyboard_alone(driver: Any, served: Served) -> None:
    open_page(driver, served, "/", "overview")
    cluster = _tab_to(driver, lambda e: '"cluster"' in (e.get_attribute("id") or ""))
    assert cluster.text == "All clusters"
    _press(driver, Keys.ENTER)
    wait(driver).until(
        lambda d: (
            "dash-dropdown-search" in (d.switch_to.active_element.get_attribute("class") or "")
        )
    )
    _press(driver, "research-eu", Keys.ARROW_DOWN, Keys.ENTER)
    wait(driver).until(lambda d: "cluster=research-eu" in d.current_url)
    narrowed = expected_totals(served, Filters(cluster="research-eu"))
    wait(driver).until(  # the page has drawn the chosen cluster: its controls are new ones
        lambda d: card_value(d, "total-cost") == fmt.usd(narrowed[c.CAPACITY_COST_USD])
    )
    radio = _tab_to(driver, lambda e: e.get_attribute("type") == "radio")
    assert radio.get_attribute("value") == "7d"  # one stop for the group: the chosen window
    label = radio.find_element(By.XPATH, "./ancestor::label")
    style = driver.execute_script(
        "const s = getComputedStyle(arguments[0]); return [s.outlineStyle, s.outlineWidth];",
        label,
    )
    assert style == ["solid", "3px"]  # where the keyboard is, visibly
    _press(driver, Keys.ARROW_LEFT)
    wait(driver).until(lambda d: "window=3d" in d.current_url)
    assert "cluster=research-eu" in driver.current_url


def test_names_are_shown_as_written(driver: Any, served: Served) -> None:
    open_page(driver, served, "/", "overview")
    label = driver.find_element(By.CSS_SELECTOR, "#card-idle-cost .gw-card-label")
    assert label.text == "Idle cost"
    script = (
        "return Array.from(document.querySelectorAll('*'))"
        ".map(e => getComputedStyle(e).textTransform).filter(t => t !== 'none');"
    )
    for path, page in (("/", "overview"), ("/alerts", "alerts")):  # rule names: GPUXidError
        open_page(driver, served, path, page)
        assert driver.execute_script(script) == [], page


def test_a_slow_answer_shows_a_spinner(driver: Any, served: Served) -> None:
    open_page(driver, served, "/", "overview")
    wait_for_graphs(driver)
    assert not driver.find_elements(By.CSS_SELECTOR, ".dash-spinner")
    driver.execute_cdp_cmd("Network.enable", {})
    slow = {"offline": False, "latency": 1500, "downloadThroughput": -1, "uploadThroughput": -1}
    try:  # every answer now takes 1.5 s more than the 0.5 s a spinner waits for
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", slow)
        driver.find_element(
            By.XPATH, "//div[contains(@class,'gw-window')]//label[contains(., '3 days')]"
        ).click()
        wait(driver).until(ec.presence_of_element_located((By.CSS_SELECTOR, ".dash-spinner")))
    finally:
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", slow | {"latency": 0})
    wait(driver).until(lambda d: "window=3d" in d.current_url)
    wait(driver).until_not(ec.presence_of_element_located((By.CSS_SELECTOR, ".dash-spinner")))
