"""One streamed answer in a Matrix thread: posted once, then edited as it grows.

The first words post a message in the thread; later words edit it with ``m.replace``
relations (the new text in ``m.new_content``). The rules of a live answer are the
platforms' common ones (:class:`core.live_message.LiveMessage`): at most one edit per
``min_interval``, the text in between coalesced; an answer longer than
:data:`PART_LIMIT` continues in a new message; :meth:`MatrixStream.close` always lands
the final text whole, waiting out the interval if it must. Decided here is only what a
part's message and edit look like in a thread.

Without an application service the bot's account speaks for every persona: each
message starts with the persona's name in bold and carries it in the per-message
profile field (MSC4144), so one persona never reads as another.

Each send has its own transaction id (the stream's key, the part, the edit's number),
which a retry reuses (:class:`~adapters.matrix.sending.MatrixSender`): nothing posts
twice. What the sender still cannot deliver ends the stream with the
:class:`~core.errors.DeliveryError` in :attr:`MatrixStream.failure`; ``close()``
never raises.
"""

from __future__ import annotations

import html
from typing import Any, Final

from adapters.matrix.replies import txn_id
from adapters.matrix.sending import EventSender
from core.clock import Clock
from core.live_message import LiveMessage, PartEdit

__all__ = ["PART_LIMIT", "MatrixStream", "edit_content", "message_content"]

PART_LIMIT: Final = 3_000
"""Characters of one message. A Matrix event may hold 65,536 bytes and an edit carries
the text three times (the fallback body, ``m.new_content``'s body and its HTML): even
at six bytes a character (a control character JSON-escaped) that stays below 60,000."""
PROFILE: Final = "com.beeper.per_message_profile"
"""The per-message profile field (MSC4144): who speaks, for clients that show it."""


def message_content(text: str, *, name: str | None = None) -> dict[str, Any]:
    """An ``m.text`` saying ``text``; under ``name`` (bold, first) when the bot speaks
    for a persona."""
    escaped = html.escape(text).replace("\n", "<br>")
    if name is None:
        return {
            "msgtype": "m.text",
            "body": text,
            "format": "org.matrix.custom.html",
            "formatted_body": escaped,
        }
    return {
        "msgtype": "m.text",
        "body": f"**{name}**\n{text}",
        "format": "org.matrix.custom.html",
        "formatted_body": f"<strong>{html.escape(name)}</strong><br>{escaped}",
        PROFILE: {"id": name, "displayname": name},
    }


def edit_content(event_id: str, new: dict[str, Any]) -> dict[str, Any]:
    """An edit of ``event_id`` to show ``new``: an ``m.replace`` whose own body is the
    fallback a client without edits shows (``* `` and the new text)."""
    return {
        "msgtype": new["msgtype"],
        "body": f"* {new['body']}",
        "m.new_content": new,
        "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
    }


class _ThreadParts:
    """A :class:`~core.live_message.PartSink` posting a persona's parts in one thread."""

    def __init__(
        self, sender: EventSender, room_id: str, thread_root: str, key: str, name: str | None
    ) -> None:
        self._sender = sender
        self._room_id = room_id
        self._root = thread_root
        self._key = key
        self._name = name
        self._edits = 0

    async def post(self, index: int, text: str) -> str:
        content = message_content(text, name=self._name)
        content["m.relates_to"] = {
            "rel_type": "m.thread",
            "event_id": self._root,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": self._root},
        }
        txn = txn_id("stream", self._key, str(index))
        return await self._sender.send(self._room_id, content, txn=txn)

    async def edit(self, index: int, message_id: str, edit: PartEdit) -> str:
        self._edits += 1
        content = edit_content(message_id, message_content(edit.text, name=self._name))
        txn = txn_id("edit", self._key, str(index), str(self._edits))
        await self._sender.send(self._room_id, content, txn=txn)
        return message_id  # an edit is an event of its own; the message keeps its id


class MatrixStream(LiveMessage):
    """One streamed answer in a thread: one message per part, each edited sparingly."""

    def __init__(
        self,
        sender: EventSender,
        room_id: str,
        thread_root: str,
        /,
        *,
        key: str,
        name: str | None = None,
        clock: Clock | None = None,
        min_interval: float = 1.0,
        limit: int = PART_LIMIT,
    ) -> None:
        """``key``: unique to this answer, the root of its transaction ids."""
        super().__init__(
            _ThreadParts(sender, room_id, thread_root, key, name),
            limit=limit,
            clock=clock,
            min_interval=min_interval,
        )

    @property
    def event_ids(self) -> list[str]:
        """The first event of each message, in order."""
        return self.message_ids
