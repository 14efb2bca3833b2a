"""Proof that a bot process is dead, so its leases need not be waited out.

A lease (:mod:`core.leases`) names the process that holds some work and an
expiry that process keeps pushing back. Expiry is the proof of last resort:
a process that stopped renewing for a whole lease time is taken for gone.
But a process killed and restarted comes back under a new owner id and would
wait out its own predecessor's leases, refusing every message to the
sessions that predecessor ran ("running in another bot process"). When the
store can tell which owners are no longer alive, their work is taken over at
once instead.

:class:`Liveness` is that port; each store proves death its own way:

- :class:`SoleProcess`, SQLite opened by the bot: the process lock
  (:mod:`core.store.single_process`) says this is the only bot process on the
  file, so every other owner is dead.
- :class:`PostgresLiveness`: each process holds, for its whole life, a
  session-level advisory lock keyed by its owner id on a connection of its
  own. PostgreSQL drops a session lock when the connection ends, however its
  process ended (``kill -9`` included), so an owner whose lock can be taken
  has no live connection holding it: it is dead.
- :class:`NoProof`: no proof at all (SQLite opened by tests and tools, without
  the process lock); leases lapse by expiry only.

The proof only ever errs on the side of "alive": an owner is reported dead
only when the store says nobody can still hold its work.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection
from typing import Protocol

from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from core.errors import StoreError
from core.logging import get_logger
from core.store.database import Database
from core.store.single_process import ProcessLock

__all__ = ["Liveness", "NoProof", "PostgresLiveness", "SoleProcess", "liveness_for"]

_log = get_logger("core.store.liveness")


class Liveness(Protocol):
    """Which lease owners are provably dead, and this process's own proof of life."""

    async def start(self, owner: str) -> None:
        """Begin proving ``owner`` (this process) alive; before it takes any lease."""

    async def dead(self, owners: Collection[str]) -> set[str]:
        """Those of ``owners`` that are provably dead (never this process's own)."""

    async def check(self) -> None:
        """Keep our own proof held, re-establishing it if it was lost; called periodically."""

    async def close(self) -> None:
        """Stop proving this process alive (a clean stop; its leases are released first)."""


class NoProof:
    """Nobody is ever provably dead: leases lapse by expiry only.

    For stores no bot process owns outright: SQLite opened without the process
    lock (tests, tools reading the store).
    """

    async def start(self, owner: str) -> None:
        del owner

    async def dead(self, owners: Collection[str]) -> set[str]:
        del owners
        return set()

    async def check(self) -> None:
        return None

    async def close(self) -> None:
        return None


class SoleProcess:
    """SQLite with the process lock held: this is the only bot process on the file,
    so any other owner is a previous run, dead.

    The proof lasts only while the lock does: once it is released (the store is
    closed) another bot process may start on the file, and nobody is dead any more.
    """

    def __init__(self, lock: ProcessLock) -> None:
        self._lock = lock
        self._owner: str | None = None

    async def start(self, owner: str) -> None:
        self._owner = owner

    async def dead(self, owners: Collection[str]) -> set[str]:
        if not self._lock.held:
            return set()
        return {owner for owner in owners if owner != self._owner}

    async def check(self) -> None:
        return None

    async def close(self) -> None:
        return None


# Two int4 keys: the deployment's schema (so test schemas and deployments sharing a
# database never see each other's processes), then the owner id. The two-key form
# lives in a lock space of its own, apart from Database.advisory_lock's one-key locks.
_KEYS = "hashtext('threadbound.alive.' || current_schema()), hashtext(:owner)"
_TRY_LOCK = text(f"SELECT pg_try_advisory_lock({_KEYS})")
_TRY_XACT_LOCK = text(f"SELECT pg_try_advisory_xact_lock({_KEYS})")
_PING = text("SELECT 1")


def _unheld(conn: Connection, owners: list[str]) -> set[str]:
    """Owners whose liveness lock nobody holds: their processes are gone.

    Trying the transaction-level form of the same lock takes it only if no live
    session holds it; commit lets it go at once.
    """
    return {owner for owner in owners if conn.execute(_TRY_XACT_LOCK, {"owner": owner}).scalar()}


class PostgresLiveness:
    """Each process holds a session-level advisory lock keyed by its owner id, on
    a dedicated connection kept out of the pool, for as long as it lives.

    PostgreSQL releases a session lock when its connection ends, whatever ended
    it: a clean close, ``kill -9`` of the process, a lost host (once the server
    notices the connection is gone). So a lock anybody can take belongs to a
    process that is dead, and its leases may be taken over at once.

    If our own connection is lost (a server restart, a network cut, an
    administrator terminating it) the lock goes with it, and **until**
    :meth:`check` has taken it again other processes may consider this process
    dead and take its work over. That is the same risk as leases lapsing while
    the store is away, only quicker: :meth:`check` runs at every lease renewal.

    Args:
        database: the store (PostgreSQL); the dedicated connection is taken from
            its engine and detached, so returning it can never leave the lock
            held on a pooled connection.
        ping_timeout_seconds: how long a ping of that connection may take before
            it counts as lost.
    """

    def __init__(self, database: Database, *, ping_timeout_seconds: float = 5.0) -> None:
        if not isinstance(database.engine, AsyncEngine) or database.dialect != "postgresql":
            raise StoreError("PostgresLiveness needs a PostgreSQL store")
        self._db = database
        self._engine: AsyncEngine = database.engine
        self._ping_timeout = ping_timeout_seconds
        self._owner: str | None = None
        self._conn: AsyncConnection | None = None
        self._closed = False
        self._busy = asyncio.Lock()
        self.backend_pid: int | None = None
        """The server process of the connection holding our lock (None while it is lost)."""

    async def start(self, owner: str) -> None:
        """Take our lock, or raise a StoreError: another live connection holds this
        owner id's lock (an id two processes share, or a hash collision), and
        proving ourselves alive under it would prove nothing."""
        async with self._busy:
            if self._owner is not None:
                raise StoreError(f"liveness already started for {self._owner}")
            conn = await self._hold(owner)
            if conn is None:
                raise StoreError(
                    f"another live connection holds the liveness lock of owner {owner!r}; "
                    "a process proving itself alive under it would prove nothing. "
                    "Start the process again (it picks a new owner id)"
                )
            self._owner, self._conn = owner, conn

    async def dead(self, owners: Collection[str]) -> set[str]:
        asked = sorted(owner for owner in owners if owner != self._owner)
        if not asked:
            return set()
        found: set[str] = await self._db.run(_unheld, asked)
        return found

    async def check(self) -> None:
        """Ping our connection; if it is gone, connect again and retake the lock.

        Raises StoreError when the lock cannot be taken again yet (the server is
        away, or still ending the old connection); the next check tries again.
        """
        async with self._busy:
            if self._owner is None or self._closed:
                return
            if self._conn is not None:
                try:
                    async with asyncio.timeout(self._ping_timeout):
                        await self._conn.execute(_PING)
                    return
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    await self._drop()
                _log.warning(
                    "liveness.lost",
                    owner=self._owner,
                    error=error,
                    consequence="until the lock is held again, other processes may "
                    "take this process for dead and take its leases over",
                )
            self._conn = await self._hold(self._owner)
            if self._conn is None:
                raise StoreError(
                    f"the liveness lock of owner {self._owner!r} is still held, most likely "
                    "by our old connection the server has not ended yet; the next check "
                    "tries again"
                )
            _log.info("liveness.reestablished", owner=self._owner, backend_pid=self.backend_pid)

    async def close(self) -> None:
        """Give the lock up and close the connection (a clean stop)."""
        async with self._busy:
            self._closed = True
            if self._conn is None:
                return
            with contextlib.suppress(Exception):
                async with asyncio.timeout(self._ping_timeout):
                    await self._conn.execute(text("SELECT pg_advisory_unlock_all()"))
            await self._drop()

    async def _hold(self, owner: str) -> AsyncConnection | None:
        """A new dedicated connection holding ``owner``'s lock; None if the lock is
        held elsewhere. Raises what connecting raises."""
        conn = await self._engine.connect()
        try:
            # No transaction left open on a connection held for hours.
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            # Out of the pool: closing it really closes it, so the lock never
            # outlives us on a connection someone else is handed later.
            await conn.run_sync(lambda sync: sync.detach())
            taken = (await conn.execute(_TRY_LOCK, {"owner": owner})).scalar()
            pid = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar()
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.close()
            raise
        if not taken:
            await conn.close()
            return None
        self.backend_pid = int(pid) if pid is not None else None
        return conn

    async def _drop(self) -> None:
        conn, self._conn, self.backend_pid = self._conn, None, None
        if conn is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(self._ping_timeout):
                    await conn.close()


def liveness_for(database: Database) -> Liveness:
    """The proof this store allows: PostgreSQL's locks, SQLite's process lock, or none."""
    if database.dialect == "postgresql":
        return PostgresLiveness(database)
    if database.process_lock is not None:
        return SoleProcess(database.process_lock)
    return NoProof()
