"""Database engines and the schema version: SQLite (WAL, foreign keys on) or PostgreSQL."""

from __future__ import annotations

import importlib.util
import sqlite3
from importlib.resources import files
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.exc import ArgumentError, OperationalError

UPGRADE_HINT = "run `gpuwatch db upgrade`"


class StoreError(Exception):
    """A problem with the database, phrased for one line on stderr."""


class SchemaOutdatedError(StoreError):
    """The database schema is older (or newer) than this gpuwatch."""


class NoDatabaseError(StoreError):
    """The configured SQLite file does not exist (only ``gpuwatch db upgrade`` creates one)."""


def shown_url(engine: Engine) -> str:
    """The engine's URL for a message: its password masked."""
    return engine.url.render_as_string(hide_password=True)


def sqlite_path(url: str) -> Path | None:
    """The file a SQLite URL names; None for another database or an in-memory one."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(str(parsed.database)).expanduser()


def require_existing_database(url: str) -> None:
    """Refuse a SQLite URL whose file does not exist, rather than create an empty one.

    Connecting to SQLite creates a missing file: a command that only reads (or needs the
    schema) would leave an empty database behind and then refuse it.
    """
    path = sqlite_path(url)
    if path is None or path.exists():
        return
    full = path.resolve()
    missing = "no such file" if full == path else f"no file {full}"
    raise NoDatabaseError(
        f"no database at {make_url(url).render_as_string(hide_password=True)} ({missing}): "
        f"{UPGRADE_HINT} to create it, or `gpuwatch demo` for a simulated fleet"
    )


def _sqlite_pragmas(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    # 32 MiB of page cache (the default is 2 MiB): a page's hourly rows land at every GPU unit's
    # run in the (gpu_id, hour_ts) index of the roll-up, and a GPU's history probes the samples'
    # key once per instant; both then find their pages in memory.
    cursor.execute("PRAGMA cache_size=-32768")
    cursor.close()


class CorruptStoreError(StoreError):
    """The SQLite file is not a database, or a damaged one."""


#: What SQLite says of a file that is not a database, or a damaged one.
_CORRUPT = ("file is not a database", "database disk image is malformed")


def _corrupt_file(path: str) -> Any:
    """A ``handle_error`` listener: SQLite's corruption errors become one line naming the file."""

    def check(context: ExceptionContext) -> None:
        error = context.original_exception
        if isinstance(error, sqlite3.DatabaseError) and any(t in str(error) for t in _CORRUPT):
            raise CorruptStoreError(
                f"the SQLite file {path} is not a gpuwatch database or is damaged ({error}): "
                "restore it from a backup, or point database_url at another file"
            ) from None

    return check


class DatabaseUrlError(StoreError):
    """``database_url`` cannot work: a configuration error (exit 2)."""


_URL_FORMS = "sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"


def _sqlite_problem(database: str) -> str | None:
    if not database or database == ":memory:":
        return None
    folder = Path(database).expanduser().parent
    if not folder.exists():
        return f"the folder {folder} for the SQLite file does not exist (gpuwatch creates none)"
    if not folder.is_dir():
        return f"{folder} is not a folder, so it cannot hold the SQLite file"
    return None


def database_url_problem(url: str) -> str | None:
    """Why ``url`` cannot work, in words that never show its password; None when it can."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return f"not a database URL: use {_URL_FORMS}"
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_problem(parsed.database or "")
    if backend == "postgresql":
        if parsed.get_driver_name() != "psycopg":
            return f"driver {parsed.drivername!r} is not the one gpuwatch uses: use {_URL_FORMS}"
        if importlib.util.find_spec("psycopg") is None:
            return "the psycopg driver is not installed: pip install 'psycopg[binary]'"
        return None
    return f"unsupported database {parsed.drivername!r}: gpuwatch stores in {_URL_FORMS}"


def make_engine(url: str) -> Engine:
    """An engine for ``url`` (WAL and foreign keys on SQLite); raises
    :class:`DatabaseUrlError` for a URL that cannot work (:func:`database_url_problem`)."""
    problem = database_url_problem(url)
    if problem is not None:
        raise DatabaseUrlError(f"database_url: {problem}")
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(parsed, connect_args={"timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        path = str(Path(parsed.database).expanduser()) if parsed.database else ":memory:"
        event.listen(engine, "handle_error", _corrupt_file(path))
        return engine
    return create_engine(parsed, pool_pre_ping=True)


def alembic_config(engine: Engine | None = None) -> Config:
    """The Alembic configuration for the migrations installed with gpuwatch."""
    cfg = Config()
    cfg.set_main_option("script_location", str(files("gpuwatch.migrations")))
    if engine is not None:
        # The URL object itself, never its text in the main options: Alembic's ConfigParser
        # would read ``%`` (as in a URL-encoded password) as interpolation, and print it whole.
        cfg.attributes["url"] = engine.url
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:  # pragma: no cover - the package always ships a history
        raise StoreError("gpuwatch ships no migrations")
    return head


def current_revision(engine: Engine) -> str | None:
    """The schema revision stamped in the database, or None for a database never upgraded."""
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    except OperationalError as exc:
        reason = " ".join(str(exc.orig).split())
        raise StoreError(f"cannot open the database {shown_url(engine)}: {reason}") from None


def upgrade(engine: Engine) -> tuple[str | None, str]:
    """Apply every pending migration; returns (revision before, revision after). Refuses a
    schema newer than this gpuwatch (:func:`refuse_newer_schema`)."""
    before = current_revision(engine)
    refuse_newer_schema(before)
    cfg = alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
    return before, head_revision()


def refuse_newer_schema(current: str | None) -> None:
    """Raise :class:`SchemaOutdatedError` when ``current`` is a revision this gpuwatch does not
    ship: a newer gpuwatch wrote the database."""
    if current is None:
        return
    known = {rev.revision for rev in ScriptDirectory.from_config(alembic_config()).walk_revisions()}
    if current not in known:
        raise SchemaOutdatedError(
            f"the database schema ({current}) is newer than this gpuwatch ({head_revision()}): "
            "upgrade gpuwatch"
        )


def require_current_schema(engine: Engine) -> None:
    """Refuse to work on a database whose schema is not this gpuwatch's."""
    current, head = current_revision(engine), head_revision()
    if current is None:
        raise SchemaOutdatedError(
            f"the database {shown_url(engine)} has no gpuwatch schema yet: {UPGRADE_HINT}"
        )
    if current != head:
        refuse_newer_schema(current)
        raise SchemaOutdatedError(
            f"the database {shown_url(engine)} has an outdated schema ({current}, this gpuwatch "
            f"needs {head}): {UPGRADE_HINT}"
        )
