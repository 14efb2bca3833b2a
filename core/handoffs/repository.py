"""The ``handoffs`` table: units of work for :meth:`core.store.Database.run`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, delete, select

from core.handoffs.activation import HandoffRecord
from core.store.tables import HandoffRow, table_of

__all__ = [
    "list_for_session",
    "list_taken_over",
    "list_with_status",
    "replace_session",
    "upsert",
]

_T = table_of(HandoffRow)


def _values(record: HandoffRecord) -> dict[str, Any]:
    return record.model_dump()


def upsert(conn: Connection, record: HandoffRecord) -> None:
    """Write one handoff's current state, replacing the row it had."""
    conn.execute(delete(_T).where(_T.c.id == record.id))
    conn.execute(_T.insert().values(**_values(record)))


def replace_session(conn: Connection, session_key: str, records: Sequence[HandoffRecord]) -> None:
    """Make the session's rows exactly ``records``, in one transaction."""
    conn.execute(delete(_T).where(_T.c.session_key == session_key))
    ids = [record.id for record in records]
    if ids:  # a row filed under another session must not block the rebuild
        conn.execute(delete(_T).where(_T.c.id.in_(ids)))
        conn.execute(_T.insert(), [_values(record) for record in records])


def list_for_session(conn: Connection, session_key: str) -> list[HandoffRecord]:
    """The session's handoffs, oldest offer first."""
    rows = conn.execute(
        select(_T).where(_T.c.session_key == session_key).order_by(_T.c.created_at, _T.c.id)
    )
    return [HandoffRecord.model_validate(dict(row._mapping)) for row in rows]


def list_with_status(conn: Connection, status: str) -> list[HandoffRecord]:
    """Every session's handoffs in ``status``, oldest offer first."""
    rows = conn.execute(select(_T).where(_T.c.status == status).order_by(_T.c.created_at, _T.c.id))
    return [HandoffRecord.model_validate(dict(row._mapping)) for row in rows]


def list_taken_over(conn: Connection, session_keys: Sequence[str]) -> list[HandoffRecord]:
    """The accepted and completed handoffs of ``session_keys``, in one query: which agent
    took each of those sessions over, without loading their logs."""
    if not session_keys:
        return []
    rows = conn.execute(
        select(_T)
        .where(_T.c.session_key.in_(list(session_keys)))
        .where(_T.c.status.in_(("accepted", "completed")))
        .order_by(_T.c.created_at, _T.c.id)
    )
    return [HandoffRecord.model_validate(dict(row._mapping)) for row in rows]
