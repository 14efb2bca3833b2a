"""The store as one object that runs units of work in transactions.

A unit of work is a plain synchronous function ``fn(connection, *args)``; the
repositories are written that way once and run unchanged on every backend:

- SQLite (``sqlite://``): on one dedicated thread with SQLAlchemy's synchronous
  engine. A whole transaction is one hop off the event loop. The asyncio
  adapter for aiosqlite crosses threads for every cursor, execute, close and
  commit (about eight hops a transaction, ~90 us each on a 2-core VM), which
  capped durable binds near 550/s; one hop runs them at several times that.
  SQLite admits one writer at a time anyway, so one thread costs no
  concurrency.
- PostgreSQL (and ``sqlite+aiosqlite://``): on the asyncio engine's
  synchronous face, inside one greenlet (what ``AsyncConnection.run_sync``
  does for a function), which drives the same function over the async driver
  without a thread.

Either way the function runs inside ``BEGIN ... COMMIT``; an exception rolls
back and propagates.

On PostgreSQL, a pooled connection is not pinged at checkout (that was a round
trip per unit of work). A connection the server dropped while it sat in the
pool (a server restart, an idle-session kill) fails at the unit's BEGIN, before
any of its statements reached the server; the unit then runs again, once, on a
new connection, and ``store.reconnected`` is logged. A connection lost later in
the unit is never retried: the function may have acted on what its first
statements returned, so the failure propagates like any other.

A use case whose writes span several repositories (a spawn's subagent row, its
session's lease and its thread's binding) opens :meth:`Database.transaction`:
they queue their writes on it and the block's end runs them as one unit of
work (see :mod:`core.store.transaction`).

Every unit of work goes through SQLAlchemy but one: :meth:`Database.run_sqlite`,
the session log's append (two commits per agent step). On the ``sqlite://``
engine it hands the function the ``sqlite3`` connection itself, inside
``BEGIN IMMEDIATE`` and ``COMMIT`` issued on it directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, event, text
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util import greenlet_spawn

from core.errors import StoreError
from core.logging import get_logger
from core.store.changes import ORIGIN_KEY
from core.store.engine import create_engine, parse_url, redacted_url
from core.store.migrations import migrate
from core.store.single_process import ProcessLock
from core.store.transaction import Transaction

__all__ = ["Database", "open_database"]

T = TypeVar("T")

_log = get_logger("core.store.database")


class Database:
    """Owns the engine (and, for SQLite, its thread); runs units of work."""

    def __init__(self, engine: Engine | AsyncEngine) -> None:
        self.engine = engine
        self.process_lock: ProcessLock | None = None
        self.origin = secrets.token_hex(8)
        """Names this Database in the change notifications its units of work send."""
        sync = engine if isinstance(engine, Engine) else engine.sync_engine
        self._sync_engine = sync
        event.listen(sync, "connect", self._mark_origin)
        self._closed = False
        self._retry_dropped = self.dialect == "postgresql"
        """Whether a unit of work whose connection was dropped before its BEGIN runs again."""
        self._thread: ThreadPoolExecutor | None = None
        self._direct: PoolProxiedConnection | None = None
        """The pooled connection :meth:`run_sqlite` uses, held from its first call to close."""
        if isinstance(engine, Engine):
            self._thread = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="threadbound-sqlite"
            )

    def _mark_origin(self, _dbapi_connection: Any, record: Any) -> None:
        record.info[ORIGIN_KEY] = self.origin

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def transaction(self) -> Transaction:
        """A transaction for one use case: ``async with database.transaction() as tx``;
        the writes queued on ``tx`` commit together at the block's end, as one unit
        of work (see :mod:`core.store.transaction`)."""
        return Transaction(self)

    async def run(self, fn: Callable[..., T], /, *args: Any) -> T:
        """Run ``fn(connection, *args)`` in one transaction and return its result.

        Cancelling the caller does not stop a unit of work already handed to
        the SQLite thread; callers that mirror a write in memory shield it.

        On PostgreSQL, a unit whose connection turns out to have been dropped
        before its first statement runs once more on a new connection (see the
        module's docstring).
        """
        if isinstance(self.engine, AsyncEngine):
            if not self._retry_dropped:
                return await greenlet_spawn(self._run_sync, fn, args)
            attempt = _Attempt(fn, args)
            try:
                return await greenlet_spawn(self._run_sync, attempt, ())
            except DBAPIError as exc:
                if not attempt.dropped_before_begin:
                    raise
                _log.warning("store.reconnected", error=f"{type(exc.orig).__name__}: {exc.orig}")
            return await greenlet_spawn(self._run_sync, fn, args)
        assert self._thread is not None
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._run_sync, fn, args)

    def _run_sync(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        """The whole transaction, synchronously: on the SQLite thread, or for the asyncio
        engines inside one greenlet, where the driver's awaits reach the event loop.

        One greenlet for the checkout, the statements, the commit and the return
        to the pool, instead of the five or so that ``AsyncEngine.begin()`` and
        ``run_sync`` take, each with an object or two around it (tens of
        microseconds a unit of work in a profile).
        """
        with self._sync_engine.begin() as conn:
            return fn(conn, *args)

    @property
    def direct_sqlite(self) -> bool:
        """Whether :meth:`run_sqlite` may be used: the ``sqlite://`` engine, on its thread."""
        return self._thread is not None

    async def run_sqlite(self, fn: Callable[..., T], /, *args: Any) -> T:
        """Run ``fn(sqlite3_connection, dialect, *args)`` in one transaction on the SQLite
        thread, with ``BEGIN IMMEDIATE`` and ``COMMIT`` issued on that connection directly.

        Only where :attr:`direct_sqlite` is true. A transaction through
        :meth:`run` costs twice a raw one in Python alone (a Core
        ``Connection``, its begin event running ``BEGIN IMMEDIATE`` through
        Core's execution machinery, the commit's bookkeeping); the session
        log pays that at every append. So does the pool's checkout: the
        connection is kept from the first call until :meth:`close`. Same
        guarantees as :meth:`run`: the same thread and transaction mode, an
        exception rolls back and propagates, driver errors (``fn``'s should be
        too) surface as Core's (``IntegrityError``, ``OperationalError``), and
        a caller cancelled before the thread took the call up means it never runs.
        """
        assert self._thread is not None, "run_sqlite needs the sqlite:// engine"
        # What run_in_executor does, without its second future and the callbacks
        # chaining the two: the thread settles the asyncio future itself.
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()
        job = self._thread.submit(self._run_sqlite_job, loop, done, fn, args)
        try:
            return await done
        except asyncio.CancelledError:
            job.cancel()  # not started yet: it never runs (started: it completes)
            raise

    def _run_sqlite_job(
        self,
        loop: asyncio.AbstractEventLoop,
        done: asyncio.Future[T],
        fn: Callable[..., T],
        args: tuple[Any, ...],
    ) -> None:
        try:
            result = self._run_sqlite_sync(fn, args)
        except BaseException as exc:
            _call_threadsafe(loop, _set_exception, done, exc)
        else:
            _call_threadsafe(loop, _set_result, done, result)

    def _run_sqlite_sync(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        assert isinstance(self.engine, Engine)
        dialect = self.engine.dialect
        if self._direct is None:  # kept checked out: a pool round trip per commit is not free
            self._direct = self.engine.raw_connection()
        dbapi: Any = self._direct.dbapi_connection
        with _as_core_errors(dialect, "BEGIN IMMEDIATE"):
            dbapi.execute("BEGIN IMMEDIATE")
        try:
            result = fn(dbapi, dialect, *args)
            with _as_core_errors(dialect, "COMMIT"):
                dbapi.execute("COMMIT")
        except BaseException:
            if dbapi.in_transaction:
                dbapi.execute("ROLLBACK")
            raise
        return result

    def _release_direct(self) -> None:
        if self._direct is not None:
            self._direct.close()
            self._direct = None

    @contextlib.asynccontextmanager
    async def advisory_lock(self, name: str) -> AsyncIterator[None]:
        """Hold PostgreSQL's advisory lock ``name`` (per schema) for the block: processes
        that start together then do ``name``'s work one after the other.

        On SQLite there is nothing to hold: writers already queue (``BEGIN
        IMMEDIATE``), and only one process uses the file.
        """
        if not isinstance(self.engine, AsyncEngine) or self.dialect != "postgresql":
            yield
            return
        key = "hashtext(:name || '.' || current_schema())"
        async with self.engine.connect() as conn:
            await conn.execute(text(f"SELECT pg_advisory_lock({key})"), {"name": name})
            await conn.commit()
            try:
                yield
            finally:
                await conn.execute(text(f"SELECT pg_advisory_unlock({key})"), {"name": name})
                await conn.commit()

    async def close(self) -> None:
        """Release the engine (and the SQLite thread). Closing twice does nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._dispose()
        finally:
            if self.process_lock is not None:
                self.process_lock.release()

    async def _dispose(self) -> None:
        if isinstance(self.engine, AsyncEngine):
            await self.engine.dispose()
            return
        assert self._thread is not None
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._release_direct)
        await loop.run_in_executor(self._thread, self.engine.dispose)
        self._thread.shutdown(wait=True)


class _Attempt:
    """Runs a unit of work on PostgreSQL and tells whether it failed on a dropped
    connection before its BEGIN was acknowledged: before anything it did reached
    the server, so running it again can neither lose nor repeat a write.

    asyncpg sends the BEGIN with the unit's first statement and records the
    transaction status of each answer it reads; it keeps the last one when the
    connection is lost. "Not in a transaction" after the failure means the
    server never acknowledged this unit's BEGIN (the previous unit's COMMIT was
    the last answer). Reading it costs no round trip.
    """

    __slots__ = ("args", "dropped_before_begin", "fn")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args
        self.dropped_before_begin = False

    def __call__(self, conn: Connection) -> Any:
        driver = conn.connection.driver_connection
        try:
            return self.fn(conn, *self.args)
        except DBAPIError as exc:
            self.dropped_before_begin = (
                exc.connection_invalidated and driver is not None and not driver.is_in_transaction()
            )
            raise


def _call_threadsafe(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
        loop.call_soon_threadsafe(fn, *args)


def _set_result(done: asyncio.Future[T], result: T) -> None:
    if not done.cancelled():
        done.set_result(result)


def _set_exception(done: asyncio.Future[Any], exc: BaseException) -> None:
    if not done.cancelled():
        done.set_exception(exc)


@contextlib.contextmanager
def _as_core_errors(dialect: Dialect, statement: str) -> Iterator[None]:
    """A driver error raised as Core raises it, which is what callers catch."""
    base = dialect.loaded_dbapi.Error
    try:
        yield
    except base as exc:
        raise DBAPIError.instance(statement, None, exc, base, dialect=dialect) from exc


async def open_database(
    url: str,
    *,
    busy_timeout_ms: int = 5000,
    pg_schema: str | None = None,
    single_process: bool = False,
) -> Database:
    """Connect, bring the schema up to date, and refuse a database from the future.

    ``single_process``: the bot itself opens its store this way; on a SQLite
    file another bot process already uses, it is refused (see
    :mod:`core.store.single_process`). Tools reading the store do not ask.

    Raises:
        StoreError: the URL is unusable, the server cannot be reached, or
            another bot process runs on this SQLite file.
        SchemaVersionError: the database is newer than this code.
    """
    lock = _process_lock(url) if single_process else None
    if lock is not None:
        lock.acquire()
    try:
        engine = create_engine(url, busy_timeout_ms=busy_timeout_ms, pg_schema=pg_schema)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    database = Database(engine)
    database.process_lock = lock
    try:
        await migrate(database)
    except StoreError:
        await database.close()
        raise
    except (SQLAlchemyError, OSError) as exc:
        await database.close()
        raise StoreError(
            f"cannot open the store at {redacted_url(url)}: {type(exc).__name__}"
        ) from exc
    return database


def _process_lock(url: str) -> ProcessLock | None:
    parsed = parse_url(url)
    if not parsed.drivername.startswith("sqlite"):
        return None
    name = parsed.database or ""
    if name in ("", ":memory:") or name.startswith("file:"):
        return None
    return ProcessLock(Path(name).absolute())
