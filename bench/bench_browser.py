"""The dashboard as a user meets it: Chromium timings and worker memory, N gunicorn workers.

    .venv/bin/python bench/bench_browser.py --db sqlite:////tmp/demo.db --workers 4

Starts ``gpuwatch serve --workers N`` on the store, opens the Overview 3 × N times so that every
worker builds its page data (each worker keeps its own: see docs/dashboard.md), then drives
headless Chromium (Debian's ``chromium`` and ``chromium-driver``):

- ``first load``: open the page and wait until its body is present and every graph has drawn
  (the page's JavaScript comes from the browser cache after the first page, as for a user);
- ``filter change``: on the open page, a click on a time window of the filter bar not asked
  before, until the page has drawn it again (the URL's query holds the window, no component
  is loading, and every graph has drawn a new figure): what a user waits for when changing a
  filter (the page's JavaScript stays loaded; the filter bar's callback rewrites the URL, and
  the page's layout is fetched and drawn);
- ``filter link``: then the same page opened at a URL with a filter (a window, an allocation
  mode; only the allocation mode is new by then), a whole page load each.

Prints median, min and max per page over ``--runs`` runs, and each worker's resident memory at
the end and at its peak (Linux ``/proc``: ``VmRSS``, ``VmHWM``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _support import ROOT, answers, binary, free_port, machine_line, wait_until

PAGES = (
    ("/", "overview"),
    ("/teams", "teams"),
    ("/workloads", "workloads"),
    ("/gpus", "gpus"),
    ("/savings", "savings"),
    ("/reports", "reports"),
    ("/alerts", "alerts"),
    ("/gpu-health", "gpu-health"),
    ("/queues", "queues"),
    ("/health", "health"),
)
FILTERS = ("window=24h", "window=30d", "window=3d", "window=14d", "window=7d&allocation=mig")
#: Windows clicked in turn on a page opened at the default (7 days): each new to the page.
CLICKED_WINDOWS = ("24h", "30d", "3d", "14d", "mtd")
#: Before a click: remember the figures drawn now (each graph's ``data``) and the window line under
#: the page's title, to tell a page drawn again from them, and note when the pointer goes down.
MARK_FIGURES = (
    "window.__gwBenchOld = Array.from(document.querySelectorAll('.js-plotly-plot'))"
    ".map(e => e.data);"
    "const line = document.querySelector('.gw-subtitle');"
    "window.__gwBenchLine = line ? line.textContent : null;"
    "window.__gwBenchDown = null;"
    "document.addEventListener('pointerdown', () => { window.__gwBenchDown = performance.now(); },"
    " {capture: true, once: true});"
)
#: The page has drawn again after a filter change to ``arguments[0]`` (a query fragment): the URL
#: holds it, no component is loading, the window line differs (the new layout is in: a page
#: without graphs is not done when the URL changes) and every graph drew a new figure. Returns the
#: milliseconds since the pointer went down, as the page's clock has them (-1 if it saw none).
REDRAWN = (
    "const old = window.__gwBenchOld || [];"
    "if (!window.location.search.includes(arguments[0])) return false;"
    "if (document.querySelector('[data-dash-is-loading=\"true\"]')) return false;"
    "const line = document.querySelector('.gw-subtitle');"
    "if (window.__gwBenchLine !== null && (!line || line.textContent === window.__gwBenchLine))"
    " return false;"
    "if (!Array.from(document.querySelectorAll('.js-plotly-plot'))"
    ".every(e => e.querySelector('.main-svg') !== null && !old.includes(e.data))) return false;"
    "const down = window.__gwBenchDown;"
    "return down === null ? -1 : Math.max(performance.now() - down, 0.001);"
)
GRAPHS_DRAWN = (
    "return Array.from(document.querySelectorAll('.dash-graph'))"
    ".every(e => e.querySelector('.main-svg') !== null);"
)
HEADLESS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--window-size=1440,1000")  # fmt: skip


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return sorted(found)


def _rss_mib(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory now (``VmRSS``) or at its peak (``VmHWM``), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


@contextmanager
def serving(
    db_url: str, workers: int, log: Path, warm_windows: Sequence[str] = ()
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWATCH_")}
    env["GPUWATCH_DATABASE_URL"] = db_url
    if warm_windows:
        env["GPUWATCH_DASHBOARD__WARM_WINDOWS"] = json.dumps(list(warm_windows))
    args = ["serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(ROOT / ".venv/bin/gpuwatch"), *args], env=env, stdout=out, stderr=out
        )
    try:
        yield f"http://127.0.0.1:{port}", process
    finally:
        process.terminate()
        process.wait(timeout=60)


def _browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary("chromium")
    for flag in HEADLESS:
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(binary("chromedriver")), options=options)


def _open(driver: Any, url: str, page: str, timeout_s: float) -> float:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.wait import WebDriverWait

    began = time.perf_counter()
    driver.get(url)
    wait = WebDriverWait(driver, timeout_s, poll_frequency=0.02)
    wait.until(ec.presence_of_element_located((By.ID, f"{page}-body")))
    wait.until(lambda d: d.execute_script(GRAPHS_DRAWN))
    return time.perf_counter() - began


def _click_window(driver: Any, window: str, timeout_s: float) -> float:
    """Click ``window`` in the open page's filter bar; seconds from the pointer going down in the
    page until the page has drawn it (:data:`REDRAWN`). WebDriver's own work before it (about
    0.1 s, finding and scrolling to the label) is not the user's wait and is left out."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    driver.execute_script(MARK_FIGURES)
    label = driver.find_element(
        By.XPATH, f"//div[contains(@class,'gw-window')]//label[.//input[@value='{window}']]"
    )
    began = time.perf_counter()
    label.click()
    wait = WebDriverWait(driver, timeout_s, poll_frequency=0.02)
    in_page_ms = wait.until(lambda d: d.execute_script(REDRAWN, f"window={window}"))
    if isinstance(in_page_ms, int | float) and in_page_ms > 0:
        return float(in_page_ms) / 1000  # from the pointer going down, not WebDriver's request
    return time.perf_counter() - began


def _filter_changes(driver: Any, url: str, page: str, runs: int, timeout_s: float) -> list[float]:
    """Open ``url`` (untimed), then click :data:`CLICKED_WINDOWS` in turn, ``runs`` of them
    (the page opened again after each five)."""
    values: list[float] = []
    for i in range(runs):
        if i % len(CLICKED_WINDOWS) == 0:
            _open(driver, url, page, timeout_s)
        values.append(_click_window(driver, CLICKED_WINDOWS[i % len(CLICKED_WINDOWS)], timeout_s))
    return values


def _warm(driver: Any, base: str, workers: int, timeout_s: float) -> list[float]:
    """Open the Overview ``3 × workers`` times, so that every worker has built its page data
    (requests spread over the workers), and return those load times."""
    loads = []
    for n in range(3 * workers):
        loads.append(_open(driver, base + "/", "overview", timeout_s))
        print(f"  warm-up load {n + 1}/{3 * workers}: {loads[-1]:.1f} s", flush=True)
    return loads


def _line(name: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"{name:<36} {len(ms):>4} {statistics.median(ms):>9.0f} {min(ms):>9.0f} {max(ms):>9.0f}"


@dataclass
class BrowserFigures:
    """What :func:`run` measured: seconds per page, filter change seconds, worker RSS (MiB)."""

    first_load_s: dict[str, list[float]] = field(default_factory=dict)
    filter_change_s: dict[str, list[float]] = field(default_factory=dict)
    filter_link_s: dict[str, list[float]] = field(default_factory=dict)
    worker_rss_mib: list[float] = field(default_factory=list)
    worker_peak_mib: list[float] = field(default_factory=list)


def run(
    db_url: str, workers: int, runs: int, timeout_s: float, warm_windows: Sequence[str] = ()
) -> BrowserFigures:
    print(machine_line())
    figures = BrowserFigures()
    log = Path(os.environ.get("TMPDIR", "/tmp")) / "gpuwatch-bench-serve.log"
    with serving(db_url, workers, log, warm_windows) as (base, process):
        pid = process.pid

        def started() -> bool:
            if process.poll() is not None:
                sys.exit(f"gpuwatch serve exited: {log.read_text(errors='replace')}")
            if workers > 1:
                return len(_children(pid)) == workers
            return answers(f"{base}/healthz")  # one process (waitress): no children

        wait_until(started, "the workers", timeout_s)
        driver = _browser()
        try:
            warm = _warm(driver, base, workers, timeout_s)
            print(f"store: {db_url}; {workers} workers")
            print(f"warm-up loads (s): {', '.join(f'{w:.1f}' for w in warm)}\n")
            print(f"{'page / action':<36} {'n':>4} {'median':>9} {'min':>9} {'max':>9}  (ms)")
            for path, page in PAGES:
                values = [_open(driver, base + path, page, timeout_s) for _ in range(runs)]
                figures.first_load_s[page] = values
                print(_line(f"{page}: first load", values), flush=True)
            for path, page in PAGES[:5]:
                values = _filter_changes(driver, base + path, page, runs, timeout_s)
                figures.filter_change_s[page] = values
                print(_line(f"{page}: filter change", values), flush=True)
            for path, page in PAGES[:5]:
                values = [
                    _open(driver, f"{base}{path}?{FILTERS[i % len(FILTERS)]}", page, timeout_s)
                    for i in range(runs)
                ]
                figures.filter_link_s[page] = values
                print(_line(f"{page}: filter link", values), flush=True)
        finally:
            driver.quit()
        workers_now = _children(pid) or [pid]
        figures.worker_rss_mib = [_rss_mib(child) for child in workers_now]
        figures.worker_peak_mib = [_rss_mib(child, "VmHWM") for child in workers_now]
        rss = figures.worker_rss_mib
        peak = figures.worker_peak_mib
        print(f"\nworker RSS MiB: {', '.join(f'{r:.0f}' for r in rss)} (max {max(rss):.0f})")
        print(f"worker peak RSS MiB: {', '.join(f'{r:.0f}' for r in peak)} (max {max(peak):.0f})")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="database URL (sqlite:///… or postgresql…)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per wait")
    parser.add_argument(
        "--warm-windows",
        default="",
        help="dashboard.warm_windows for the server, comma-separated (e.g. 24h,3d,14d,30d)",
    )
    args = parser.parse_args()
    warm = [w for w in args.warm_windows.split(",") if w]
    run(args.db, args.workers, args.runs, args.timeout, warm)


if __name__ == "__main__":
    main()
