"""``gpuwatch config``: check and show the effective configuration."""

from __future__ import annotations

import click

from gpuwatch.cli.context import AppContext, pass_app
from gpuwatch.config import ConfigError, resolve_config_path, settings_as_yaml
from gpuwatch.store.engine import database_url_problem


@click.group()
def config() -> None:
    """Check or show the configuration (file, then GPUWATCH_* environment variables)."""


@config.command("check")
@pass_app
def config_check(app: AppContext) -> None:
    """Validate the configuration; exits 2 naming the bad key and its file."""
    import os

    settings = app.settings
    path = resolve_config_path(app.config_file, dict(os.environ))
    problem = database_url_problem(settings.database_url_value)
    if problem is not None:
        source = (
            "environment variable GPUWATCH_DATABASE_URL"
            if os.environ.get("GPUWATCH_DATABASE_URL")
            else f"config file {path or '(defaults)'}"
        )
        raise ConfigError(f"database_url in {source}: {problem}")
    click.echo(f"configuration OK ({path or 'defaults'}; cluster {settings.cluster})")


@config.command("show")
@pass_app
def config_show(app: AppContext) -> None:
    """Print the effective configuration as YAML, secrets masked."""
    click.echo(settings_as_yaml(app.settings), nl=False)
