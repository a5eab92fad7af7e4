"""The one retry policy of both sources (Prometheus, the Kubernetes API).

A call is tried up to ``attempts`` times; a failure the caller calls transient is retried after
an exponential backoff (``base_delay_s``, doubled each time, at most ``max_delay_s``); any other
failure, or the last one, ends the calls with :class:`RetriesExhausted`, which says how many
attempts were made and carries the last failure.

With a :class:`~gpuwatch.collectors.stop.Stop`, the backoff waits on the stop request instead of
sleeping, and no attempt starts once a stop was asked for: the calls end with
:class:`~gpuwatch.collectors.stop.Interrupted`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from gpuwatch.collectors.stop import Stop

log = logging.getLogger(__name__)
T = TypeVar("T")


class RetriesExhausted(Exception):
    """The call failed for good: after ``attempts`` attempts, with ``failure`` the last."""

    def __init__(self, failure: Exception, attempts: int) -> None:
        super().__init__(str(failure))
        self.failure = failure
        self.attempts = attempts


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a source's calls are retried."""

    retries: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = math.inf
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    stop: Stop | None = field(default=None, compare=False)

    @property
    def attempts(self) -> int:
        return max(0, self.retries) + 1

    def delay_s(self, attempt: int) -> float:
        """The wait after failed attempt ``attempt`` (1, 2, …)."""
        return float(min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1)))

    def call(
        self,
        what: str,
        call: Callable[[], T],
        retryable: Callable[[Exception], bool],
        failures: tuple[type[Exception], ...] = (Exception,),
    ) -> T:
        """``call()``, retried while it fails with a retryable member of ``failures``."""
        for attempt in range(1, self.attempts + 1):
            if self.stop is not None:
                self.stop.check()
            try:
                return call()
            except failures as exc:
                if not retryable(exc) or attempt == self.attempts:
                    raise RetriesExhausted(exc, attempt) from exc
                delay = self.delay_s(attempt)
                log.info("%s failed (%s); retrying in %.1fs", what, exc, delay)
                if self.stop is None:
                    self.sleep(delay)
                else:
                    self.stop.wait(delay)
        raise AssertionError("unreachable")  # pragma: no cover
