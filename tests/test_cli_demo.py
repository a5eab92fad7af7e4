"""``gpuwatch demo`` leaves a folder where the other commands read the demo's database."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpuwatch.cli.commands_demo import config_text, point_commands_at_demo
from gpuwatch.cli.context import AppContext
from tests.support.cli import run_gpuwatch


def _plain_env() -> dict[str, str]:
    """A user's environment: no gpuwatch variable set."""
    return {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root")}


def test_demo_then_recommend_and_report_in_the_same_folder(tmp_path: Path) -> None:
    env = _plain_env()
    built = run_gpuwatch(
        "demo", "--no-serve", "--days", "1", "--step", "1h", env=env, cwd=tmp_path,
        inherit_env=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    assert (
        f"gpuwatch demo: wrote {tmp_path}/gpuwatch.yaml (database_url: "
        "sqlite:///gpuwatch-demo.db): `gpuwatch recommend`, `gpuwatch report weekly` and the "
        "other commands run in this folder read the demo\n"
    ) in built.stderr
    assert (tmp_path / "gpuwatch.yaml").read_text() == (
        "# Written by `gpuwatch demo`: gpuwatch commands run in this folder read the demo's\n"
        "# database. Point database_url at your own store (or delete this file) when done.\n"
        "# Every setting: docs/configuration.md\n"
        "database_url: sqlite:///gpuwatch-demo.db\n"
    )
    recs = run_gpuwatch("recommend", "--format", "json", env=env, cwd=tmp_path, inherit_env=False)
    assert recs.returncode == 0, recs.stderr
    assert isinstance(json.loads(recs.stdout), list)
    assert recs.stderr.splitlines()[1].startswith("recommend: ")
    assert " recommendation" in recs.stderr.splitlines()[1]
    again = run_gpuwatch("demo", "--no-serve", env=env, cwd=tmp_path, inherit_env=False)
    assert again.returncode == 0, again.stderr
    assert "gpuwatch.yaml" not in again.stderr  # kept as it is, and it already names the demo
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpuwatch-demo.db", "gpuwatch.yaml"]


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working folder, no gpuwatch variable set."""
    for name in ("GPUWATCH_CONFIG", "GPUWATCH_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _said(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.splitlines()


def test_an_existing_config_is_kept_and_the_way_to_the_demo_is_said(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "gpuwatch.yaml").write_text("database_url: sqlite:///team.db\n")
    point_commands_at_demo(AppContext(config_file=None), folder / "gpuwatch-demo.db", folder)
    assert (folder / "gpuwatch.yaml").read_text() == "database_url: sqlite:///team.db\n"
    assert _said(capsys) == [
        "gpuwatch demo: other commands read sqlite:///team.db (from gpuwatch.yaml), not the "
        f"demo; run them with GPUWATCH_DATABASE_URL=sqlite:///{folder}/gpuwatch-demo.db to "
        "read it"
    ]


def test_the_environment_wins_over_the_written_config_and_is_named(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUWATCH_DATABASE_URL", "postgresql+psycopg://gw:S3cret@db/gw")
    point_commands_at_demo(AppContext(config_file=None), folder / "gpuwatch-demo.db", folder)
    assert (folder / "gpuwatch.yaml").read_text() == config_text("sqlite:///gpuwatch-demo.db")
    said = _said(capsys)
    assert said[0].startswith(f"gpuwatch demo: wrote {folder}/gpuwatch.yaml")
    assert said[1:] == [
        "gpuwatch demo: other commands read postgresql+psycopg://gw:***@db/gw (from "
        "$GPUWATCH_DATABASE_URL), not the demo; run them with "
        f"GPUWATCH_DATABASE_URL=sqlite:///{folder}/gpuwatch-demo.db to read it"
    ]


def test_a_config_given_on_the_command_line_writes_nothing(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given = folder / "elsewhere.yaml"
    given.write_text(f"database_url: sqlite:///{folder}/gpuwatch-demo.db\n")
    point_commands_at_demo(AppContext(config_file=str(given)), folder / "gpuwatch-demo.db", folder)
    assert sorted(p.name for p in folder.iterdir()) == ["elsewhere.yaml"]
    assert _said(capsys) == []  # it already names the demo's file


def test_a_demo_file_outside_the_folder_is_named_in_full(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    away = folder / "data" / "demo.db"
    point_commands_at_demo(AppContext(config_file=None), away, folder)
    assert (folder / "gpuwatch.yaml").read_text() == config_text(f"sqlite:///{away}")
    assert len(_said(capsys)) == 1  # only "wrote": the written file names the demo
