"""The schema's history as an explicit, versioned list of migrations.

Why not Alembic: the schema is small, must run identically on SQLite and
PostgreSQL, and must be checked at every start-up without a separate command.
A list of numbered steps, each run in its own transaction and recorded in
``schema_version``, gives that with nothing to configure.

Rules for adding a step: append, never edit or reorder a released step; a step
creates or alters only the tables it names (never ``create_all``), so replaying
the list on an empty database always yields the current schema.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, func, inspect, select
from sqlalchemy.ext.asyncio import AsyncEngine

from core.clock import utcnow
from core.errors import SchemaVersionError
from core.store.tables import BindingRow, SchemaVersionRow

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Migration", "current_version", "migrate"]


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    description: str
    apply: Callable[[Connection], None]


def _v1_bindings(conn: Connection) -> None:
    BindingRow.__table__.create(conn)  # type: ignore[attr-defined]


MIGRATIONS: tuple[Migration, ...] = (Migration(1, "session bindings", _v1_bindings),)
SCHEMA_VERSION = MIGRATIONS[-1].version


def _version_table_exists(conn: Connection) -> bool:
    return inspect(conn).has_table(SchemaVersionRow.__tablename__)


async def current_version(engine: AsyncEngine) -> int:
    """The database's schema version; 0 for an empty database."""
    async with engine.connect() as conn:
        if not await conn.run_sync(_version_table_exists):
            return 0
        result = await conn.execute(select(func.max(SchemaVersionRow.version)))
        return result.scalar() or 0


async def migrate(engine: AsyncEngine) -> int:
    """Bring the database to :data:`SCHEMA_VERSION`; refuse a newer database.

    Each step commits with its ``schema_version`` row, so a crash between
    steps leaves a database at a known version that the next start finishes.
    """
    async with engine.begin() as conn:
        if not await conn.run_sync(_version_table_exists):
            await conn.run_sync(
                lambda sync: SchemaVersionRow.__table__.create(sync, checkfirst=True)  # type: ignore[attr-defined]
            )
    found = await current_version(engine)
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(found, SCHEMA_VERSION)
    for step in MIGRATIONS:
        if step.version <= found:
            continue
        async with engine.begin() as conn:
            await conn.run_sync(step.apply)
            await conn.execute(
                SchemaVersionRow.__table__.insert().values(  # type: ignore[attr-defined]
                    version=step.version, description=step.description, applied_at=utcnow()
                )
            )
    return SCHEMA_VERSION
