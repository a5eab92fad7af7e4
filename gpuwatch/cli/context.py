"""What every command shares: the settings (built once, on first use) and the store engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import click
from sqlalchemy import Engine

from gpuwatch.cli.masking import Masker, configure_logging
from gpuwatch.config import Settings, load_settings
from gpuwatch.store.engine import make_engine, require_current_schema, require_existing_database


class RuntimeFailure(Exception):
    """A failure at run time (exit status 1), phrased for one line on stderr."""


@dataclass
class AppContext:
    config_file: str | None
    verbose: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)
    masker: Masker = field(default_factory=Masker)
    _settings: Settings | None = None

    def __post_init__(self) -> None:
        configure_logging(self.masker, self.verbose)

    def override(self, name: str, value: Any) -> None:
        """Set one setting above file and environment (as a command-line flag does)."""
        self.overrides[name] = value
        self._settings = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.config_file, overrides=self.overrides)
            self.masker.learn(self._settings.secret_values())
        return self._settings

    def engine(self, *, check_schema: bool = True, create: bool = False) -> Engine:
        """The configured database; refuses an outdated schema unless told not to check.

        Only ``create`` (``gpuwatch db upgrade``) may bring a missing SQLite file into being:
        every other command names the URL it looked at and stops.
        """
        url = self.settings.database_url_value
        if not create:
            require_existing_database(url)
        engine = make_engine(url)
        if check_schema:
            require_current_schema(engine)
        return engine


pass_app = click.make_pass_decorator(AppContext)
