"""The store as one object: an engine, a session factory, and a checked schema."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from core.errors import StoreError
from core.store.engine import create_engine, redacted_url
from core.store.migrations import migrate

__all__ = ["Database", "open_database"]


class Database:
    """Owns the engine; hands out sessions whose commit is the caller's decision.

    ``expire_on_commit=False`` because records leave the session as frozen
    values right after commit, and an expired attribute would mean a hidden
    query on an async session.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """A session inside one transaction: committed on exit, rolled back on error."""
        async with self._sessions() as session, session.begin():
            yield session

    async def close(self) -> None:
        await self.engine.dispose()


async def open_database(
    url: str, *, busy_timeout_ms: int = 5000, pg_schema: str | None = None
) -> Database:
    """Connect, bring the schema up to date, and refuse a database from the future.

    Raises:
        StoreError: the URL is unusable or the server cannot be reached.
        SchemaVersionError: the database is newer than this code.
    """
    engine = create_engine(url, busy_timeout_ms=busy_timeout_ms, pg_schema=pg_schema)
    try:
        await migrate(engine)
    except StoreError:
        await engine.dispose()
        raise
    except (SQLAlchemyError, OSError) as exc:
        await engine.dispose()
        raise StoreError(
            f"cannot open the store at {redacted_url(url)}: {type(exc).__name__}"
        ) from exc
    return Database(engine)
