"""Group commit: appends of many sessions share one transaction.

A durable commit costs an fsync (SQLite ``synchronous=FULL``) or a round trip
to PostgreSQL, far more than inserting one row. Hundreds of live sessions each
appending an event would queue on that cost one by one; instead, writes that
arrive while a transaction is in flight wait and go together in the next
one. Each caller's future resolves only after the transaction holding its
events committed and its tree applied them, so "returned" still means
"durable".

If a shared transaction fails, every write in it is retried in a transaction
of its own, so one session's conflict (another process appended the same
``seq``) fails that session alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from core.errors import SessionError, StoreError
from core.sessions import repository
from core.sessions.events import SessionEvent
from core.sessions.tree import SessionTree
from core.store.database import Database

__all__ = ["GroupCommitter", "PendingWrite"]

MAX_BATCH_EVENTS = 1000
"""Events per shared transaction; bounds a transaction's size, not throughput."""


@dataclass(slots=True)
class PendingWrite:
    """One caller's events for one session, with the projection rows they produce.

    ``done`` is what the caller awaits; it may be cancelled with the caller. What
    must happen whatever the caller does (apply the committed events to the tree,
    then ``on_settled``, which releases the session for its next append) is done
    by the committer when the write settles, exactly once.
    """

    tree: SessionTree
    events: list[SessionEvent]
    event_rows: list[dict[str, Any]]
    head_row: dict[str, Any]
    branch_rows: list[dict[str, Any]]
    on_settled: Callable[[], None] | None = None
    done: asyncio.Future[None] = field(init=False)
    settled: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.done = asyncio.get_running_loop().create_future()


def _rows(
    writes: list[PendingWrite],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    events = [row for write in writes for row in write.event_rows]
    heads = [write.head_row for write in writes]
    branches = [row for write in writes for row in write.branch_rows]
    return events, heads, branches


def _write_batch(conn: Any, writes: list[PendingWrite]) -> None:
    repository.write_events(conn, *_rows(writes))


def _write_batch_sqlite(dbapi: Any, dialect: Any, writes: list[PendingWrite]) -> None:
    repository.write_events_sqlite(dbapi, dialect, *_rows(writes))


class GroupCommitter:
    """Batches pending writes into transactions; one drain task while there is work.

    The drain task exists only while writes are pending and belongs to this
    object (:meth:`wait_idle` awaits it); it is never left running unowned.
    """

    def __init__(self, database: Database) -> None:
        self._db = database
        # On the sqlite:// store a batch goes straight to the driver, in a transaction
        # begun and committed on it (Database.run_sqlite): the store's own transaction
        # handling cost as much Python as the rows, at two commits per agent step.
        self._direct = database.direct_sqlite
        self._pending: list[PendingWrite] = []
        self._drainer: asyncio.Task[None] | None = None

    def submit(self, write: PendingWrite) -> asyncio.Future[None]:
        """Queue ``write``; the returned future resolves once it is committed and applied."""
        self._pending.append(write)
        if self._drainer is None:
            self._drainer = asyncio.get_running_loop().create_task(
                self._drain(), name="threadbound-session-group-commit"
            )
        return write.done

    async def wait_idle(self) -> None:
        """Wait until every submitted write has been committed or failed."""
        while self._drainer is not None:
            await asyncio.wait({self._drainer})

    async def _drain(self) -> None:
        try:
            pending = self._pending
            while pending:
                taken, size = 0, 0
                while taken < len(pending) and (taken == 0 or size < MAX_BATCH_EVENTS):
                    size += len(pending[taken].events)
                    taken += 1
                batch = pending[:taken]
                del pending[:taken]
                await self._commit(batch)
        except BaseException as exc:
            for write in self._pending:
                _fail(write, exc, blame=False)
            self._pending.clear()
            raise
        finally:
            self._drainer = None

    async def _commit(self, batch: list[PendingWrite]) -> None:
        try:
            await self._write(batch)
        except asyncio.CancelledError as exc:
            for write in batch:
                _fail(write, exc)
            raise
        except Exception as exc:
            if len(batch) == 1:
                _fail(batch[0], exc)
                return
            for write in batch:  # find the culprit: each write alone
                try:
                    await self._write([write])
                except asyncio.CancelledError as cancelled:
                    for unsettled in batch:  # settled ones are skipped
                        _fail(unsettled, cancelled)
                    raise
                except Exception as alone:
                    _fail(write, alone)
                else:
                    _succeed(write)
            return
        for write in batch:
            _succeed(write)

    async def _write(self, batch: list[PendingWrite]) -> None:
        if self._direct:
            await self._db.run_sqlite(_write_batch_sqlite, batch)
        else:
            await self._db.run(_write_batch, batch)


def _succeed(write: PendingWrite) -> None:
    """Committed: the tree applies the events (even if the caller stopped waiting)."""
    if write.settled:
        return
    failure: BaseException | None = None
    try:
        apply = write.tree.apply
        for event in write.events:
            apply(event)
    except Exception as exc:  # committed, but the tree moved meanwhile: it must be reloaded
        failure = exc
    _settle(write, failure)


def _fail(write: PendingWrite, exc: BaseException, *, blame: bool = True) -> None:
    """Not committed: the caller gets the failure (``blame``: as this write's own)."""
    if not write.settled:
        _settle(write, _as_failure(exc, write if blame else None))


def _settle(write: PendingWrite, failure: BaseException | None) -> None:
    write.settled = True
    if write.on_settled is not None:
        write.on_settled()
    if write.done.done():  # the caller was cancelled: nobody to tell
        return
    if failure is None:
        write.done.set_result(None)
    else:
        write.done.set_exception(failure)


def _as_failure(exc: BaseException, write: PendingWrite | None = None) -> BaseException:
    failure = _translate(exc, write)
    if failure is not exc:
        failure.__cause__ = exc
    return failure


def _translate(exc: BaseException, write: PendingWrite | None) -> BaseException:
    if isinstance(exc, IntegrityError) and write is not None:
        first = write.events[0]
        return SessionError(
            f"session {first.session_key!r} already has an event at seq {first.seq} or node "
            f"{first.node_id}: another writer appended to it; load the session again",
            session_key=first.session_key,
        )
    if isinstance(exc, SQLAlchemyError | OSError):
        key = write.events[0].session_key if write is not None else "?"
        return StoreError(
            f"could not append to session {key!r}: {type(exc).__name__}; nothing was recorded"
        )
    if isinstance(exc, asyncio.CancelledError):
        return StoreError(
            "the session log stopped before the commit of the event was confirmed; "
            "load the session again to see whether it was recorded"
        )
    return exc
