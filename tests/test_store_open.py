"""A store gpuwatch cannot use is one line on stderr in every command that opens it, never a
traceback: a file that is not SQLite, a truncated database, a schema newer than this gpuwatch."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from gpuwatch.cli.main import cli
from gpuwatch.store.engine import make_engine, upgrade

COMMANDS = [
    ["db", "current"],
    ["db", "upgrade"],
    ["report", "weekly"],
    ["recommend"],
    ["health"],
    ["collect", "--no-kubernetes"],
    ["serve", "--port", "1"],
]


def _run(url: str, command: list[str]) -> tuple[int, str]:
    env = {"GPUWATCH_DATABASE_URL": url, "GPUWATCH_PROMETHEUS_URL": "http://127.0.0.1:1"}
    result = CliRunner().invoke(cli, command, env=env)
    return result.exit_code, result.output


def _one_line(output: str) -> str:
    assert "Traceback" not in output
    (line,) = output.strip().splitlines()
    return line


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_file_that_is_not_sqlite(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "store.db"
    path.write_bytes(b"this is a spreadsheet, not a database\n" * 200)
    status, output = _run(f"sqlite:///{path}", command)
    assert status == 1
    line = _one_line(output)
    assert line.startswith(f"gpuwatch: the SQLite file {path} is not a gpuwatch database")
    assert "file is not a database" in line and "restore it from a backup" in line
    assert path.read_bytes() == b"this is a spreadsheet, not a database\n" * 200


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_truncated_database(tmp_path: Path, command: list[str]) -> None:
    whole = tmp_path / "whole.db"
    engine = make_engine(f"sqlite:///{whole}")
    upgrade(engine)
    engine.dispose()  # the last connection closed: everything is in the file itself
    assert not Path(f"{whole}-wal").exists()
    path = tmp_path / "store.db"
    path.write_bytes(whole.read_bytes()[: 2 * 4096])
    status, output = _run(f"sqlite:///{path}", command)
    assert status == 1
    line = _one_line(output)
    assert line.startswith(f"gpuwatch: the SQLite file {path} is not a gpuwatch database")
    assert "database disk image is malformed" in line


def _stamp_newer(url: str) -> None:
    engine = make_engine(url)
    upgrade(engine)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = 'f00dfeed9999'"))
    engine.dispose()


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_schema_newer_than_this_gpuwatch(sqlite_url: str, command: list[str]) -> None:
    _stamp_newer(sqlite_url)
    status, output = _run(sqlite_url, command)
    assert status == 1
    line = _one_line(output)
    assert line.startswith("gpuwatch: the database schema (f00dfeed9999) is newer than")
    assert line.endswith(": upgrade gpuwatch")


@pytest.mark.postgres
@pytest.mark.parametrize("command", [["db", "upgrade"], ["report", "weekly"]], ids=" ".join)
def test_a_newer_schema_on_postgresql(postgres_url: str, command: list[str]) -> None:
    _stamp_newer(postgres_url)
    status, output = _run(postgres_url, command)
    assert status == 1
    assert _one_line(output).endswith("is newer than this gpuwatch (0013): upgrade gpuwatch")
    engine = make_engine(postgres_url)
    with engine.connect() as conn:
        stamped = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar_one()
    engine.dispose()
    assert stamped == "f00dfeed9999"


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != ["db", "upgrade"]], ids=" ".join)
def test_a_missing_file_is_named_and_never_created(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "typo.db"
    status, output = _run(f"sqlite:///{path}", command)
    assert status == 1
    assert _one_line(output) == (
        f"gpuwatch: no database at sqlite:///{path} (no such file): run `gpuwatch db upgrade` "
        "to create it, or `gpuwatch demo` for a simulated fleet"
    )
    assert list(tmp_path.iterdir()) == []


def test_db_upgrade_creates_the_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    status, output = _run(f"sqlite:///{path}", ["db", "upgrade"])
    assert status == 0, output
    assert path.is_file()
