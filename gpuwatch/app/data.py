"""The dashboard's data: the filters of a page, and the current snapshot of the store.

:class:`DashboardData` keeps the current :class:`~gpuwatch.app.snapshot.Snapshot` (the fleet's
inventory at one data version; built by :func:`~gpuwatch.app.snapshot.build_snapshot`) and
reads it again when the store's data changes, in a background thread while pages keep serving
the current one until the new one has warmed up (computed the default views). Pages read
their figures from the store and memoize them inside the snapshot, so a cached result can never
outlive the data it came from.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import Engine

from gpuwatch.app.shared import SharedAnswers
from gpuwatch.app.snapshot import Snapshot, build_snapshot, release_memory, warming
from gpuwatch.app.windows import is_window
from gpuwatch.config import Settings
from gpuwatch.report.inputs import policy_from, price_book_from
from gpuwatch.store import repository

__all__ = ["DashboardData", "Filters", "Snapshot"]
DEFAULT_WINDOW = "7d"
#: Pinned results a page asked for this recently are computed again by the next warm-up.
ASKED_KEEP_S = 900.0
FILTER_NAMES = ("cluster", "team", "namespace", "model", "allocation", "window")


def _first(value: object) -> str | None:
    """One query value: the first of a repeated parameter, ``None`` for empty."""
    if isinstance(value, list | tuple):
        value = value[0] if value else None
    if value is None:
        return None
    text = str(value).strip()
    return text or None


@dataclass(frozen=True)
class Filters:
    """The filter bar's state; ``None`` means all."""

    cluster: str | None = None
    team: str | None = None
    namespace: str | None = None
    model: str | None = None
    #: How the GPUs were held: device-plugin, mig, time-slice, mps or dra.
    allocation: str | None = None
    window: str = DEFAULT_WINDOW

    @classmethod
    def from_query(cls, query: Mapping[str, object]) -> Filters:
        window = _first(query.get("window")) or DEFAULT_WINDOW
        return cls(
            cluster=_first(query.get("cluster")),
            team=_first(query.get("team")),
            namespace=_first(query.get("namespace")),
            model=_first(query.get("model")),
            allocation=_first(query.get("allocation")),
            window=window if is_window(window) else DEFAULT_WINDOW,
        )

    def query(self) -> dict[str, str]:
        """The non-default filters as query parameters."""
        values = {name: getattr(self, name) for name in FILTER_NAMES}
        if values["window"] == DEFAULT_WINDOW:
            values["window"] = None
        return {k: v for k, v in values.items() if v}

    def href(self, path: str, **extra: object) -> str:
        """A link to ``path`` keeping these filters, with ``extra`` parameters added."""
        params = {k: str(v) for k, v in extra.items() if v is not None} | self.query()
        return f"{path}?{urlencode(params)}" if params else path

    def with_(self, **changes: Any) -> Filters:
        return replace(self, **changes)


class DashboardData:
    """The current snapshot of one store, rebuilt when the store's data changes.

    The store is checked at most every ``refresh_s`` seconds. With ``background`` a changed
    store is rebuilt and warmed up in a thread while the previous snapshot keeps serving, and
    serves once warm; without it the caller waits for the new snapshot, not warmed (tests). A
    new snapshot carries over which pinned results (recommendations per window) pages asked for
    in the last :data:`ASKED_KEEP_S` seconds, so the warm-up computes those again ahead of the
    next visit; ``clock`` times those asks. With ``shared`` (``serve --workers N``), each
    snapshot shares its expensive answers with the server's other workers
    (:mod:`gpuwatch.app.shared`).
    """

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        *,
        refresh_s: float = 60.0,
        background: bool = True,
        clock: Callable[[], float] = time.monotonic,
        shared: SharedAnswers | None = None,
    ) -> None:
        self.engine = engine
        self.shared = shared
        self.settings = settings
        self.price_book = price_book_from(settings)
        self.policy = policy_from(settings)
        self.refresh_s = refresh_s
        self.background = background
        self.clock = clock
        self._snapshot: Snapshot | None = None
        self._checked = 0.0
        self._build_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._building = False
        self.warmers: list[Callable[[Snapshot], object]] = []
        #: The thread building the next snapshot, once one was started.
        self.rebuild_thread: threading.Thread | None = None

    def _read(self) -> Snapshot:
        snapshot = build_snapshot(self.engine, self.price_book, self.policy)
        snapshot.clock = self.clock
        if self.shared is not None:
            snapshot.shared = self.shared.version(snapshot.marker)
        return snapshot

    def _serve(self, snapshot: Snapshot) -> Snapshot:
        """Serve ``snapshot`` from now on, with the asks the current one saw (those made while
        ``snapshot`` warmed up included)."""
        if self._snapshot is not None:
            self._follow(self._snapshot, snapshot)
        self._snapshot = snapshot
        self._checked = time.monotonic()
        release_memory()  # the build's and the previous snapshot's frames
        return snapshot

    def _follow(self, previous: Snapshot, snapshot: Snapshot) -> None:
        """``snapshot`` follows ``previous``: it carries over the recent asks."""
        snapshot.asked = previous.asked_since(self.clock() - ASKED_KEEP_S)
        snapshot.first = False

    def _build(self) -> Snapshot:
        return self._serve(self._read())

    def _build_and_warm(self) -> None:
        """A new snapshot, warmed up before it serves when one serves already: pages keep the
        current snapshot's answers until the new one has the default views and the asked
        windows, so new data never leaves a page waiting for the warm-up. The first snapshot
        serves at once (a page then computes only what it asks for)."""
        snapshot = self._read()
        previous = self._snapshot
        if previous is None:
            self.warm(self._serve(snapshot))
            return
        self._follow(previous, snapshot)
        self.warm(snapshot)
        self._serve(snapshot)

    def _rebuild_in_background(self) -> None:
        def run() -> None:
            try:
                with self._build_lock:
                    self._build_and_warm()
            finally:
                with self._state_lock:
                    self._building = False

        with self._state_lock:
            if self._building:
                return
            self._building = True
        self.rebuild_thread = threading.Thread(target=run, name="gpuwatch-snapshot", daemon=True)
        self.rebuild_thread.start()

    def warm(self, snapshot: Snapshot) -> None:
        """Compute what the first pages will ask for (the default views) ahead of time."""
        with warming():
            for warmer in self.warmers:
                warmer(snapshot)
        release_memory()  # what the warm-up's intermediate frames held

    def start(self) -> None:
        """Build the first snapshot in the background (the server answers meanwhile)."""
        if self._snapshot is None:
            self._rebuild_in_background()

    def current(self) -> Snapshot:
        """The snapshot to serve: built now if there is none, refreshed when the data changed."""
        snapshot = self._snapshot
        if snapshot is None:
            with self._build_lock:
                snapshot = self._snapshot or self._build()
            return snapshot
        if time.monotonic() - self._checked < self.refresh_s:
            return snapshot
        self._checked = time.monotonic()
        if repository.data_marker(self.engine) == snapshot.marker:
            return snapshot
        if self.background:
            self._rebuild_in_background()
            return snapshot
        with self._build_lock:
            return self._build()
