"""The collector's leader lock: of several ``collect --follow`` replicas for the same clusters,
the one holding the lease collects (docs/deploy.md#running-two-collectors).

- PostgreSQL: a session advisory lock on a connection of its own, held for as long as the
  replica leads; the database drops it the moment that connection dies. The ``leases`` row only
  says who holds it and since when; it is written and read under a transaction-level mutex, so
  that a replica refused the lock never reads the name of the holder before.
- SQLite: the ``leases`` row is the lock. It is taken where absent, expired, or already this
  holder's (one atomic UPDATE, else an INSERT), and renewed before every page written; a holder
  that stops renewing loses it once ``expires_ts`` has passed.

The rules on plain values (:func:`may_take`, :func:`lease_name`, :func:`advisory_key`) take the
clock as an argument; :class:`Lease` does the I/O, with ``now_ts`` passed in by the caller.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, case, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError

from gpuwatch.store.models_lease import Lease as LeaseRow
from gpuwatch.store.writer import table_of

_TABLE = table_of(LeaseRow)


@dataclass(frozen=True)
class Holding:
    """A lease row as read: who holds it, since when, and until when without renewal."""

    name: str
    holder: str
    acquired_ts: int
    renewed_ts: int
    expires_ts: int


@dataclass(frozen=True)
class Attempt:
    """The outcome of taking or renewing a lease: whether this holder has it, and the row."""

    held: bool
    holding: Holding | None


def lease_name(clusters: Sequence[str]) -> str:
    """The lease that guards collecting ``clusters``: ``collect:<name>[,<name>...]``."""
    return "collect:" + ",".join(sorted(set(clusters)))


def holder_id(host: str, pid: int) -> str:
    """The default holder: host name (a pod's name in Kubernetes) and process id."""
    return f"{host}:{pid}"


def advisory_key(name: str) -> int:
    """A stable signed 64-bit key for PostgreSQL's advisory locks (the same in every process and
    version: the first 8 bytes of the name's SHA-256)."""
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def row_mutex_key(name: str) -> int:
    """PostgreSQL: the transaction-level advisory lock held while a replica takes the lease's
    lock and writes its row, or is refused and reads the row."""
    return advisory_key(f"{name} row")


def may_take(holding: Holding | None, holder: str, now_ts: int) -> bool:
    """Whether ``holder`` may take or renew the lease at ``now_ts``: nobody holds it, it is
    already ``holder``'s, or it expired (a lease holds while ``now_ts < expires_ts``)."""
    return holding is None or holding.holder == holder or holding.expires_ts <= now_ts


def read(conn: Connection, name: str) -> Holding | None:
    row = conn.execute(select(_TABLE).where(_TABLE.c.name == name)).mappings().first()
    return None if row is None else Holding(**{k: row[k] for k in Holding.__dataclass_fields__})


def read_all(engine: Engine) -> list[Holding]:
    """Every lease row, by name (``gpuwatch db leases``)."""
    with engine.connect() as conn:
        names = conn.execute(select(_TABLE.c.name).order_by(_TABLE.c.name)).scalars().all()
        return [h for h in (read(conn, n) for n in names) if h is not None]


def _take_row(conn: Connection, name: str, holder: str, now_ts: int, ttl_s: int) -> bool:
    """Take or renew the row where :func:`may_take` allows, atomically; whether it is ours."""
    mine = _TABLE.c.holder == holder
    renewed = conn.execute(
        update(_TABLE)
        .where(_TABLE.c.name == name, mine | (_TABLE.c.expires_ts <= now_ts))
        .values(
            holder=holder,
            acquired_ts=case((mine, _TABLE.c.acquired_ts), else_=now_ts),
            renewed_ts=now_ts,
            expires_ts=now_ts + ttl_s,
        )
    )
    if renewed.rowcount:
        return True
    row = {"name": name, "holder": holder, "acquired_ts": now_ts}
    row |= {"renewed_ts": now_ts, "expires_ts": now_ts + ttl_s}
    inserted = conn.execute(sqlite.insert(_TABLE).values(row).on_conflict_do_nothing())
    return bool(inserted.rowcount)


def _write_row(conn: Connection, name: str, holder: str, now_ts: int, ttl_s: int) -> None:
    """PostgreSQL: record the advisory lock's holder (the lock, not the row, decides)."""
    row = {"name": name, "holder": holder, "acquired_ts": now_ts}
    row |= {"renewed_ts": now_ts, "expires_ts": now_ts + ttl_s}
    stmt = postgresql.insert(_TABLE).values(row)
    same = _TABLE.c.holder == stmt.excluded.holder
    stmt = stmt.on_conflict_do_update(
        index_elements=["name"],
        set_={
            "holder": stmt.excluded.holder,
            "acquired_ts": case((same, _TABLE.c.acquired_ts), else_=stmt.excluded.acquired_ts),
            "renewed_ts": stmt.excluded.renewed_ts,
            "expires_ts": stmt.excluded.expires_ts,
        },
    )
    conn.execute(stmt)


class Lease:
    """One replica's hold on the lease ``name`` (not thread-safe: one thread uses it)."""

    def __init__(self, engine: Engine, name: str, holder: str, ttl_s: int) -> None:
        self.engine, self.name, self.holder, self.ttl_s = engine, name, holder, ttl_s
        self.postgres = engine.dialect.name == "postgresql"
        self._lock_conn: Connection | None = None
        self._held = False
        #: The transaction-level mutex around "take the lock, write the row" and "read the row".
        self._row_key = row_mutex_key(name)

    @property
    def held(self) -> bool:
        """Whether the last :meth:`acquire` found the lease ours (PostgreSQL: the lock's
        connection is open; SQLite: the row was renewed)."""
        return self._held

    def acquire(self, now_ts: int) -> Attempt:
        """Take the lease, or renew it where this replica holds it. Not held: the row says who
        does. A holder that finds it lost (connection gone, row taken) is no longer held."""
        with self.engine.begin() as conn:
            if self.postgres:
                # Taking the lock and naming its holder in the row is one step for every other
                # replica: they read the row under the same mutex, so never a stale name.
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": self._row_key})
                self._held = self._lock_postgres()
                if self._held:
                    _write_row(conn, self.name, self.holder, now_ts, self.ttl_s)
            else:
                self._held = _take_row(conn, self.name, self.holder, now_ts, self.ttl_s)
            return Attempt(self._held, read(conn, self.name))

    def _lock_postgres(self) -> bool:
        if self._lock_conn is not None:
            try:
                self._lock_conn.execute(text("SELECT 1"))
                return True
            except DBAPIError:
                self._drop_lock_conn()
                return False
        conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        # The server notices a leader whose host vanished (no TCP reset) within about two
        # thirds of the TTL, and drops its lock, instead of after the system's two hours.
        idle_s, interval_s = max(1, self.ttl_s // 3), max(1, self.ttl_s // 9)
        for setting, value in (("idle", idle_s), ("interval", interval_s), ("count", 3)):
            conn.execute(text(f"SET tcp_keepalives_{setting} = {int(value)}"))
        key = advisory_key(self.name)
        got = bool(conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar())
        if got:
            self._lock_conn = conn
        else:
            conn.close()
        return got

    def _drop_lock_conn(self) -> None:
        conn, self._lock_conn = self._lock_conn, None
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except DBAPIError:  # pragma: no cover - the connection is gone already
                pass

    def release(self, now_ts: int) -> None:
        """Give the lease up now (a clean stop), so that a waiting replica takes it at once."""
        if not self._held:
            return
        self._held = False
        with self.engine.begin() as conn:
            conn.execute(
                update(_TABLE)
                .where(_TABLE.c.name == self.name, _TABLE.c.holder == self.holder)
                .values(expires_ts=now_ts)
            )
        if self._lock_conn is not None:
            try:
                key = advisory_key(self.name)
                self._lock_conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                self._lock_conn.close()
            except DBAPIError:  # pragma: no cover - a dead connection released it already
                pass
            self._lock_conn = None

    def close(self) -> None:
        """Drop the lock's connection without touching the row (tests: a holder that died)."""
        self._held = False
        self._drop_lock_conn()


#: The advisory lock that serialises ``db upgrade`` runs (two collector pods start together).
UPGRADE_LOCK = "db upgrade"


@contextmanager
def upgrade_lock(engine: Engine) -> Iterator[None]:
    """On PostgreSQL, hold :data:`UPGRADE_LOCK` (waiting for it) while the body runs, so that
    replicas applying the migrations at once do so one after the other; nothing on SQLite."""
    if engine.dialect.name != "postgresql":
        yield
        return
    key = advisory_key(UPGRADE_LOCK)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
