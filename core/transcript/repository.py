"""The ``thread_messages`` table's queries: units of work for ``Database.run``.

Rows become :class:`~core.transcript.records.ThreadMessage` values here and
nowhere else. ``INSERT … ON CONFLICT`` reads the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite

from core.store.tables import ThreadMessageRow, table_of
from core.transcript.records import SentPart, ThreadMessage

__all__ = ["owed", "save", "settle", "with_open_calls"]

_T = table_of(ThreadMessageRow)
_INSERTS: dict[str, Any] = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}


def _values(message: ThreadMessage, now: datetime) -> dict[str, Any]:
    return {
        "key": message.key,
        "binding_id": message.binding_id,
        "session_key": message.session_key,
        "turn_id": message.turn_id,
        "content": dict(message.content),
        "sent": [[part.message_id, part.path] for part in message.sent],
        "open_calls": list(message.open_calls),
        "shown": message.shown,
        "updated_at": now,
    }


def _message(row: Any) -> ThreadMessage:
    return ThreadMessage(
        key=row.key,
        binding_id=row.binding_id,
        session_key=row.session_key,
        turn_id=row.turn_id,
        content=row.content or {},
        sent=tuple(SentPart(str(m), str(p)) for m, p in row.sent or ()),
        open_calls=tuple(row.open_calls or ()),
        shown=bool(row.shown),
        updated_at=row.updated_at,
    )


def save(conn: Connection, message: ThreadMessage, now: datetime) -> None:
    """Insert the message, or replace what its row says."""
    values = _values(message, now)
    insert = _INSERTS[conn.dialect.name](_T).values(**values)
    conn.execute(
        insert.on_conflict_do_update(
            index_elements=[_T.c.key], set_={k: v for k, v in values.items() if k != "key"}
        )
    )


def settle(
    conn: Connection,
    shown: Iterable[ThreadMessage],
    ended: Collection[str],
    now: datetime,
) -> None:
    """Each message is shown: one with open lines is kept, as it shows now and where (a
    later edit of a line finds its parts), any other deleted. The rows of ``ended``
    bindings go: nothing can be shown in their threads any more."""
    shown = list(shown)
    if ended:
        conn.execute(delete(_T).where(_T.c.binding_id.in_(list(ended))))
    gone = [m.key for m in shown if not m.open_calls]
    if gone:
        conn.execute(delete(_T).where(_T.c.key.in_(gone)))
    for message in shown:
        if message.open_calls and message.binding_id not in ended:
            conn.execute(
                update(_T)
                .where(_T.c.key == message.key)
                .values(
                    content=dict(message.content),
                    sent=[[part.message_id, part.path] for part in message.sent],
                    open_calls=list(message.open_calls),
                    shown=True,
                    updated_at=now,
                )
            )


def owed(conn: Connection, binding_ids: Collection[str] | None) -> list[ThreadMessage]:
    """The messages not known to be shown, oldest first; of ``binding_ids`` only, if given."""
    query = select(_T).where(_T.c.shown.is_(False))
    if binding_ids is not None:
        query = query.where(_T.c.binding_id.in_(list(binding_ids)))
    return [_message(row) for row in conn.execute(query.order_by(_T.c.updated_at, _T.c.key))]


def with_open_calls(conn: Connection, binding_id: str) -> list[ThreadMessage]:
    """The binding's messages that hold a line still open (few: one per waiting call)."""
    query = select(_T).where(_T.c.binding_id == binding_id).order_by(_T.c.updated_at, _T.c.key)
    return [m for m in map(_message, conn.execute(query)) if m.open_calls]
