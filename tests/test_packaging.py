"""The package as users install it: every subpackage shipped, migrations and data included."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _declared_packages() -> set[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(data["tool"]["setuptools"]["packages"])


def test_every_package_folder_is_declared() -> None:
    found = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for path in (ROOT / "gpuwatch").rglob("__init__.py")
    }
    found |= {"gpuwatch.migrations", "gpuwatch.migrations.versions"}
    assert found == _declared_packages()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return next(out.glob("gpuwatch-*.whl"))


def test_wheel_ships_migrations_and_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "gpuwatch/migrations/env.py" in names
    assert "gpuwatch/migrations/script.py.mako" in names
    assert any(n.startswith("gpuwatch/migrations/versions/0001_") for n in names)
    assert "gpuwatch/py.typed" in names
    assert "gpuwatch/data/gpu_prices.csv" in names
    assets = Path(__file__).resolve().parents[1] / "gpuwatch" / "app" / "assets"
    shipped = {f"gpuwatch/app/assets/{p.name}" for p in assets.iterdir() if p.is_file()}
    assert "gpuwatch/app/assets/gpuwatch-grid.js" in shipped
    assert shipped <= names  # every style sheet and script the dashboard serves


def test_db_upgrade_works_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    env = dict(
        os.environ, PYTHONPATH=str(target), GPUWATCH_DATABASE_URL=f"sqlite:///{tmp_path / 'w.db'}"
    )
    env.pop("GPUWATCH_CONFIG", None)
    probe = subprocess.run(
        [sys.executable, "-c", "import gpuwatch.migrations as m; print(m.__file__)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.startswith(str(target))
    result = subprocess.run(
        [sys.executable, "-m", "gpuwatch", "db", "upgrade"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "schema upgraded from empty to" in result.stdout
