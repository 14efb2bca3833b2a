"""Queries of the ``inbox``, ``inbox_cursors`` and ``inbox_positions`` tables, each a unit of
work for ``Database.run``.

Rows become :class:`~core.inbox.records.InboxMessage` values here and nowhere
else. Every function is portable SQL (``ON CONFLICT`` reads the same on
SQLite and PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, func, select, update
from sqlalchemy.dialects import postgresql, sqlite

from core.bindings.records import ConversationRef
from core.inbox.records import FileRef, InboxMessage, InboxPress
from core.store.tables import InboxCursorRow, InboxPositionRow, InboxRow, table_of

__all__ = [
    "advance_cursors",
    "cursors",
    "mark",
    "mark_many",
    "note_failure",
    "pending",
    "pending_conversations",
    "pending_presses",
    "position",
    "record_message",
    "record_messages",
    "record_press",
    "save_position",
]

_I = table_of(InboxRow)
_C = table_of(InboxCursorRow)
_P = table_of(InboxPositionRow)
_INSERTS: dict[str, Any] = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}
"""``INSERT … ON CONFLICT``: spelled alike on both dialects, built by each one's own insert."""


def _message_row(message: InboxMessage, now: datetime) -> dict[str, Any]:
    ref = message.conversation
    body: dict[str, Any] = {"text": message.text}
    if message.files:
        body["files"] = [
            {"name": f.name, "url": f.url, "size": f.size, "content_type": f.content_type}
            for f in message.files
        ]
    if message.mode is not None:
        body["mode"] = message.mode
    return {
        "channel": ref.channel,
        "account_id": ref.account_id,
        "item_id": message.item_id,
        "kind": "message",
        "conversation_id": ref.conversation_id,
        "parent_conversation_id": ref.parent_conversation_id,
        "seq": message.seq,
        "author_id": message.author_id,
        "author_name": (message.author_name or "")[:200] or None,
        "body": body,
        "source": message.source,
        "status": "pending",
        "attempts": 0,
        "notified": False,
        "received_at": message.received_at or now,
    }


def _message(row: Any) -> InboxMessage:
    body = row.body or {}
    return InboxMessage(
        conversation=_ref(row),
        item_id=row.item_id,
        seq=int(row.seq),
        text=str(body.get("text") or ""),
        author_id=row.author_id,
        author_name=row.author_name,
        files=tuple(
            FileRef(f["name"], f["url"], int(f["size"]), f.get("content_type"))
            for f in body.get("files") or ()
        ),
        mode=body.get("mode"),
        source=row.source,
        received_at=row.received_at,
        attempts=int(row.attempts),
        notified=bool(row.notified),
    )


def record_message(
    conn: Connection, message: InboxMessage, now: datetime, *, advance: bool = False
) -> str | None:
    """Insert the message unless its id is known; None when new, else the known row's status.

    ``advance``: the conversation was read without a gap up to this message (it
    arrived live), so its cursor moves up to it in the same transaction.
    """
    insert = _INSERTS[conn.dialect.name](_I).values(**_message_row(message, now))
    inserted = conn.execute(insert.on_conflict_do_nothing())
    if advance:
        ref = message.conversation
        advance_cursors(conn, ref.channel, ref.account_id, {ref.conversation_id: message.seq}, now)
    if inserted.rowcount == 1:
        return None
    status = conn.execute(
        select(_I.c.status).where(*_key(message.conversation, message.item_id))
    ).scalar()
    return str(status) if status is not None else "pending"


def record_messages(
    conn: Connection, messages: list[InboxMessage], now: datetime
) -> list[InboxMessage]:
    """Insert each message unless its id is known; the ones that were new."""
    insert = _INSERTS[conn.dialect.name]
    return [
        message
        for message in messages
        if conn.execute(
            insert(_I).values(**_message_row(message, now)).on_conflict_do_nothing()
        ).rowcount
        == 1
    ]


def record_press(conn: Connection, press: InboxPress, now: datetime) -> bool:
    """Insert the press unless its id is known; True when it is new."""
    ref = press.conversation
    row = {
        "channel": ref.channel,
        "account_id": ref.account_id,
        "item_id": press.item_id,
        "kind": "press",
        "conversation_id": ref.conversation_id,
        "parent_conversation_id": ref.parent_conversation_id,
        "seq": press.seq,
        "author_id": press.author_id,
        "author_name": (press.author_name or "")[:200] or None,
        "body": {"action": press.action, "target": press.target, "message_id": press.message_id},
        "source": "live",
        "status": "pending",
        "attempts": 0,
        "notified": False,
        "received_at": press.received_at or now,
    }
    inserted = conn.execute(_INSERTS[conn.dialect.name](_I).values(**row).on_conflict_do_nothing())
    return bool(inserted.rowcount == 1)


def pending_presses(conn: Connection, channel: str, account_id: str) -> list[InboxPress]:
    """Presses recorded but never finished: a process died while acting on them."""
    rows = conn.execute(
        select(_I).where(*_waiting(channel, account_id, "press")).order_by(_I.c.seq)
    )
    return [
        InboxPress(
            conversation=_ref(row),
            item_id=row.item_id,
            seq=int(row.seq),
            action=str(row.body.get("action")),
            target=str(row.body.get("target")),
            message_id=row.body.get("message_id"),
            author_id=row.author_id,
            author_name=row.author_name,
            received_at=row.received_at,
        )
        for row in rows
    ]


def _ref(row: Any) -> ConversationRef:
    return ConversationRef(
        channel=row.channel,
        account_id=row.account_id,
        conversation_id=row.conversation_id,
        parent_conversation_id=row.parent_conversation_id,
    )


def _waiting(channel: str, account_id: str, kind: str) -> tuple[Any, ...]:
    """The account's rows of ``kind`` still pending."""
    return (
        _I.c.channel == channel,
        _I.c.account_id == account_id,
        _I.c.kind == kind,
        _I.c.status == "pending",
    )


def _key(ref: ConversationRef, item_id: str) -> tuple[Any, ...]:
    return (_I.c.channel == ref.channel, _I.c.account_id == ref.account_id, _I.c.item_id == item_id)


def pending(conn: Connection, ref: ConversationRef) -> list[InboxMessage]:
    """The conversation's messages not handed over yet, oldest first."""
    rows = conn.execute(
        select(_I)
        .where(
            *_waiting(ref.channel, ref.account_id, "message"),
            _I.c.conversation_id == ref.conversation_id,
        )
        .order_by(_I.c.seq)
    )
    return [_message(row) for row in rows]


def pending_conversations(conn: Connection, channel: str, account_id: str) -> list[ConversationRef]:
    """Every conversation of the account with a message still to hand over."""
    rows = conn.execute(
        select(_I.c.conversation_id, func.max(_I.c.parent_conversation_id))
        .where(*_waiting(channel, account_id, "message"))
        .group_by(_I.c.conversation_id)
    )
    return [
        ConversationRef(
            channel=channel,
            account_id=account_id,
            conversation_id=conversation_id,
            parent_conversation_id=parent,
        )
        for conversation_id, parent in rows
    ]


def mark(conn: Connection, ref: ConversationRef, item_id: str, status: str, now: datetime) -> None:
    """Close a message: ``done`` (in the session's log) or ``dropped`` (nobody to give it to)."""
    conn.execute(
        update(_I).where(*_key(ref, item_id)).values(status=status, done_at=now, attempted_at=now)
    )


def mark_many(
    conn: Connection, ref: ConversationRef, statuses: Mapping[str, str], now: datetime
) -> None:
    """:func:`mark` for several messages of one conversation, in one go."""
    for status in set(statuses.values()):
        ids = [item_id for item_id, wanted in statuses.items() if wanted == status]
        conn.execute(
            update(_I)
            .where(
                _I.c.channel == ref.channel,
                _I.c.account_id == ref.account_id,
                _I.c.item_id.in_(ids),
            )
            .values(status=status, done_at=now, attempted_at=now)
        )


def note_failure(
    conn: Connection, ref: ConversationRef, item_id: str, error: str, now: datetime
) -> None:
    """One more failed attempt; the author is counted as told (the caller tells them)."""
    conn.execute(
        update(_I)
        .where(*_key(ref, item_id))
        .values(attempts=_I.c.attempts + 1, error=error[:2000], notified=True, attempted_at=now)
    )


def cursors(
    conn: Connection, channel: str, account_id: str, conversation_ids: Iterable[str]
) -> dict[str, int | None]:
    """How far each conversation was read without a gap.

    A conversation never read since it was bound is left out; None marks a
    binding older than the inbox (see :class:`~core.store.tables.InboxCursorRow`).
    """
    found: dict[str, int | None] = {}
    for chunk in _chunks(list(conversation_ids), 500):
        for conversation_id, last in conn.execute(
            select(_C.c.conversation_id, _C.c.last_seq).where(
                _C.c.channel == channel,
                _C.c.account_id == account_id,
                _C.c.conversation_id.in_(chunk),
            )
        ):
            found[conversation_id] = None if last is None else int(last)
    return found


def advance_cursors(
    conn: Connection, channel: str, account_id: str, seen: Mapping[str, int], now: datetime
) -> None:
    """Move each conversation's cursor up to ``seen`` (never back)."""
    if not seen:
        return
    insert = _INSERTS[conn.dialect.name](_C)
    upsert = insert.on_conflict_do_update(
        index_elements=[_C.c.channel, _C.c.account_id, _C.c.conversation_id],
        set_={"last_seq": insert.excluded.last_seq, "updated_at": insert.excluded.updated_at},
        where=and_(
            insert.excluded.last_seq.is_not(None),
            (_C.c.last_seq.is_(None)) | (_C.c.last_seq < insert.excluded.last_seq),
        ),
    )
    conn.execute(
        upsert,
        [
            {
                "channel": channel,
                "account_id": account_id,
                "conversation_id": conversation_id,
                "last_seq": seq,
                "updated_at": now,
            }
            for conversation_id, seq in seen.items()
        ],
    )


def position(conn: Connection, channel: str, account_id: str) -> str | None:
    """Where the account's event stream was read up to; None before its first save."""
    found = conn.execute(
        select(_P.c.position).where(_P.c.channel == channel, _P.c.account_id == account_id)
    ).scalar()
    return None if found is None else str(found)


def save_position(
    conn: Connection, channel: str, account_id: str, token: str, now: datetime
) -> None:
    """Keep ``token`` as the account's position (the channel's tokens are opaque: the
    newest saved is the one resumed from)."""
    insert = _INSERTS[conn.dialect.name](_P)
    conn.execute(
        insert.values(
            channel=channel, account_id=account_id, position=token, updated_at=now
        ).on_conflict_do_update(
            index_elements=[_P.c.channel, _P.c.account_id],
            set_={"position": insert.excluded.position, "updated_at": insert.excluded.updated_at},
        )
    )


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
