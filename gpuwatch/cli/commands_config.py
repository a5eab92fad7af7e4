"""``gpuwatch config``: check and show the effective configuration."""

from __future__ import annotations

import click

from gpuwatch.cli.context import AppContext, pass_app
from gpuwatch.config import resolve_config_path, settings_as_yaml


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
    click.echo(f"configuration OK ({path or 'defaults'}; cluster {settings.cluster})")


@config.command("show")
@pass_app
def config_show(app: AppContext) -> None:
    """Print the effective configuration as YAML, secrets masked."""
    click.echo(settings_as_yaml(app.settings), nl=False)
