"""The data tables in Chromium: filtering, the totals row, CSV export of what is shown, links."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec

from gpuwatch.alerts.render import PLAIN_FILE, render_rules, rule_params_from_settings
from gpuwatch.app.data import DashboardData, Filters
from gpuwatch.app.views import breakdown
from tests.browser.conftest import Served
from tests.browser.test_browser_dashboard import downloaded, open_page, severe, wait

pytestmark = [pytest.mark.browser]

TEAM_HEADINGS = (
    "Team", "Allocated (GPU·h)", "Used (GPU·h)", "Efficiency (%)", "Idle (GPU·h)",
    "Allocated cost ($)", "Idle cost ($)", "Unused cost ($)", "Savings ($/month)",
)  # fmt: skip
#: Each team column's key and the digits the table shows it with.
TEAM_DIGITS = (
    ("allocated_gpu_hours", 1), ("used_gpu_hours", 1), ("efficiency_pct", 1),
    ("idle_gpu_hours", 1), ("allocated_cost_usd", 2), ("idle_cost_usd", 2),
    ("unused_cost_usd", 2), ("est_monthly_savings_usd", 2),
)  # fmt: skip


def _js_number(value: float) -> str:
    """A number as JavaScript writes it (AG Grid's CSV): 4119 for 4119.0, 12.5 for 12.5."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _utc(ts: int) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _totals(driver: Any, grid_id: str) -> dict[str, str]:
    """The totals row's cells by column; empty while the grid is being drawn anew."""
    cells = driver.find_elements(By.CSS_SELECTOR, f"#{grid_id} .ag-floating-bottom [col-id]")
    try:
        return {cell.get_attribute("col-id"): cell.text for cell in cells}
    except StaleElementReferenceException:
        return {}


def _team_alone(teams: list[str]) -> str:
    """A team whose name no other team's name contains (the filter matches by "contains")."""
    return next(t for t in teams if not any(t in other for other in teams if other != t))


def test_a_filtered_table_totals_and_exports_what_it_shows(
    driver: Any, served: Served, clean_downloads: Path
) -> None:
    snap = DashboardData(served.engine, served.settings, background=False).current()
    frame = breakdown(snap, Filters(window="3d"), ("team",))
    team = _team_alone([str(t) for t in frame["team"]])
    row = frame.loc[frame["team"].astype(str).eq(team)].iloc[0]
    open_page(driver, served, "/teams?window=3d", "teams")
    wait(driver).until(lambda d: _totals(d, "teams-table").get("team", "").startswith("Total ("))
    assert _totals(driver, "teams-table")["team"] == f"Total ({len(frame)} rows)"
    search = "#teams-table .ag-floating-filter[col-id='team'] input"
    driver.find_element(By.CSS_SELECTOR, search).send_keys(team)
    wait(driver).until(lambda d: _totals(d, "teams-table").get("team") == "Total (1 row)")
    totals = _totals(driver, "teams-table")
    assert totals["idle_cost_usd"] == f"${round(float(row['idle_cost_usd']), 2):,.2f}"
    assert totals["idle_gpu_hours"] == f"{round(float(row['idle_gpu_hours']), 1):,.1f}"
    assert totals["efficiency_pct"] == ""  # a ratio: no sum of percentages
    driver.find_element(By.ID, "teams-table-export").click()
    lines = downloaded(clean_downloads, "gpuwatch-teams-3d.csv").lstrip("\ufeff").splitlines()
    start, end = snap.end_ts - 3 * 86_400, snap.end_ts
    assert lines == [
        f"# gpuwatch Teams; window 3d ({_utc(start)} to {_utc(end)}); filters: none",
        ",".join(f'"{h}"' for h in TEAM_HEADINGS),
        ",".join(
            [f'"{team}"', *(f'"{_js_number(round(float(row[k]), n))}"' for k, n in TEAM_DIGITS)]
        ),
    ]  # the filtered rows only, numbers as numbers, no totals row
    assert severe(driver) == []


def test_a_filtered_page_names_its_filters_in_the_file(
    driver: Any, served: Served, clean_downloads: Path
) -> None:
    open_page(driver, served, "/gpus?cluster=research-eu&window=24h", "gpus")
    wait(driver).until(ec.element_to_be_clickable((By.ID, "gpus-nodes-export"))).click()
    name = "gpuwatch-nodes-24h-cluster-research-eu.csv"
    first = downloaded(clean_downloads, name).lstrip("\ufeff").splitlines()[0]
    assert first.startswith("# gpuwatch Nodes; window 24h (")
    assert first.endswith("; filters: cluster=research-eu")


def test_a_name_is_a_link_that_changes_page_without_reloading(driver: Any, served: Served) -> None:
    open_page(driver, served, "/teams", "teams")
    link = wait(driver).until(
        ec.element_to_be_clickable((By.CSS_SELECTOR, "#teams-table a.gw-link"))
    )
    team = link.text
    driver.execute_script("window.gwStillHere = true;")
    link.click()
    wait(driver).until(lambda d: f"team={team}" in d.current_url)
    wait(driver).until(lambda d: _totals(d, "teams-table").get("team") == "Total (1 row)")
    assert driver.execute_script("return window.gwStillHere === true;")


def test_an_exported_name_that_looks_like_a_formula_is_neutralised(
    driver: Any, served: Served, clean_downloads: Path
) -> None:
    """A cell starting with = + - @ gets a ' in the file, as the CLI's CSVs do."""
    open_page(driver, served, "/teams?window=3d", "teams")
    wait(driver).until(lambda d: _totals(d, "teams-table").get("team", "").startswith("Total ("))
    driver.execute_script(
        "dash_ag_grid.getApi('teams-table').applyTransaction({add: ["
        "{team: '=HYPERLINK(1)', idle_cost_usd: -2.5}, {team: '@SUM(1)', idle_cost_usd: 1}]});"
    )
    search = "#teams-table .ag-floating-filter[col-id='team'] input"
    driver.find_element(By.CSS_SELECTOR, search).send_keys("(1)")
    wait(driver).until(lambda d: _totals(d, "teams-table").get("team") == "Total (2 rows)")
    driver.find_element(By.ID, "teams-table-export").click()
    lines = downloaded(clean_downloads, "gpuwatch-teams-3d.csv").lstrip("\ufeff").splitlines()
    rows = {line.split(",")[0]: line.split(",")[6] for line in lines[2:]}
    assert rows == {  # text neutralised; a negative number stays a number
        '"\'=HYPERLINK(1)"': '"-2.5"',
        '"\'@SUM(1)"': '"1"',
    }


def _rendered_alerts(served: Served) -> list[list[str]]:
    """Alert, severity, for and summary of each alert of the rendered rule file."""
    groups = yaml.safe_load(render_rules(rule_params_from_settings(served.settings))[PLAIN_FILE])
    return [
        [r["alert"], r["labels"]["severity"], r.get("for", "0s"), r["annotations"]["summary"]]
        for g in groups["groups"]
        for r in g["rules"]
        if "alert" in r
    ]


def test_a_plain_table_exports_what_it_shows(
    driver: Any, served: Served, clean_downloads: Path
) -> None:
    """Tables with several links per cell stay HTML; their Export CSV writes them as shown."""
    snap = DashboardData(served.engine, served.settings, background=False).current()
    open_page(driver, served, "/alerts", "alerts")
    driver.execute_script(  # a hostile row and a negative amount, as a table could show them
        "const row = document.querySelector('#alerts-rules tbody tr').cloneNode(true);"
        "const cells = row.querySelectorAll('td');"
        "cells[0].innerText = '=HYPERLINK(1)'; cells[1].innerText = '-$2.50';"
        "document.querySelector('#alerts-rules tbody').appendChild(row);"
    )
    wait(driver).until(ec.element_to_be_clickable((By.ID, "alerts-rules-export"))).click()
    lines = downloaded(clean_downloads, "gpuwatch-alert-rules-7d.csv").splitlines()
    start, end = snap.end_ts - 7 * 86_400, snap.end_ts
    quoted = [",".join(f'"{v}"' for v in row) for row in _rendered_alerts(served)]
    assert lines[0] == f"# gpuwatch Alert rules; window 7d ({_utc(start)} to {_utc(end)}); " + (
        "filters: none"
    )
    assert lines[1] == '"Alert","Severity","For","Summary"'
    assert lines[2:-1] == quoted
    assert lines[-1].startswith('"\'=HYPERLINK(1)","-$2.50",')
    assert severe(driver) == []


def _shown_alerts(driver: Any) -> list[str]:
    rows = driver.find_elements(By.CSS_SELECTOR, "#alerts-rules tbody tr")
    try:
        return [row.find_element(By.TAG_NAME, "td").text for row in rows if row.is_displayed()]
    except StaleElementReferenceException:
        return []


def test_a_plain_table_sorts_filters_and_exports_what_it_shows(
    driver: Any, served: Served, clean_downloads: Path
) -> None:
    open_page(driver, served, "/alerts", "alerts")
    rendered = _rendered_alerts(served)
    names = [row[0] for row in rendered]
    heading = driver.find_element(By.XPATH, "//table[@id='alerts-rules']//th[1]")
    heading.find_element(By.CSS_SELECTOR, "button.gw-sort").click()
    wait(driver).until(lambda d: _shown_alerts(d) == sorted(names, key=str.casefold))
    assert heading.get_attribute("aria-sort") == "ascending"
    heading.find_element(By.CSS_SELECTOR, "button.gw-sort").click()
    down = sorted(names, key=str.casefold, reverse=True)
    wait(driver).until(lambda d: _shown_alerts(d) == down)
    assert heading.get_attribute("aria-sort") == "descending"
    driver.find_element(By.ID, "alerts-rules-filter").send_keys("XID")
    kept = [r for r in rendered if any("xid" in cell.lower() for cell in r)]
    assert 0 < len(kept) < len(rendered)
    wanted = [r[0] for r in sorted(kept, key=lambda r: r[0].casefold(), reverse=True)]
    wait(driver).until(lambda d: _shown_alerts(d) == wanted)
    driver.find_element(By.ID, "alerts-rules-export").click()
    lines = downloaded(clean_downloads, "gpuwatch-alert-rules-7d.csv").splitlines()
    by_name = {r[0]: r for r in rendered}
    assert lines[2:] == [",".join(f'"{v}"' for v in by_name[name]) for name in wanted]
    assert severe(driver) == []


#: Every table cell, totals row included, and every heading whose text its column cuts.
CUT_CELLS = """
const cut = [];
for (const el of document.querySelectorAll(
    '.ag-root-wrapper .ag-cell, .ag-root-wrapper .ag-header-cell-text')) {
  const box = el.querySelector('.ag-cell-value') || el;
  const text = box.querySelector('a') || box;
  if (box.scrollWidth > box.clientWidth + 1 || text.scrollWidth > box.clientWidth + 1) {
    const grid = el.closest('.ag-root-wrapper').closest('[id]');
    cut.push([grid ? grid.id : '', el.textContent.slice(0, 60)]);
  }
}
return cut;"""
#: (path, page, its tables with a totals row, its other tables) of pages with data tables.
TABLE_PAGES = (
    ("/gpus?window=14d", "gpus", ("gpus-health", "gpus-nodes"), ()),
    ("/teams?window=14d", "teams", ("teams-table", "teams-namespaces"), ()),
    ("/workloads?window=14d", "workloads", ("workloads-table",), ()),
    ("/savings?window=14d", "savings", (), ("savings-table",)),
    ("/health", "health", ("health-nodes",), ()),
)


@pytest.mark.parametrize(("path", "page", "summed", "plain"), TABLE_PAGES)
def test_table_columns_are_wide_enough_for_their_text(
    driver: Any,
    served: Served,
    path: str,
    page: str,
    summed: tuple[str, ...],
    plain: tuple[str, ...],
) -> None:
    """The columns' widths come from the server (``gpuwatch.app.grid_widths``), not from the
    browser measuring cells: in Chromium no heading, cell or total is cut."""
    open_page(driver, served, path, page)
    for table in summed:  # drawn, totals row included
        wait(driver).until(
            lambda d, t=table: any(v.startswith("Total (") for v in _totals(d, t).values())
        )
    for table in (*summed, *plain):
        wait(driver).until(
            ec.presence_of_element_located(
                (By.CSS_SELECTOR, f"#{table} .ag-center-cols-container .ag-row")
            )
        )
    assert driver.execute_script(CUT_CELLS) == []
    assert severe(driver) == []
