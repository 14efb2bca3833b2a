"""A use case's transaction: its writes commit together, and what follows the commit
is registered on it.

The polar pattern (``server/AGENTS.md``): the use case opens the transaction,
the repositories and services it calls add their writes to it and never
commit, and the block's end commits them all at once. What may happen only
once the writes are durable (an in-memory index updated, a domain event
published) is registered with :meth:`Transaction.after_commit` by whoever
made the write, and runs only if the commit succeeds; what must be undone in
memory if it does not (a reservation, a record marked as ending) with
:meth:`Transaction.after_rollback`. So a spawn reads as one block, and what
commits together is what is written inside it:

    async with database.transaction() as tx:
        tx.add(repository.upsert_subagent, record)
        leases.take_in(tx, "session", key)
        binding = await bindings.bind(..., tx=tx)
    # committed: the binding is indexed and announced

The writes are queued, not sent: a write is a unit of work as
:meth:`Database.run` takes it (``fn(connection, *args)``), and the commit
runs every queued one, in order, as one unit of work, which is one database
transaction on SQLite and on PostgreSQL and keeps the store's fast paths (one
hop to the SQLite thread, one greenlet on PostgreSQL). Nothing holds a
database transaction open while the block awaits something else (a Discord
thread being created, say), and a write's return value is read after the
commit (:class:`Returned`). A write that must refuse the whole transaction
(a lease somebody else holds) raises inside its function: the transaction
rolls back and the exception leaves the block.

Cancelling the caller while its transaction commits does not stop the
commit, nor what follows it: the store and the memory never disagree
because a caller gave up waiting.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy import Connection

from core.logging import get_logger

__all__ = ["Callback", "Returned", "Transaction"]

T = TypeVar("T")

_log = get_logger("core.store")

Callback = Callable[[], Awaitable[Any] | None]
"""Run after the commit (or the rollback); awaited when it returns an awaitable."""


class _Runner(Protocol):
    def run(self, fn: Callable[..., Any], /, *args: Any) -> Awaitable[Any]: ...


class Returned(Generic[T]):
    """What one queued write returned, to read once its transaction has committed."""

    __slots__ = ("_committed", "_value")

    def __init__(self) -> None:
        self._committed = False
        self._value: T | None = None

    @property
    def value(self) -> T:
        """The write's result; refused before the commit, when there is none yet."""
        if not self._committed:
            raise RuntimeError("a write's result is known only once its transaction committed")
        return self._value  # type: ignore[return-value]  # set by the commit


class _Write:
    __slots__ = ("args", "fn", "returned")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], returned: Returned[Any]):
        self.fn = fn
        self.args = args
        self.returned = returned


class Transaction:
    """The writes of one use case, committed together when its ``async with`` block ends.

    Built by :meth:`core.store.database.Database.transaction`; used once.
    An exception leaving the block rolls it back (nothing queued is written)
    and runs the rollback callbacks; a clean exit commits and runs the commit
    callbacks, in the order they were registered. A callback that fails is
    logged and the others still run: the commit (or the rollback) stands.
    """

    __slots__ = ("_after_commit", "_after_rollback", "_database", "_entered", "_writes")

    def __init__(self, database: _Runner) -> None:
        self._database = database
        self._writes: list[_Write] = []
        self._after_commit: list[Callback] = []
        self._after_rollback: list[Callback] = []
        self._entered = False

    def add(self, fn: Callable[..., T], /, *args: Any) -> Returned[T]:
        """Queue ``fn(connection, *args)`` to run in this transaction at its commit, after
        the writes queued before it; its result is read from the returned handle."""
        returned: Returned[T] = Returned()
        self._writes.append(_Write(fn, args, returned))
        return returned

    def after_commit(self, callback: Callback) -> None:
        """Run ``callback`` once the writes are committed (never if they are not)."""
        self._after_commit.append(callback)

    def after_rollback(self, callback: Callback) -> None:
        """Run ``callback`` if the transaction does not commit: undo what was done in
        memory in its expectation."""
        self._after_rollback.append(callback)

    async def __aenter__(self) -> Transaction:
        if self._entered:
            raise RuntimeError("a transaction is used once; open another")
        self._entered = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            await _shielded(self._rolled_back())
            return
        await _shielded(self._commit())

    async def _commit(self) -> None:
        if self._writes:
            try:
                await self._database.run(self._run_writes)
            except BaseException:
                await self._rolled_back()
                raise
            for write in self._writes:
                write.returned._committed = True
        await _call_all(self._after_commit, committed=True)

    def _run_writes(self, conn: Connection) -> None:
        for write in self._writes:
            write.returned._value = write.fn(conn, *write.args)

    async def _rolled_back(self) -> None:
        await _call_all(self._after_rollback, committed=False)


async def _call_all(callbacks: list[Callback], *, committed: bool) -> None:
    for callback in callbacks:
        try:
            result = callback()
            if inspect.isawaitable(result):
                await result
        except Exception:
            if committed:
                _log.error("store.after_commit_failed", exc_info=True)
            else:
                _log.error("store.after_rollback_failed", exc_info=True)


async def _shielded(work: Awaitable[None]) -> None:
    """Run ``work`` to its end even if the caller is cancelled meanwhile (the caller
    still sees the cancellation, and a failure nobody waits for any more is logged)."""
    task = asyncio.ensure_future(work)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        task.add_done_callback(_retrieve)
        raise


def _retrieve(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        _log.error("store.transaction_failed", exc_info=task.exception())
