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
- PostgreSQL (and ``sqlite+aiosqlite://``): on the asyncio engine, through
  ``AsyncConnection.run_sync``, which drives the same function over the
  async driver without a thread.

Either way the function runs inside ``BEGIN ... COMMIT``; an exception rolls
back and propagates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from core.errors import StoreError
from core.store.engine import create_engine, redacted_url
from core.store.migrations import migrate

__all__ = ["Database", "open_database"]

T = TypeVar("T")


class Database:
    """Owns the engine (and, for SQLite, its thread); runs units of work."""

    def __init__(self, engine: Engine | AsyncEngine) -> None:
        self.engine = engine
        self._closed = False
        self._thread: ThreadPoolExecutor | None = None
        if isinstance(engine, Engine):
            self._thread = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="threadbound-sqlite"
            )

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    async def run(self, fn: Callable[..., T], /, *args: Any) -> T:
        """Run ``fn(connection, *args)`` in one transaction and return its result.

        Cancelling the caller does not stop a unit of work already handed to
        the SQLite thread; callers that mirror a write in memory shield it.
        """
        if isinstance(self.engine, AsyncEngine):
            async with self.engine.begin() as conn:
                return await conn.run_sync(fn, *args)
        assert self._thread is not None
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._run_sync, fn, args)

    def _run_sync(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        assert isinstance(self.engine, Engine)
        with self.engine.begin() as conn:
            return fn(conn, *args)

    async def close(self) -> None:
        """Release the engine (and the SQLite thread). Closing twice does nothing."""
        if self._closed:
            return
        self._closed = True
        if isinstance(self.engine, AsyncEngine):
            await self.engine.dispose()
            return
        assert self._thread is not None
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self.engine.dispose)
        self._thread.shutdown(wait=True)


async def open_database(
    url: str, *, busy_timeout_ms: int = 5000, pg_schema: str | None = None
) -> Database:
    """Connect, bring the schema up to date, and refuse a database from the future.

    Raises:
        StoreError: the URL is unusable or the server cannot be reached.
        SchemaVersionError: the database is newer than this code.
    """
    database = Database(create_engine(url, busy_timeout_ms=busy_timeout_ms, pg_schema=pg_schema))
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
