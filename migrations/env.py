"""Alembic environment: runs on SQLite (batch mode) and PostgreSQL alike."""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from gpuwatch.store.models import Base
from gpuwatch.store.partitions import is_partition_name

config = context.config
target_metadata = Base.metadata


def _include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    """Leave the partitions of ``gpu_samples`` (PostgreSQL) out of the models' comparison."""
    return not (type_ == "table" and name is not None and is_partition_name(name))


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=_include_name,
    )


def _url() -> Any:
    """The database URL: the URL object gpuwatch passes (never text that Alembic interpolates),
    else ``sqlalchemy.url`` of an alembic.ini."""
    return config.attributes.get("url") or config.get_main_option("sqlalchemy.url")


def run_migrations_offline() -> None:
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as conn:
        _configure(conn)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
