"""``gpuwatch db``: the store's schema."""

from __future__ import annotations

import click

from gpuwatch.cli.context import AppContext, pass_app
from gpuwatch.store.engine import current_revision, head_revision, upgrade


@click.group()
def db() -> None:
    """Manage the database schema (SQLite or PostgreSQL)."""


@db.command("upgrade")
@pass_app
def db_upgrade(app: AppContext) -> None:
    """Apply the migrations to the configured database, creating it if missing."""
    engine = app.engine(check_schema=False)
    before, after = upgrade(engine)
    where = app.settings.safe_database_url()
    if before == after:
        click.echo(f"{where}: schema already at {after}")
    else:
        click.echo(f"{where}: schema upgraded from {before or 'empty'} to {after}")


@db.command("current")
@pass_app
def db_current(app: AppContext) -> None:
    """Show the database's schema revision and the one this gpuwatch needs."""
    engine = app.engine(check_schema=False)
    current, head = current_revision(engine), head_revision()
    state = "up to date" if current == head else "outdated: run `gpuwatch db upgrade`"
    click.echo(f"database: {current or 'no schema'}; gpuwatch needs: {head} ({state})")
