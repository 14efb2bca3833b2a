"""Leases: work a bot process has taken, owned until an expiry it keeps renewing.

With several processes over one store, "this completion is being posted" or
"this session's agent runs here" must name *who* and *until when*: a process
that is killed holds its work forever otherwise, and one that merely restarts
cannot tell its own dead predecessor's work from a live neighbour's. A lease
row says both. Its owner renews every lease it holds in one statement, a
third of the lease time apart; a process that stops renewing (it died, or
hangs) loses its leases when they expire, and whichever process owns that
work's guild then takes it over.

Taking a lease is a compare-and-set: free, expired, or already ours. The
functions taking ``conn`` are units of work for :meth:`Database.run`, so an
outbox claim can take its lease in the same transaction as its status move;
:meth:`Leases.take_in` and :meth:`Leases.release_in` add a lease's change to
a use case's transaction (:mod:`core.store.transaction`).

Expiry is the slow proof that a holder is gone. Where the store can prove it
at once (:mod:`core.store.liveness`: the SQLite process lock, PostgreSQL
advisory locks held per process), a dead holder's leases are expired as soon
as somebody wants its work: a restarted process takes its killed
predecessor's sessions at the first message, not a lease time later.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any, Literal, cast

from sqlalchemy import ColumnElement, Connection, bindparam, delete, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from core.clock import Clock, SystemClock
from core.errors import ThreadboundError
from core.logging import get_logger
from core.store.database import Database
from core.store.liveness import Liveness, NoProof
from core.store.tables import LeaseRow, table_of
from core.store.transaction import Transaction

__all__ = [
    "LeaseHeld",
    "LeaseKind",
    "Leases",
    "abandoned",
    "new_owner_id",
    "release",
    "take",
]

_log = get_logger("core.leases")
_L = table_of(LeaseRow)

LeaseKind = Literal["completion", "session", "schedule"]


def new_owner_id() -> str:
    """A name for this process that no other process, and no later run, shares."""
    return f"{socket.gethostname()[:40]}/{os.getpid()}/{secrets.token_hex(4)}"


def _take_statement(insert: Any) -> Any:
    """The compare-and-set as one statement: insert the lease, or move an existing one
    to us when it is ours already or expired; a row comes back only when we hold it.

    A SAVEPOINT, an INSERT that fails on the key and an UPDATE did the same in four
    statements at every renewal; SQLite and PostgreSQL both say ``ON CONFLICT``.
    Built once, at import: building a statement costs more than SQLite running it.
    """
    statement = insert(_L).values(
        kind=bindparam("kind"),
        key=bindparam("key"),
        owner=bindparam("owner"),
        expires_at=bindparam("until", type_=_L.c.expires_at.type),
    )
    return statement.on_conflict_do_update(
        index_elements=[_L.c.kind, _L.c.key],
        set_={"owner": statement.excluded.owner, "expires_at": statement.excluded.expires_at},
        where=or_(
            _L.c.owner == statement.excluded.owner,
            _L.c.expires_at <= bindparam("now", type_=_L.c.expires_at.type),
        ),
    ).returning(_L.c.owner)


_TAKE = {"sqlite": _take_statement(sqlite.insert), "postgresql": _take_statement(postgresql.insert)}
_HOLDER = select(_L.c.owner).where(_L.c.kind == bindparam("kind"), _L.c.key == bindparam("key"))
_RELEASE = delete(_L).where(
    _L.c.kind == bindparam("kind"), _L.c.key == bindparam("key"), _L.c.owner == bindparam("owner")
)


def take(
    conn: Connection, kind: LeaseKind, key: str, *, owner: str, now: datetime, until: datetime
) -> str | None:
    """Take or extend the lease; None when it is ours now, else the live holder's name."""
    params = {"kind": kind, "key": key, "owner": owner, "until": until, "now": now}
    if conn.execute(_TAKE[conn.dialect.name], params).first() is not None:
        return None
    holder = conn.execute(_HOLDER, params).scalar()
    return str(holder) if holder is not None else "another process"


def release(conn: Connection, kind: LeaseKind, key: str, owner: str) -> None:
    """Give the lease up (only our own: a lease taken over by another stays theirs)."""
    conn.execute(_RELEASE, {"kind": kind, "key": key, "owner": owner})


def abandoned(
    kind: LeaseKind, key_column: ColumnElement[str], *, owner: str, now: datetime
) -> ColumnElement[bool]:
    """A SQL condition: ``key_column``'s work is nobody's now, so ``owner`` may take it
    over: no live lease on it, and no lease of ``owner``'s own (even a lapsed one:
    a process never takes over its own work, which it is still doing).

    For queries that look for work to take over, checked per row, so the check
    and the read are one statement.
    """
    held = (
        select(_L.c.key)
        .where(
            _L.c.kind == kind,
            _L.c.key == key_column,
            or_(_L.c.expires_at > now, _L.c.owner == owner),
        )
        .exists()
    )
    return ~held


class LeaseHeld(ThreadboundError):
    """A transaction needed a lease another live owner holds: nothing of it was written.

    Args:
        kind, key: the lease.
        holder: who holds it.
    """

    def __init__(self, kind: LeaseKind, key: str, holder: str) -> None:
        self.kind = kind
        self.key = key
        self.holder = holder
        super().__init__(f"the {kind} lease of {key!r} is held by {holder}; nothing was written")


def _take_or_refuse(
    conn: Connection, kind: LeaseKind, key: str, owner: str, now: datetime, until: datetime
) -> None:
    holder = take(conn, kind, key, owner=owner, now=now, until=until)
    if holder is not None:
        raise LeaseHeld(kind, key, holder)


def _renew(conn: Connection, owner: str, until: datetime) -> int:
    renewed = conn.execute(update(_L).where(_L.c.owner == owner).values(expires_at=until))
    return int(renewed.rowcount)


def _release_all(conn: Connection, owner: str) -> int:
    return int(conn.execute(delete(_L).where(_L.c.owner == owner)).rowcount)


def _live_owners(conn: Connection, now: datetime, *, besides: str) -> set[str]:
    """Owners other than ``besides`` with a live lease: those whose death matters."""
    rows = conn.execute(
        select(_L.c.owner).where(_L.c.owner != besides, _L.c.expires_at > now).distinct()
    )
    return {str(owner) for (owner,) in rows}


def _expire_owners(
    conn: Connection, owners: Collection[str], now: datetime
) -> list[tuple[LeaseKind, str]]:
    """Expire every live lease of ``owners`` (processes proven dead); returns what they
    held. Expired rather than deleted: rows keep naming who last held the work."""
    rows = conn.execute(
        update(_L)
        .where(_L.c.owner.in_(sorted(owners)), _L.c.expires_at > now)
        .values(expires_at=now)
        .returning(_L.c.kind, _L.c.key)
    )
    return sorted((cast(LeaseKind, str(kind)), str(key)) for kind, key in rows)


def _take_from_dead(
    conn: Connection,
    kind: LeaseKind,
    key: str,
    *,
    dead: str,
    owner: str,
    now: datetime,
    until: datetime,
) -> tuple[str | None, int]:
    """Expire all of ``dead``'s leases, then take this one: (its holder, or None; how
    many of ``dead``'s leases were expired). A third process may have been quicker."""
    expired = _expire_owners(conn, (dead,), now)
    return take(conn, kind, key, owner=owner, now=now, until=until), len(expired)


def _holders(conn: Connection, kind: LeaseKind, now: datetime) -> dict[str, str]:
    rows = conn.execute(
        select(_L.c.key, _L.c.owner).where(_L.c.kind == kind, _L.c.expires_at > now)
    )
    return {str(key): str(owner) for key, owner in rows}


class Leases:
    """This process's leases: taken, renewed while it runs, released when it stops.

    ``liveness`` proves other owners dead (default :class:`NoProof`: only expiry
    does); :meth:`start` begins proving this process alive and must come before
    the first lease is taken, or a neighbour could take this process for dead.
    """

    def __init__(
        self,
        database: Database,
        *,
        ttl_seconds: float = 30.0,
        owner: str | None = None,
        clock: Clock | None = None,
        liveness: Liveness | None = None,
    ) -> None:
        self._db = database
        self.owner = owner or new_owner_id()
        self.clock: Clock = clock or SystemClock()
        self.ttl = timedelta(seconds=ttl_seconds)
        self.liveness: Liveness = liveness or NoProof()

    async def start(self) -> None:
        """Begin proving this process alive (see :mod:`core.store.liveness`)."""
        await self.liveness.start(self.owner)

    def until(self) -> datetime:
        """When a lease taken or renewed now expires."""
        return self.clock.now() + self.ttl

    async def take(self, kind: LeaseKind, key: str) -> str | None:
        """Take the lease; None on success, else who holds it.

        A live lease whose holder is provably dead is no obstacle: all of that
        holder's leases are expired and this one is taken, in this call.
        """
        now = self.clock.now()
        until = now + self.ttl
        holder: str | None = await self._db.run(
            lambda conn: take(conn, kind, key, owner=self.owner, now=now, until=until)
        )
        if holder is None or holder not in await self.liveness.dead({holder}):
            return holder
        dead = holder
        holder, expired = await self._db.run(
            lambda conn: _take_from_dead(
                conn, kind, key, dead=dead, owner=self.owner, now=now, until=now + self.ttl
            )
        )
        if expired:
            self._taken_over([dead], expired)
        return holder

    def take_in(self, tx: Transaction, kind: LeaseKind, key: str) -> None:
        """Take the lease as one of ``tx``'s writes, to commit with the others (a spawn's
        subagent row): if another owner holds it, the whole transaction is refused
        with :class:`LeaseHeld`. Unlike :meth:`take` it seeks no proof that a holder
        is dead; it is for keys this process has just minted, which nobody else holds."""
        now = self.clock.now()
        tx.add(_take_or_refuse, kind, key, self.owner, now, now + self.ttl)

    def release_in(self, tx: Transaction, kind: LeaseKind, key: str) -> None:
        """:meth:`release` as one of ``tx``'s writes."""
        tx.add(release, kind, key, self.owner)

    async def take_over_dead(self) -> list[tuple[LeaseKind, str]]:
        """Expire every lease of the other owners that are provably dead, and return
        the ``(kind, key)`` pairs they held.

        Run at start-up: the completions a killed predecessor was posting become
        :func:`abandoned` at once (recovery posts them now, not a lease time
        later), and the caller learns which sessions it left, to pick them up.
        """
        now = self.clock.now()
        others: set[str] = await self._db.run(
            lambda conn: _live_owners(conn, now, besides=self.owner)
        )
        dead = await self.liveness.dead(others) if others else set()
        if not dead:
            return []
        theirs: list[tuple[LeaseKind, str]] = await self._db.run(
            lambda conn: _expire_owners(conn, dead, now)
        )
        if theirs:
            self._taken_over(sorted(dead), len(theirs))
        return theirs

    def _taken_over(self, owners: list[str], count: int) -> None:
        _log.info("leases.taken_over_dead", owner=self.owner, owners=owners, count=count)

    async def release(self, kind: LeaseKind, key: str) -> None:
        await self._db.run(release, kind, key, self.owner)

    async def holders(self, kind: LeaseKind) -> dict[str, str]:
        """Keys of ``kind`` under a live lease, and whose (ours included)."""
        now = self.clock.now()
        held: dict[str, str] = await self._db.run(lambda conn: _holders(conn, kind, now))
        return held

    async def renew(self) -> int:
        """Push every lease of ours to a full lease time from now; returns how many."""
        until = self.until()
        renewed: int = await self._db.run(lambda conn: _renew(conn, self.owner, until))
        return renewed

    async def keep_alive(self) -> None:
        """Renew a third of the lease time apart, until cancelled, checking our proof of
        life first. A failure of either is logged and retried: a store that is
        briefly away must not cost the leases."""
        interval = self.ttl.total_seconds() / 3
        while True:
            await self.clock.sleep(interval)
            try:
                await self.liveness.check()
            except Exception:
                _log.warning("leases.liveness_failed", owner=self.owner, exc_info=True)
            try:
                await self.renew()
            except Exception:
                _log.warning("leases.renew_failed", owner=self.owner, exc_info=True)

    async def close(self) -> None:
        """Let go of everything: a clean stop hands its work over at once, not on expiry.
        Our proof of life ends after that, so nobody takes our work for a dead one's
        while we still hold it."""
        try:
            released = await self._db.run(lambda conn: _release_all(conn, self.owner))
            if released:
                _log.info("leases.released", owner=self.owner, count=released)
        finally:
            await self.liveness.close()
