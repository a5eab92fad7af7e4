"""Where text leaves the process, secrets are masked (:mod:`gpuwatch.domain.redact`).

The command line masks at three doors: its one-line errors and ``--verbose`` tracebacks
(:meth:`Masker.mask`), every log record (:class:`MaskingFormatter`), and, for the console entry
point, everything written to standard error (:class:`MaskedStream`): a library's warning or an
unexpected traceback passes the same mask. Standard output carries data (CSV, JSON, rules),
which the commands build from masked values (``config show``) and never from secrets.
"""

from __future__ import annotations

import logging
import threading
import traceback
from typing import Any, TextIO

from gpuwatch.domain.redact import mask_text


class Masker:
    """The secrets known so far (the settings' once loaded) and the mask that hides them."""

    def __init__(self) -> None:
        self._known: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def learn(self, secrets: list[str]) -> None:
        with self._lock:
            self._known = self._known | frozenset(secrets)

    def mask(self, text: str) -> str:
        return mask_text(text, self._known)

    def traceback(self) -> str:
        """The current exception's traceback, masked."""
        return self.mask(traceback.format_exc())


class MaskingFormatter(logging.Formatter):
    """A log formatter whose every line (message, arguments, traceback) is masked."""

    def __init__(self, masker: Masker, fmt: str) -> None:
        super().__init__(fmt)
        self._masker = masker

    def format(self, record: logging.LogRecord) -> str:
        return self._masker.mask(super().format(record))


class MaskedStream:
    """A text stream that masks what is written to it before passing it on."""

    def __init__(self, stream: TextIO, masker: Masker) -> None:
        self._stream = stream
        self._masker = masker

    def write(self, text: Any) -> int:
        if not isinstance(text, str):
            return int(self._stream.write(text))
        self._stream.write(self._masker.mask(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def configure_logging(masker: Masker, verbose: bool) -> None:
    """Logs to standard error, masked, debug with ``--verbose`` (as ``logging.basicConfig``:
    nothing changes where the root logger already has handlers)."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(
        MaskingFormatter(masker, "%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
