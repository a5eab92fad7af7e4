"""``gpuwatch db``: the store's schema, hourly roll-ups, retention and collector leases."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from gpuwatch.cli.context import AppContext, pass_app
from gpuwatch.domain.durations import rfc3339
from gpuwatch.store import lease, rollup
from gpuwatch.store.engine import current_revision, head_revision, refuse_newer_schema, upgrade


@click.group()
def db() -> None:
    """Manage the database schema (SQLite or PostgreSQL)."""


@db.command("upgrade")
@pass_app
def db_upgrade(app: AppContext) -> None:
    """Apply the migrations to the configured database, creating it if missing."""
    engine = app.engine(check_schema=False, create=True)
    with lease.upgrade_lock(engine):
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
    refuse_newer_schema(current)
    state = "up to date" if current == head else "outdated: run `gpuwatch db upgrade`"
    click.echo(f"database: {current or 'no schema'}; gpuwatch needs: {head} ({state})")


def _when(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


@db.command("rollup")
@pass_app
def db_rollup(app: AppContext) -> None:
    """Rebuild the hourly roll-ups from the raw samples at the configured idle threshold
    (thresholds.idle_util_pct); hours past the raw retention keep theirs."""
    engine = app.engine()
    threshold = app.settings.thresholds.idle_util_pct
    now_ts = int(datetime.now(UTC).timestamp())
    with engine.begin() as conn:
        rows = rollup.rebuild(conn, threshold, now_ts)
    click.echo(f"rebuilt {rows:,} hourly roll-up rows at an idle threshold of {threshold:g}%")


def compact_store(app: AppContext, now_ts: int) -> rollup.Compaction:
    """Apply the storage retention settings now (``db compact``, and hourly in ``--follow``)."""
    storage = app.settings.storage
    with app.engine().begin() as conn:
        return rollup.compact(
            conn,
            now_ts,
            int(storage.raw_retention.total_seconds()),
            int(storage.hourly_retention.total_seconds()),
        )


def describe_compaction(done: rollup.Compaction) -> str:
    said = (
        f"deleted {done.raw_deleted:,} raw samples before {_when(done.raw_kept_from_ts)} and "
        f"{done.hourly_deleted:,} hourly roll-up rows before {_when(done.hourly_kept_from_ts)}"
    )
    days = done.partitions_dropped
    if not days:
        return said
    which = days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"
    plural = "partition" if len(days) == 1 else "partitions"
    return f"dropped {len(days)} day {plural} of raw samples ({which}); {said}"


@db.command("compact")
@pass_app
def db_compact(app: AppContext) -> None:
    """Delete raw samples older than storage.raw_retention (PostgreSQL: dropping whole days)
    and hourly roll-ups older than storage.hourly_retention. Every hour deleted from raw
    samples is kept in the roll-ups."""
    done = compact_store(app, int(datetime.now(UTC).timestamp()))
    click.echo(describe_compaction(done))


def describe_lease(holding: lease.Holding, now_ts: int) -> str:
    """One line of ``db leases``: what the lease guards, who holds it, since and until when."""
    state = "held" if holding.expires_ts > now_ts else "expired"
    return (
        f"{holding.name}: {holding.holder}, {state} until {rfc3339(holding.expires_ts)} "
        f"(since {rfc3339(holding.acquired_ts)}, renewed {rfc3339(holding.renewed_ts)})"
    )


@db.command("leases")
@pass_app
def db_leases(app: AppContext) -> None:
    """Show who collects: the collector leases, their holders and until when they hold them."""
    holdings = lease.read_all(app.engine())
    if not holdings:
        click.echo("no collector lease yet: no `collect` has taken one on this store")
    now_ts = int(datetime.now(UTC).timestamp())
    for holding in holdings:
        click.echo(describe_lease(holding, now_ts))
