"""``collect`` under the leader lease: wait for it, renew it before every page, give it up.

Of several ``collect --follow`` replicas for the same clusters, the one holding the lease
(:mod:`gpuwatch.store.lease`) collects; the others say once who does and ask again every
``collect.lease_poll``. The holder renews the lease before every page it writes (through
:class:`LeaseStop`, which the collection already consults before each write) and while it pauses
between rounds; a holder that finds the lease gone stops before its next page and waits again.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

import click
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from gpuwatch.cli.context import RuntimeFailure
from gpuwatch.collectors.stop import Interrupted, Stop
from gpuwatch.config import Settings
from gpuwatch.domain.durations import rfc3339
from gpuwatch.store.lease import Attempt, Lease, holder_id, lease_name

T = TypeVar("T")


class LeaseStop(Stop):
    """A stop request that also ends the collection before a page is written once ``gate``
    (renew the lease) says the lease is lost. The gate runs on the main thread only, where the
    pages are written; the fetching threads never touch the lease."""

    gate: Callable[[], bool] | None = None

    def wait_for(self, future: Future[T], timeout_s: float | None = None) -> T:
        result = super().wait_for(future, timeout_s)
        main = threading.current_thread() is threading.main_thread()
        if main and self.gate is not None and not self.gate():
            raise Interrupted
        return result


def _scope(settings: Settings) -> str:
    return f"cluster {settings.cluster}"


def _until(attempt: Attempt) -> str:
    holding = attempt.holding
    if holding is None:
        return "another replica collects"
    return f"{holding.holder} collects"


class Leadership:
    """This replica's part in the lease: take it, keep it, wait for it, say what happens."""

    def __init__(self, lease: Lease, scope: str, poll_s: float, clock: Callable[[], int]) -> None:
        self.lease, self.scope, self.poll_s, self.clock = lease, scope, poll_s, clock
        #: Renew this often while pausing between rounds (a third of the lease's life).
        self.renew_s = max(1.0, lease.ttl_s / 3)
        self._told: str | None = None
        self.lost = False

    def who(self, attempt: Attempt) -> str:
        """``<holder> collects <scope> (lease until <time>)``."""
        holding = attempt.holding
        until = f" (lease until {rfc3339(holding.expires_ts)})" if holding is not None else ""
        return f"{_until(attempt)} {self.scope}{until}"

    def take(self) -> Attempt:
        attempt = self.lease.acquire(self.clock())
        if attempt.held:
            self.lost = False
        return attempt

    def keep(self) -> bool:
        """Renew the lease; whether it is still this replica's (said once when it is lost)."""
        attempt = self.lease.acquire(self.clock())
        if attempt.held:
            self.lost = False
        elif not self.lost:
            self.lost = True
            self._told = attempt.holding.holder if attempt.holding is not None else ""
            click.echo(
                f"collect: lost the lease: {self.who(attempt)}; this replica stopped writing "
                "and waits",
                err=True,
            )
        return attempt.held

    def wait(self, stop: Stop) -> bool:
        """Hold the lease, waiting for it as long as it takes; False when a stop comes first.
        The replica says who collects once per holder, and when it takes over."""
        waited = False
        while not stop.is_set():
            try:
                attempt = self.take()
            except DBAPIError:  # the store is busy or away: ask again at the next poll
                stop.wait(self.poll_s)
                continue
            if attempt.held:
                self._told = None
                if waited:
                    click.echo(
                        f"collect: leading: {self.lease.holder} collects {self.scope}", err=True
                    )
                return True
            holder = attempt.holding.holder if attempt.holding is not None else ""
            if holder != self._told:
                click.echo(f"collect: waiting: {self.who(attempt)}", err=True)
                self._told = holder
            waited = True
            stop.wait(self.poll_s)
        return False

    def pause(self, stop: Stop, pause_s: float) -> bool:
        """Wait ``pause_s`` between rounds, renewing the lease meanwhile; whether a stop came."""
        slices = max(1, math.ceil(pause_s / self.renew_s))
        for _ in range(slices):
            if stop.wait(pause_s / slices):
                return True
            if self.lease.held:
                self.keep()
        return False

    def release(self) -> None:
        """Give the lease up; where the store cannot be reached, it expires on its own."""
        with contextlib.suppress(DBAPIError):
            self.lease.release(self.clock())


def leadership(settings: Settings, engine: Engine, clock: Callable[[], int]) -> Leadership:
    """This replica's leadership of the configured clusters' lease."""
    config = settings.collect
    holder = config.holder or holder_id(socket.gethostname(), os.getpid())
    ttl_s = int(config.lease_ttl.total_seconds())
    lease = Lease(engine, lease_name([settings.cluster]), holder, ttl_s)
    return Leadership(lease, _scope(settings), config.lease_poll.total_seconds(), clock)


def lead_or_refuse(lead: Leadership, stop: LeaseStop, follow: bool) -> bool:
    """Take the lease (``--follow``: wait for it) and have every page renew it first; False
    when stopped while waiting. A one-shot collection refuses while another replica holds it."""
    if follow:
        if not lead.wait(stop):
            return False
    else:
        attempt = lead.take()
        if not attempt.held:
            raise RuntimeFailure(
                f"another collector holds the lease: {lead.who(attempt)}; not collecting "
                "(--ignore-lease collects anyway)"
            )
    stop.gate = lead.keep
    return True
