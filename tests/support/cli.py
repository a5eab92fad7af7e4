"""The ``gpuwatch`` command as a real process, as users and CI run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_gpuwatch(
    *args: str,
    env: dict[str, str],
    cwd: Path | None = None,
    inherit_env: bool = True,
    timeout_s: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``python -m gpuwatch ARGS`` to completion, output captured as text. ``env`` goes on top
    of this process's environment, or alone with ``inherit_env`` false."""
    return subprocess.run(
        [sys.executable, "-m", "gpuwatch", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env} if inherit_env else env,
        cwd=cwd,
        timeout=timeout_s,
        check=False,
    )
