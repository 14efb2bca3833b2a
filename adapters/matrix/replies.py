"""Replies the bot sends to a person's message: in its thread, as an ``m.in_reply_to``.

Each send carries a transaction id derived from what it is about (:func:`txn_id`):
the homeserver keeps one event per transaction id and access token, so a send
retried after a dropped connection, or repeated by a restarted bot on the same
device, posts once.
"""

from __future__ import annotations

import hashlib
from typing import Any

from mautrix.api import Method, Path
from mautrix.client import Client
from mautrix.types import RoomID

__all__ = ["reply", "reply_content", "txn_id"]


def txn_id(*parts: str) -> str:
    """The transaction id of what the bot sends about ``parts``: the same for the same."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def reply_content(text: str, *, to: str, thread: str | None = None) -> dict[str, Any]:
    """An ``m.text`` replying to event ``to``; in ``thread`` when given (a thread's reply
    keeps ``is_falling_back`` false: it answers that message, not the thread's last)."""
    relates: dict[str, Any] = {"m.in_reply_to": {"event_id": to}}
    if thread is not None:
        relates.update(rel_type="m.thread", event_id=thread, is_falling_back=False)
    return {"msgtype": "m.text", "body": text, "m.relates_to": relates}


async def reply(
    client: Client, room_id: str, text: str, *, to: str, thread: str | None, about: str
) -> None:
    """Send ``text`` as a reply to ``to``; ``about`` names why, for the transaction id.

    Raises:
        One of :data:`~adapters.matrix.errors.MATRIX_FAILURES`: the homeserver refused.
    """
    await client.api.request(
        Method.PUT,
        Path.v3.rooms[RoomID(room_id)].send["m.room.message"][txn_id(about, to, text)],
        reply_content(text, to=to, thread=thread),
    )
