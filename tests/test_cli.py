"""The command line as users script it: help, exit statuses, one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuwatch.cli.main import cli


def run(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuwatch", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def _commands(group: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    import click

    found: list[tuple[str, ...]] = [prefix]
    if isinstance(group, click.Group):
        for name, command in group.commands.items():
            found.extend(_commands(command, (*prefix, name)))
    return found


@pytest.mark.parametrize("path", _commands(cli), ids=lambda p: " ".join(p) or "gpuwatch")
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage: " in result.output
    assert len(result.output.splitlines()) > 3


def test_python_dash_m_runs_the_cli() -> None:
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("gpuwatch, version ")


def test_bad_config_is_one_line_naming_key_and_file_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("thresholds:\n  idle_util_pct: -1\n")
    result = run("--config", str(config), "config", "check")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "thresholds.idle_util_pct" in lines[0]
    assert str(config) in lines[0]


def test_unknown_command_is_a_usage_error() -> None:
    result = run("frobnicate")
    assert result.returncode == 2
    assert "No such command" in result.stderr


def test_db_upgrade_then_current(tmp_path: Path) -> None:
    env = {"GPUWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'gw.db'}", "PATH": "/usr/bin:/bin"}
    first = run("db", "upgrade", env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "upgraded from empty to 0013" in first.stdout
    second = run("db", "upgrade", env=env, cwd=tmp_path)
    assert "already at 0013" in second.stdout
    current = run("db", "current", env=env, cwd=tmp_path)
    assert "database: 0013; gpuwatch needs: 0013 (up to date)" in current.stdout


def test_commands_refuse_a_database_without_schema(tmp_path: Path) -> None:
    (tmp_path / "gw.db").touch()  # an empty file is an empty SQLite database
    env = {"GPUWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'gw.db'}", "PATH": "/usr/bin:/bin"}
    result = run("serve", "--port", "1", env=env, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"gpuwatch: the database sqlite:///{tmp_path}/gw.db has no gpuwatch schema yet: "
        "run `gpuwatch db upgrade`"
    )


def test_a_missing_file_is_named_and_not_created(tmp_path: Path) -> None:
    env = {"GPUWATCH_DATABASE_URL": "sqlite:///gw.db", "PATH": "/usr/bin:/bin"}
    result = run("recommend", env=env, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"gpuwatch: no database at sqlite:///gw.db (no file {tmp_path}/gw.db): "
        "run `gpuwatch db upgrade` to create it, or `gpuwatch demo` for a simulated fleet"
    )
    assert list(tmp_path.iterdir()) == []


def test_config_show_masks_the_password(tmp_path: Path) -> None:
    env = {
        "GPUWATCH_DATABASE_URL": "postgresql+psycopg://gw:hunter2@db/gw",
        "PATH": "/usr/bin:/bin",
    }
    result = run("config", "show", env=env, cwd=tmp_path)
    assert result.returncode == 0
    assert "gw:***@db/gw" in result.stdout
    assert "hunter2" not in result.stdout


def test_verbose_adds_a_traceback(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("cluster: ''\n")
    result = run("--verbose", "--config", str(config), "config", "check")
    assert result.returncode == 2
    assert "Traceback" in result.stderr
    assert (
        result.stderr.strip().splitlines()[-1].startswith("gpuwatch: configuration error: cluster")
    )


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql://gw:S3cret@db/gpuwatch", "unsupported database 'mysql'"),
        ("sqlite:///{file}/x.db", "is not a folder, so it cannot hold the SQLite file"),
        (
            "sqlite:///{tmp}/typo/deep/x.db",
            "for the SQLite file does not exist (gpuwatch creates none)",
        ),
        (
            "postgresql+asyncpg://gw@h/db",
            "driver 'postgresql+asyncpg' is not the one gpuwatch uses",
        ),
    ],
)
def test_a_bad_database_url_is_one_line_exit_2_everywhere(
    tmp_path: Path, url: str, says: str
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    url = url.format(file=afile, tmp=tmp_path)
    env = {"PATH": os.environ.get("PATH", ""), "GPUWATCH_DATABASE_URL": url}
    check = run("config", "check", env=env, cwd=tmp_path)
    assert check.returncode == 2
    assert check.stderr.startswith(
        "gpuwatch: configuration error: database_url in environment variable "
        "GPUWATCH_DATABASE_URL: "
    )
    upgrade = run("db", "upgrade", env=env, cwd=tmp_path)
    assert upgrade.returncode == 2
    for result in (check, upgrade):
        assert says in result.stderr
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert "S3cret" not in result.stderr
    assert not (tmp_path / "typo").exists()  # no folder created
