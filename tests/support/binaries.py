"""Finding the real servers the tests use; in CI a missing one fails instead of skipping."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def require_binary(name: str, package: str, extra_dirs: list[Path] | None = None) -> str:
    """The path of ``name``; skips (fails when $CI is set) naming the Debian package to install."""
    found = shutil.which(name)
    for folder in extra_dirs or []:
        if found:
            break
        candidate = folder / name
        found = str(candidate) if candidate.is_file() else None
    if found:
        return found
    message = f"{name} not found: install Debian's {package} package (make test does)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
    raise AssertionError("unreachable")
