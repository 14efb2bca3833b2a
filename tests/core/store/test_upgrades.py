"""Upgrading a store written by an earlier version: each step on the shape it really met.

The store is brought back to how version 6 left it (no inbox, the binding's
guild as a ``guild_id`` column and metadata key), then migrated again. Runs on
SQLite (both drivers) and PostgreSQL.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sqlalchemy import Connection, inspect, select, text

from core.sessions import SessionLog
from core.sessions.payloads import UserMessagePayload
from core.store import SCHEMA_VERSION, Database, current_version
from core.store.migrations import migrate
from core.store.tables import InboxCursorRow, table_of

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def back_to_version_6(conn: Connection) -> None:
    conn.execute(text("DELETE FROM schema_version WHERE version > 6"))
    conn.execute(text("DROP TABLE inbox"))
    conn.execute(text("DROP TABLE inbox_cursors"))
    conn.execute(text("ALTER TABLE bindings ADD COLUMN guild_id BIGINT"))
    conn.execute(text("ALTER TABLE bindings DROP COLUMN scope"))
    for binding_id, conversation, status in (("live", "100", "active"), ("old", "200", "ended")):
        conn.execute(
            text(
                "INSERT INTO bindings (binding_id, target_session_key, target_kind, channel, "
                "account_id, conversation_id, status, bound_at, idle_timeout_ms, max_age_ms, "
                "metadata, guild_id) VALUES (:b, 's', 'session', 'discord', 'main', :c, :st, "
                ":at, 0, 0, :m, 7)"
            ),
            {
                "b": binding_id,
                "c": conversation,
                "st": status,
                "at": T0.replace(tzinfo=None),
                "m": json.dumps({"guild_id": "7", "persona": {"name": "Scout"}}),
            },
        )


def bindings_now(conn: Connection) -> tuple[set[str], list[tuple[str, object, object]]]:
    columns = {c["name"] for c in inspect(conn).get_columns("bindings")}
    rows = conn.execute(
        text("SELECT binding_id, scope, metadata FROM bindings ORDER BY binding_id")
    ).all()
    return columns, [(b, s, m if isinstance(m, dict) else json.loads(m)) for b, s, m in rows]


def cursors_now(conn: Connection) -> list[tuple[str, object]]:
    cursors = table_of(InboxCursorRow)
    return [tuple(r) for r in conn.execute(select(cursors.c.conversation_id, cursors.c.last_seq))]


async def test_a_version_6_store_is_brought_up_to_date(database: Database) -> None:
    """Live bindings get a cursor that says 'not read yet' (their first catch-up replays
    nothing); every binding's guild becomes its scope, and leaves its metadata."""
    await database.run(back_to_version_6)
    assert await current_version(database) == 6

    await migrate(database)

    assert await current_version(database) == SCHEMA_VERSION
    columns, rows = await database.run(bindings_now)
    assert "scope" in columns
    assert "guild_id" not in columns
    assert rows == [
        ("live", "7", {"persona": {"name": "Scout"}}),
        ("old", "7", {"persona": {"name": "Scout"}}),
    ]
    assert await database.run(cursors_now) == [("100", None)]


def back_to_version_8(conn: Connection) -> None:
    conn.execute(text("DELETE FROM schema_version WHERE version > 8"))
    conn.execute(text("ALTER TABLE session_events DROP COLUMN envelope"))


async def test_a_version_8_store_keeps_its_sessions(database: Database) -> None:
    """Version 9 adds ``session_events.envelope``; the events stored before keep none and
    load as they did, and appends after the upgrade store theirs."""
    log = SessionLog(database)
    tree = await log.load("s")
    first = await log.append(tree, UserMessagePayload(text="before"), delivery_mode="normal")
    await log.continue_from(tree, first.node_id)
    await log.append(tree, UserMessagePayload(text="edited"), delivery_mode="normal")
    await database.run(back_to_version_8)
    assert await current_version(database) == 8

    await migrate(database)

    assert await current_version(database) == SCHEMA_VERSION
    assert await database.run(envelopes) == [None] * len(tree)
    loaded = await SessionLog(database).load("s")
    assert loaded == tree
    assert (loaded.branches, loaded.head_id) == (tree.branches, tree.head_id)
    await log.append(loaded, UserMessagePayload(text="after"), delivery_mode="normal")
    assert [e is None for e in await database.run(envelopes)] == [True] * len(tree) + [False]
    assert await SessionLog(database).load("s") == loaded


def envelopes(conn: Connection) -> list[str | None]:
    return [
        row[0] for row in conn.execute(text("SELECT envelope FROM session_events ORDER BY seq"))
    ]
