"""The Dash application: one module per page under :mod:`gpuwatch.app.pages`.

Callbacks reach the store through the :class:`DataSource` kept in the Flask config, never a
module-level global, so one process can serve several databases (tests do). The source holds
the :class:`~gpuwatch.app.data.DashboardData` cache of that store.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dash
from dash import Dash, dcc, html
from flask import Flask, current_app, g
from sqlalchemy import Engine

from gpuwatch.app.data import DashboardData, Snapshot
from gpuwatch.app.security import HEALTH_ENDPOINT, harden
from gpuwatch.app.shared import SharedAnswers
from gpuwatch.app.snapshot import release_memory
from gpuwatch.config import Settings

PAGE_MODULES = (
    "gpuwatch.app.pages.overview",
    "gpuwatch.app.pages.teams",
    "gpuwatch.app.pages.cost",
    "gpuwatch.app.pages.workloads",
    "gpuwatch.app.pages.workload",
    "gpuwatch.app.pages.gpus",
    "gpuwatch.app.pages.node",
    "gpuwatch.app.pages.gpu",
    "gpuwatch.app.pages.pod",
    "gpuwatch.app.pages.savings",
    "gpuwatch.app.pages.reports",
    "gpuwatch.app.pages.alerts",
    "gpuwatch.app.pages.gpu_health",
    "gpuwatch.app.pages.queues",
    "gpuwatch.app.pages.health",
)
_DATA_KEY = "GPUWATCH_DATA"


@dataclass(frozen=True)
class DataSource:
    engine: Engine
    settings: Settings
    data: DashboardData


def data_source() -> DataSource:
    """The store, settings and data cache of the app serving the current request."""
    source = current_app.config[_DATA_KEY]
    assert isinstance(source, DataSource)
    return source


def _warmers() -> list[Callable[[DashboardData, Snapshot], Any]]:
    found = []
    for name in PAGE_MODULES:
        module = importlib.import_module(name)
        warm = getattr(module, "warm", None)
        if callable(warm):
            found.append(warm)
    return found


def _bound(
    warmer: Callable[[DashboardData, Snapshot], Any], data: DashboardData
) -> Callable[[Snapshot], Any]:
    def run(snap: Snapshot) -> Any:
        return warmer(data, snap)

    return run


#: A page or figure still computing after this long shows a spinner over the dimmed page.
LOADING_DELAY_MS = 500


def _loading(page: Any) -> dcc.Loading:
    """The page, under a spinner while a callback that updates it takes longer than
    :data:`LOADING_DELAY_MS` (quicker answers never flash one)."""
    return dcc.Loading(
        page,
        id="gw-loading",
        type="circle",
        delay_show=LOADING_DELAY_MS,
        color="#2563eb",
        overlay_style={"visibility": "visible", "opacity": 0.6},
        parent_className="gw-loading",
    )


def create_app(
    engine: Engine,
    settings: Settings,
    *,
    data: DashboardData | None = None,
    warm: bool = True,
    shared_dir: Path | None = None,
) -> Dash:
    """A Dash app serving the dashboard on ``engine``.

    Every response carries the security headers of :mod:`gpuwatch.app.security`, and
    ``settings.dashboard.auth`` decides who may ask. With ``warm`` the first snapshot of the
    store and the default views are computed in a background thread right away, so the first
    visitor does not wait for them. ``shared_dir`` is the folder in which the workers of one
    server share their expensive answers (:mod:`gpuwatch.app.shared`).
    """
    app = Dash(
        __name__,
        use_pages=True,
        pages_folder="",
        title="gpuwatch",
        suppress_callback_exceptions=True,
        update_title="",
        health_endpoint=HEALTH_ENDPOINT,
    )
    # Screen readers pick the language from the document (the default page names none).
    app.index_string = app.index_string.replace("<html>", '<html lang="en">', 1)
    harden(app, settings.dashboard)
    trim_after_long_requests(app.server)
    shared = None if shared_dir is None else SharedAnswers(shared_dir)
    data = data or DashboardData(
        engine, settings, refresh_s=settings.dashboard.refresh_s, shared=shared
    )
    source = DataSource(engine, settings, data)
    for warmer in _warmers():
        source.data.warmers.append(_bound(warmer, source.data))
    app.server.config[_DATA_KEY] = source
    app.layout = html.Div(
        [dcc.Location(id="gw-url", refresh="callback-nav"), _loading(dash.page_container)],
        className="gw-app",
    )
    _set_up(app)
    if warm:
        source.data.start()
    return app


#: A request that took at least this long hands the heap it freed back to the system after it.
TRIM_AFTER_S = 0.2


def trim_after_long_requests(server: Flask, clock: Callable[[], float] = time.monotonic) -> None:
    """After a request of :data:`TRIM_AFTER_S` or more, :func:`release_memory`: a window's
    figures build frames of hundreds of MiB and free them, which glibc would keep for the
    process (a worker rests at about 250 MiB instead of 670 after a 30-day window at 2,000 GPUs;
    the call takes about 6 ms)."""

    @server.before_request
    def _started() -> None:
        g.gw_started = clock()

    @server.teardown_request
    def _trim(_: BaseException | None) -> None:
        started = g.get("gw_started")
        if started is not None and clock() - started >= TRIM_AFTER_S:
            release_memory()


def _set_up(app: Dash) -> None:
    """Register the scripts and style sheets the page loads as servable now, before any visitor.

    Dash registers them in its first-request setup. Left to the first request, that races the
    browser's: a page's scripts are asked for at once, a second thread of the worker skips the
    setup the first has begun, and a script not yet registered (React among them) is answered
    404, which leaves the page at "Loading..." for good (seen on a worker's first page after
    start). Only the registration is done here: the setup itself, which hands the pages'
    callbacks to the app, still runs on the first request.
    """
    # Dash has no public call for this.
    app._generate_scripts_html()
    app._generate_css_dist_html()  # type: ignore[no-untyped-call]
