"""What every command shares: the settings (built once, on first use) and the store engine."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import click
from sqlalchemy import Engine

from gpuwatch.config import Settings, load_settings
from gpuwatch.store.engine import make_engine, require_current_schema


class RuntimeFailure(Exception):
    """A failure at run time (exit status 1), phrased for one line on stderr."""


@dataclass
class AppContext:
    config_file: str | None
    verbose: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)
    _settings: Settings | None = None

    def __post_init__(self) -> None:
        logging.basicConfig(
            level=logging.DEBUG if self.verbose else logging.WARNING,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.config_file, overrides=self.overrides)
        return self._settings

    def engine(self, *, check_schema: bool = True) -> Engine:
        """The configured database; refuses an outdated schema unless told not to check."""
        engine = make_engine(self.settings.database_url_value)
        if check_schema:
            require_current_schema(engine)
        return engine


pass_app = click.make_pass_decorator(AppContext)
