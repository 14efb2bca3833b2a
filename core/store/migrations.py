"""The schema's history as an explicit, versioned list of migrations.

Why not Alembic: the schema is small, must run identically on SQLite and
PostgreSQL, and must be checked at every start-up without a separate command.
A list of numbered steps, each run in its own transaction together with its
``schema_version`` row, gives that with nothing to configure.

Rules for adding a step: append, never edit or reorder a released step; a step
creates or alters only the tables it names (never ``create_all``), so replaying
the list on an empty database always yields the current schema.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import BigInteger, Connection, func, inspect, literal, select, text, update

from core.clock import utcnow
from core.errors import SchemaVersionError
from core.store.tables import (
    AcpProcessRow,
    BindingRow,
    CompletionDeliveryRow,
    ConfigOverrideRow,
    HandoffRow,
    InboxCursorRow,
    InboxPositionRow,
    InboxRow,
    LeaseRow,
    ScheduledJobRow,
    ScheduledRunRow,
    SchemaVersionRow,
    SessionBranchRow,
    SessionEventRow,
    SessionHeadRow,
    SubagentRow,
    ThreadMessageRow,
    table_of,
)
from core.store.types import UTCDateTime

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Migration", "current_version", "migrate"]


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    description: str
    apply: Callable[[Connection], None]


def _v1_bindings(conn: Connection) -> None:
    table_of(BindingRow).create(conn)


def _v2_session_events(conn: Connection) -> None:
    for table in (SessionEventRow, SessionHeadRow, SessionBranchRow):
        table_of(table).create(conn)


def _v3_config_overrides(conn: Connection) -> None:
    table_of(ConfigOverrideRow).create(conn)


def _v4_handoffs(conn: Connection) -> None:
    table_of(HandoffRow).create(conn)


def _v5_subagents(conn: Connection) -> None:
    for table in (SubagentRow, CompletionDeliveryRow):
        table_of(table).create(conn)


def _v6_leases(conn: Connection) -> None:
    table_of(LeaseRow).create(conn)


def _v7_inbox(conn: Connection) -> None:
    for table in (InboxRow, InboxCursorRow):
        table_of(table).create(conn)
    # Bindings live before the inbox existed get a cursor that says "not read yet":
    # their first catch-up notes where each conversation stands instead of
    # replaying a history nobody recorded as read.
    bindings, cursors = table_of(BindingRow), table_of(InboxCursorRow)
    live = select(
        bindings.c.channel,
        bindings.c.account_id,
        bindings.c.conversation_id,
        literal(None, BigInteger).label("last_seq"),
        literal(utcnow(), UTCDateTime()).label("updated_at"),
    ).where(bindings.c.status != "ended")
    conn.execute(
        cursors.insert().from_select(
            ["channel", "account_id", "conversation_id", "last_seq", "updated_at"], live
        )
    )


def _v8_binding_scope(conn: Connection) -> None:
    """A binding's scope is a field of its own, not a ``guild_id`` key of its metadata.

    Written to run on a table of either shape: a database created before this
    step has the ``guild_id`` column (copied, then dropped); one created since
    has ``scope`` already. The key leaves every row's metadata either way.
    """
    bindings = table_of(BindingRow)
    columns = {c["name"] for c in inspect(conn).get_columns(bindings.name)}
    if "scope" not in columns:
        conn.execute(text("ALTER TABLE bindings ADD COLUMN scope VARCHAR(64)"))
    if "guild_id" in columns:
        conn.execute(
            text("UPDATE bindings SET scope = CAST(guild_id AS VARCHAR(64)) WHERE scope IS NULL")
        )
        conn.execute(text("ALTER TABLE bindings DROP COLUMN guild_id"))
    read = select(bindings.c.binding_id, bindings.c.metadata, bindings.c.scope)
    for binding_id, metadata, scope in conn.execute(read).all():
        if not isinstance(metadata, dict) or "guild_id" not in metadata:
            continue
        guild = metadata.pop("guild_id")
        values: dict[str, Any] = {"metadata": metadata}
        if scope is None and guild is not None:
            values["scope"] = str(guild)
        conn.execute(update(bindings).where(bindings.c.binding_id == binding_id).values(**values))


def _v9_event_envelopes(conn: Connection) -> None:
    """``session_events.envelope``: each event's JSON text up to its payload.

    Existing rows are left NULL rather than rewritten: the load builds the text
    of such rows as it always did, which it must do anyway for rows a process
    of the previous version appends while a rolling upgrade is under way.
    """
    columns = {c["name"] for c in inspect(conn).get_columns("session_events")}
    if "envelope" not in columns:
        conn.execute(text("ALTER TABLE session_events ADD COLUMN envelope TEXT"))


def _v10_thread_messages(conn: Connection) -> None:
    table_of(ThreadMessageRow).create(conn, checkfirst=True)  # a store rolled back by hand


def _v11_acp_processes(conn: Connection) -> None:
    """Where each bot process records its external agents' process groups while they run.

    ``checkfirst``: a store brought back to an earlier version by hand (its version
    rows removed) may keep the table; the step only makes sure it is there."""
    table_of(AcpProcessRow).create(conn, checkfirst=True)


def _v12_subagent_replies(conn: Connection) -> None:
    """``subagents.reply``: a spawn whose answer alone is posted where it was asked (the
    path while spawning threads is off), recorded like any subagent so a restart
    still posts it. Earlier rows are subagents (false)."""
    columns = {c["name"] for c in inspect(conn).get_columns("subagents")}
    if "reply" not in columns:
        default = "false" if conn.dialect.name == "postgresql" else "0"
        conn.execute(
            text(f"ALTER TABLE subagents ADD COLUMN reply BOOLEAN NOT NULL DEFAULT {default}")
        )


def _v13_scheduler(conn: Connection) -> None:
    """Scheduled jobs and their runs, each run a row claimed once."""
    for table in (ScheduledJobRow, ScheduledRunRow):
        table_of(table).create(conn, checkfirst=True)


def _v14_inbox_positions(conn: Connection) -> None:
    """Where an account's event stream was read up to (a Matrix sync token)."""
    table_of(InboxPositionRow).create(conn, checkfirst=True)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "session bindings", _v1_bindings),
    Migration(2, "session event log with head and branch projections", _v2_session_events),
    Migration(3, "runtime config overrides per scope", _v3_config_overrides),
    Migration(4, "handoffs between agents, current state", _v4_handoffs),
    Migration(5, "subagents and the completion delivery outbox", _v5_subagents),
    Migration(6, "leases: work a bot process has taken, until when", _v6_leases),
    Migration(7, "the inbox: what people said, recorded before handling; read cursors", _v7_inbox),
    Migration(8, "a binding's scope as a column, not a metadata key", _v8_binding_scope),
    Migration(9, "session events keep their JSON text up to the payload", _v9_event_envelopes),
    Migration(10, "messages a bound thread owes until they show their text", _v10_thread_messages),
    Migration(11, "external agents' process groups, until stopped", _v11_acp_processes),
    Migration(12, "subagents: a reply posted where it was asked", _v12_subagent_replies),
    Migration(13, "scheduled jobs and their runs", _v13_scheduler),
    Migration(14, "where an account's event stream was read up to", _v14_inbox_positions),
)
SCHEMA_VERSION = MIGRATIONS[-1].version

_VERSIONS = table_of(SchemaVersionRow)


class _Runner(Protocol):
    def run(self, fn: Callable[..., Any], /, *args: Any) -> Awaitable[Any]: ...

    def advisory_lock(self, name: str) -> AbstractAsyncContextManager[None]: ...


def _read_version(conn: Connection) -> int:
    if not inspect(conn).has_table(_VERSIONS.name):
        return 0
    return int(conn.execute(select(func.max(_VERSIONS.c.version))).scalar() or 0)


def _ensure_version_table(conn: Connection) -> None:
    _VERSIONS.create(conn, checkfirst=True)


def _apply(conn: Connection, step: Migration) -> None:
    # Re-check inside the step's transaction: another process may have applied it.
    if _read_version(conn) >= step.version:
        return
    step.apply(conn)
    conn.execute(
        _VERSIONS.insert().values(
            version=step.version, description=step.description, applied_at=utcnow()
        )
    )


async def current_version(database: _Runner) -> int:
    """The database's schema version; 0 for an empty database."""
    version: int = await database.run(_read_version)
    return version


async def migrate(database: _Runner) -> int:
    """Bring the database to :data:`SCHEMA_VERSION`; refuse a newer database.

    Each step commits with its ``schema_version`` row, so a crash between
    steps leaves a database at a known version that the next start finishes.
    Bot processes starting together on PostgreSQL migrate one at a time, under
    an advisory lock: the first does the work, the others find it done.
    """
    async with database.advisory_lock("threadbound.migrate"):
        await database.run(_ensure_version_table)
        found = await current_version(database)
        if found > SCHEMA_VERSION:
            raise SchemaVersionError(found, SCHEMA_VERSION)
        for step in MIGRATIONS:
            if step.version > found:
                await database.run(_apply, step)
    return SCHEMA_VERSION
