"""Stopping a collection at any point: a stop request every loop checks, and remote calls that
run in daemon threads, so that the main thread reacts to a signal at once.

A request to Prometheus or the Kubernetes API may block until its timeout; the main thread never
waits on one without also waiting on the stop request (:meth:`Stop.wait_for`). The threads that
make requests are daemon threads: one still blocked in a request never holds up the process's
exit (a ``ThreadPoolExecutor`` joins its threads at exit, this does not).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class Interrupted(Exception):
    """A stop was asked for while a source was being read."""


class Stop:
    """A stop request shared by a command, its loops and their worker threads."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._waiters: list[threading.Event] = []
        #: The signal that asked for the stop, if one did.
        self.signum: int | None = None

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        self._event.set()
        with self._lock:
            waiters = list(self._waiters)
        for waiter in waiters:
            waiter.set()

    def set_from_signal(self, signum: int) -> None:
        """Ask for a stop from a signal handler (the locks are taken in another thread, so a
        handler that runs while the main thread holds one of them cannot deadlock)."""
        if self.signum is None:
            self.signum = signum
        threading.Thread(target=self.set, name="gpuwatch-stop", daemon=True).start()

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s``; whether a stop was asked for."""
        return self._event.wait(timeout_s)

    def check(self) -> None:
        """Raise :class:`Interrupted` when a stop was asked for."""
        if self.is_set():
            raise Interrupted

    def wait_for(self, future: Future[T], timeout_s: float | None = None) -> T:
        """``future``'s result; :class:`Interrupted` as soon as a stop is asked for, and
        ``TimeoutError`` after ``timeout_s`` (None: no limit)."""
        wake = threading.Event()
        with self._lock:
            self._waiters.append(wake)
        future.add_done_callback(lambda _done: wake.set())
        try:
            if not self.is_set():
                wake.wait(timeout_s)
        finally:
            with self._lock:
                self._waiters.remove(wake)
        if future.done():
            return future.result()
        if self.is_set():
            raise Interrupted
        raise TimeoutError

    def run(self, call: Callable[[], T], timeout_s: float | None = None) -> T:
        """``call()`` in a daemon thread of its own, waited on as :meth:`wait_for` waits."""
        self.check()
        future: Future[T] = Future()
        thread = threading.Thread(target=_settle, args=(future, call), daemon=True)
        thread.start()
        return self.wait_for(future, timeout_s)


def _settle(future: Future[Any], call: Callable[[], Any]) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(call())
    except BaseException as exc:
        future.set_exception(exc)


class Worker:
    """One daemon thread running submitted calls in order (a one-thread executor whose thread
    never holds up the process's exit)."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None]
        self._queue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def submit(self, call: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        self._queue.put((future, call))
        return future

    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            _settle(*item)

    def close(self) -> None:
        """End the thread after the call under way; calls not started yet are cancelled."""
        pending: list[tuple[Future[Any], Callable[[], Any]]] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                pending.append(item)
        for future, _call in pending:
            future.cancel()
        self._queue.put(None)


#: The stop request of callers that never stop (library use, tests of other parts).
NEVER = Stop()
