"""The Dash application: one module per page under :mod:`gpuwatch.app.pages`.

Callbacks reach the store through the :class:`DataSource` kept in the Flask config, never a
module-level global, so one process can serve several databases (tests do).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import dash
from dash import Dash, dcc, html
from flask import current_app
from sqlalchemy import Engine

from gpuwatch.config import Settings

PAGE_MODULES = ("gpuwatch.app.pages.overview",)
_DATA_KEY = "GPUWATCH_DATA"


@dataclass(frozen=True)
class DataSource:
    engine: Engine
    settings: Settings


def data_source() -> DataSource:
    """The store and settings of the app serving the current request."""
    source = current_app.config[_DATA_KEY]
    assert isinstance(source, DataSource)
    return source


def _navigation() -> html.Nav:
    links = [
        dcc.Link(page["name"], href=page["relative_path"], className="gw-nav-link")
        for page in dash.page_registry.values()
    ]
    return html.Nav([html.Span("gpuwatch", className="gw-brand"), *links], className="gw-nav")


def create_app(engine: Engine, settings: Settings) -> Dash:
    """A Dash app serving the dashboard on ``engine``."""
    app = Dash(
        __name__,
        use_pages=True,
        pages_folder="",
        title="gpuwatch",
        suppress_callback_exceptions=True,
    )
    for module in PAGE_MODULES:
        importlib.import_module(module)
    app.server.config[_DATA_KEY] = DataSource(engine=engine, settings=settings)
    app.layout = html.Div([_navigation(), html.Main(dash.page_container, className="gw-main")])
    return app
