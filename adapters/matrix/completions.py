"""Posting completion announcements in Matrix: the :class:`CompletionSink` of one account.

A Matrix thread is a relation on a root message, so a session's announcement is not
posted inside its thread but in the room's main timeline, as a reply
(``m.in_reply_to``) to the thread's root: whoever reads the room sees the work end
under the message that began it, and the thread keeps the session's own words. What
the thread's presenter is still sending lands first (``before_post``), so the
announcement never overtakes the answer. A post to a conversation as the bot (a
fallback, a scheduled run's line) goes where the conversation is: a thread's in
that thread, a room's in its main timeline.

Every part is sent with a transaction id of its own that a retry reuses, so a retried
send lands once (the outbox posts each announcement once); an announcement a dead
process may have posted is looked for among the bot's own recent messages in the room
(:meth:`find_posted`). Every send carries an empty ``m.mentions``: model output pings
nobody, ``@room`` included.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, Final

from mautrix.api import Method, Path
from mautrix.client import Client
from mautrix.types import RoomID

from adapters.matrix.errors import MATRIX_FAILURES, matrix_said
from adapters.matrix.ids import CHANNEL
from adapters.matrix.sending import MatrixSender
from adapters.matrix.streaming import PART_LIMIT
from core.bindings.records import ConversationRef, SessionBindingRecord
from core.errors import DeliveryError
from core.subagents.delivery import Posted
from core.text import split_message

__all__ = ["MatrixCompletionSink", "bot_content", "room_and_thread"]

HISTORY_LIMIT: Final = 100
"""The bot's own messages looked through for a post a dead process may have made."""

BeforePost = Callable[[SessionBindingRecord], Awaitable[None]]


def room_and_thread(conversation: ConversationRef) -> tuple[str, str | None]:
    """The room a conversation is in, and its thread's root (None: the main timeline)."""
    if conversation.parent_conversation_id:
        return conversation.parent_conversation_id, conversation.conversation_id
    return conversation.conversation_id, None


def bot_content(
    text: str, *, thread: str | None = None, reply_to: str | None = None, notice: bool = False
) -> dict[str, Any]:
    """The bot's own message saying ``text``: in ``thread`` when given, a reply to
    ``reply_to`` when given; never a mention of anyone."""
    content: dict[str, Any] = {
        "msgtype": "m.notice" if notice else "m.text",
        "body": text,
        "m.mentions": {},
    }
    if thread is not None:
        content["m.relates_to"] = {
            "rel_type": "m.thread",
            "event_id": thread,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": reply_to or thread},
        }
    elif reply_to is not None:
        content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
    return content


class MatrixCompletionSink:
    """Completion announcements for one Matrix account."""

    channel = CHANNEL

    def __init__(
        self,
        account_id: str,
        client: Client,
        sender: MatrixSender,
        *,
        before_post: BeforePost | None = None,
    ) -> None:
        self._account_id = account_id
        self._client = client
        self._sender = sender
        self._before_post = before_post

    @property
    def account_id(self) -> str:
        return self._account_id

    async def post_bound(self, binding: SessionBindingRecord, content: str) -> Posted:
        """In the room's main timeline, a reply to the thread's root (a binding to a whole
        room: in that room)."""
        if self._before_post is not None:
            await self._before_post(binding)
        room_id, root = room_and_thread(binding.conversation)
        return await self._post(room_id, content, reply_to=root)

    async def post_to(self, conversation: ConversationRef, content: str) -> Posted:
        """As the bot, in the thread when ``conversation`` is one, else in the room."""
        room_id, root = room_and_thread(conversation)
        return await self._post(room_id, content, thread=root)

    async def send(self, conversation: ConversationRef, text: str, *, notice: bool = False) -> str:
        """``text`` as the bot in ``conversation`` (its thread, or the room); the first
        event's id."""
        room_id, root = room_and_thread(conversation)
        posted = await self._post(room_id, text, thread=root, notice=notice)
        return posted.message_id

    async def find_posted(
        self, conversation: ConversationRef, content: str, since: datetime
    ) -> Posted | None:
        """The bot's own message in the conversation's room, sent since ``since``, showing
        exactly the announcement's first part (the rest follow it, same transaction ids)."""
        room_id, _ = room_and_thread(conversation)
        first = _parts(content)[0]
        after = int(since.timestamp() * 1000)
        for event in await self.own_messages(room_id):
            if int(event.get("origin_server_ts") or 0) < after:
                break
            if (event.get("content") or {}).get("body") == first:
                return Posted(str(event["event_id"]), "bot")
        return None

    async def own_messages(
        self, room_id: str, *, sender: str | None = None
    ) -> list[Mapping[str, Any]]:
        """The bot's recent messages in the room (``sender``'s: one of its personas'),
        newest first, as the bot reads the room.

        Raises:
            DeliveryError: the homeserver would not let the room be read.
        """
        me = sender or str(self._client.mxid)
        filter_json = json.dumps({"senders": [me], "types": ["m.room.message"]})
        try:
            page = await self._client.api.request(
                Method.GET,
                Path.v3.rooms[RoomID(room_id)].messages,
                query_params={"dir": "b", "limit": str(HISTORY_LIMIT), "filter": filter_json},
            )
        except MATRIX_FAILURES as exc:
            raise DeliveryError(
                f"could not read room {room_id} to check for an earlier post: {matrix_said(exc)}"
            ) from exc
        return [e for e in page.get("chunk") or () if e.get("sender") == me]

    async def _post(
        self,
        room_id: str,
        content: str,
        *,
        thread: str | None = None,
        reply_to: str | None = None,
        notice: bool = False,
    ) -> Posted:
        ids = []
        for part in _parts(content):
            message = bot_content(part, thread=thread, reply_to=reply_to, notice=notice)
            ids.append(await self._sender.send(room_id, message, txn=uuid.uuid4().hex))
        return Posted(ids[0], "bot")


def _parts(content: str) -> list[str]:
    return [p for p in split_message(content, PART_LIMIT) if p] or [content]
