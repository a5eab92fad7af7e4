"""Answers shared by the worker processes of one ``gpuwatch serve --workers N``.

Each worker keeps its own bounded memo per data version (:meth:`gpuwatch.app.snapshot.Snapshot.
memo`). The expensive answers (a window's hourly rows a week at a time, its daily sums, health
sums, recommendations, scheduling and health views, a week's report, the stored alerts) are also
written to a folder that the server makes for its life, so that one worker computes each of them
and the others read it: N workers cost the CPU of one per data version, and a window one worker
answered is answered by every worker at the cost of reading a file.

- **Keyed by the data version and the question.** A data version (the store's last-write mark,
  :class:`~gpuwatch.store.repository.DataMarker`) has a folder of its own; a folder no worker
  used for :data:`KEEP_UNUSED_S` seconds is removed.
- **One computes, the others wait.** Each answer has a lock file (``flock``): a worker asking
  for an answer another one is computing waits for it and reads it, within one process as
  across processes. A shared computation asks for other shared answers only of a kind below
  its own (recommendations read hourly rows, never the other way), so no two wait on each
  other.
- **Whole or not at all.** An answer is written to a temporary file and renamed into place.
- **Never fails a page.** A folder or file that cannot be used (removed, disk full, unreadable)
  is logged and the answer computed in the process, as without sharing.
- **Private.** The server makes the folder with :func:`tempfile.mkdtemp` (mode 0700, its user
  only) and removes it when it stops. Answers are pickles, so nothing else may write there.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import pickle
import shutil
import tempfile
import time
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
#: Seconds after which a data version's folder that no worker used is removed: workers move to a
#: new data version within ``dashboard.refresh_s`` and a warm-up of it; one still serving an
#: older version after that computes what it asks for itself.
KEEP_UNUSED_S = 120.0


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of ``path`` (made if missing); released on close, or by the
    kernel when the process dies."""
    with path.open("a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield


class SharedVersion:
    """The shared answers of one data version (a folder of :class:`SharedAnswers`)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The answer to ``key``: read if a worker wrote it, else computed (while the others
        asking wait) and written."""
        name = _digest(repr(key))
        answer = self.folder / f"{name}.pickle"
        with contextlib.ExitStack() as held:
            try:
                os.utime(self.folder)
                held.enter_context(_locked(self.folder / f"{name}.lock"))
            except FileNotFoundError:  # an older data version, removed as unused
                log.info("shared answers of %s removed: computing %r here", self.folder, key)
                return compute()
            except OSError as exc:
                log.warning("shared answers in %s unusable (%s): computing here", self.folder, exc)
                return compute()
            found = _read(answer)
            if found is not None:
                value: T = found[0]  # type: ignore[assignment]
                return value
            value = compute()
            _write(answer, value)
            return value


def _read(path: Path) -> tuple[object] | None:
    """``(answer,)`` from ``path``, None if there is none or it cannot be read."""
    try:
        with path.open("rb") as handle:
            # Only this server's user can write there (SharedAnswers checks the folder's mode).
            return (pickle.load(handle),)  # noqa: S301
    except FileNotFoundError:
        return None
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError) as exc:
        log.warning("shared answer %s unreadable (%s): computing it again", path, exc)
        return None


def _write(path: Path, value: object) -> None:
    """``value`` to ``path``, whole or not at all (a write that fails is logged)."""
    temporary = None
    try:
        fd, temporary = tempfile.mkstemp(dir=path.parent, suffix=".part")
        with os.fdopen(fd, "wb") as handle:
            pickle.dump(value, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, path)
    except (OSError, pickle.PicklingError, TypeError, AttributeError) as exc:
        log.warning("shared answer %s not written (%s)", path, exc)
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


class SharedAnswers:
    """The folder of one server's shared answers, a folder per data version in it."""

    def __init__(
        self,
        folder: Path,
        *,
        keep_unused_s: float = KEEP_UNUSED_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        mode = folder.stat()
        if mode.st_uid != os.getuid() or mode.st_mode & 0o077:
            raise ValueError(
                f"{folder}: shared answers need a folder of this user's only (mode 0700)"
            )
        self.folder = folder
        self.keep_unused_s = keep_unused_s
        self.clock = clock

    def version(self, marker: object) -> SharedVersion | None:
        """The answers of the data version ``marker`` names (its ``repr``), after removing the
        folders of versions unused for :attr:`keep_unused_s`; None when the folder is not
        usable."""
        path = self.folder / _digest(repr(marker))
        try:
            path.mkdir(exist_ok=True)
            os.utime(path)
        except OSError as exc:
            log.warning(
                "shared answers in %s unusable (%s): each worker computes its own", path, exc
            )
            return None
        self.prune(keep=path)
        return SharedVersion(path)

    def prune(self, keep: Path) -> None:
        """Remove the version folders (other than ``keep``) unused for :attr:`keep_unused_s`."""
        horizon = self.clock() - self.keep_unused_s
        with contextlib.suppress(OSError):
            for entry in self.folder.iterdir():
                with contextlib.suppress(OSError):
                    if entry != keep and entry.is_dir() and entry.stat().st_mtime < horizon:
                        shutil.rmtree(entry, ignore_errors=True)
