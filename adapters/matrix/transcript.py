"""Finishing, in Matrix, a persona message its thread is still owed.

The :class:`~core.transcript.TranscriptSink` of one account. A message is recorded
(:func:`owed_content`: its whole text and the size of its parts; the parts' event ids
once sent) before its final text is posted. When a process died before the thread
showed it, this compares each part with what its event shows now (the newest
``m.replace`` edit by the bot, else the event itself) and changes only what differs:
an edit of a part that shows less, and for a part no recorded event holds, first a
look through the bot's own recent messages in the room for one a dead process posted
in that thread showing the part or its start, then a new post. Run twice, it changes
nothing the second time.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from mautrix.api import Method, Path
from mautrix.client import Client
from mautrix.types import EventID, RoomID

from adapters.matrix.completions import MatrixCompletionSink
from adapters.matrix.errors import MATRIX_FAILURES, matrix_said
from adapters.matrix.ids import CHANNEL
from adapters.matrix.sending import MatrixSender
from adapters.matrix.streaming import PART_LIMIT, edit_content, message_content
from core.bindings.records import SessionBindingRecord
from core.errors import DeliveryError
from core.logging import get_logger
from core.text import split_message
from core.transcript import SentPart, ThreadMessage

__all__ = ["MatrixTranscriptSink", "owed_content", "parts_of"]

_log = get_logger("adapters.matrix")


def owed_content(text: str, *, limit: int = PART_LIMIT) -> dict[str, Any]:
    """What the transcript records of a Matrix message: its text, and its parts' size."""
    return {"text": text, "limit": limit}


def parts_of(message: ThreadMessage) -> list[str]:
    """The message's text split as its stream split it."""
    text = str(message.content.get("text") or "")
    limit = message.content.get("limit")
    return [p for p in split_message(text, limit if isinstance(limit, int) else PART_LIMIT) if p]


class MatrixTranscriptSink:
    """Makes a bound thread show a recorded persona message, changing only what differs."""

    channel = CHANNEL

    def __init__(self, client: Client, sender: MatrixSender, earlier: MatrixCompletionSink) -> None:
        self._client = client
        self._sender = sender
        self._earlier = earlier

    @property
    def account_id(self) -> str:
        return self._earlier.account_id

    async def settle(
        self, binding: SessionBindingRecord, message: ThreadMessage
    ) -> ThreadMessage | None:
        conversation = binding.conversation
        room_id = conversation.parent_conversation_id
        if not room_id:
            return None  # not a thread: nothing a Matrix presenter wrote
        root = conversation.conversation_id
        name = binding.meta.persona.shown_name
        sent = [p.message_id for p in message.sent]
        changed = 0
        for index, part in enumerate(parts_of(message)):
            wanted = message_content(part, name=name)
            if index < len(sent):
                if await self._shows(room_id, sent[index]) != wanted["body"]:
                    await self._edit(room_id, sent[index], wanted)
                    changed += 1
                continue
            found = await self._find(room_id, root, wanted["body"], after=set(sent))
            if found is None:
                wanted["m.relates_to"] = {
                    "rel_type": "m.thread",
                    "event_id": root,
                    "is_falling_back": True,
                    "m.in_reply_to": {"event_id": root},
                }
                sent.append(await self._sender.send(room_id, wanted, txn=uuid.uuid4().hex))
                changed += 1
            else:
                event_id, shows = found
                if shows != wanted["body"]:
                    await self._edit(room_id, event_id, wanted)
                    changed += 1
                sent.append(event_id)
        if changed:
            _log.info(
                "transcript.finished",
                binding_id=binding.binding_id,
                key=message.key,
                changed=changed,
            )
        return message.showing(tuple(SentPart(event_id, "bot") for event_id in sent))

    async def _edit(self, room_id: str, event_id: str, wanted: dict[str, Any]) -> None:
        await self._sender.send(room_id, edit_content(event_id, wanted), txn=uuid.uuid4().hex)

    async def _shows(self, room_id: str, event_id: str) -> str | None:
        """The body the event shows now: its newest edit by the bot, else its own."""
        api = self._client.api
        try:
            event = await api.request(
                Method.GET, Path.v3.rooms[RoomID(room_id)].event[EventID(event_id)]
            )
            edits = await api.request(
                Method.GET,
                Path.v1.rooms[RoomID(room_id)].relations[EventID(event_id)]["m.replace"],
                query_params={"dir": "b", "limit": "1"},
            )
        except MATRIX_FAILURES as exc:
            raise DeliveryError(f"could not read a message: {matrix_said(exc)}") from exc
        newest = [e for e in edits.get("chunk") or () if e.get("sender") == self._client.mxid]
        if newest:
            return _body((newest[0].get("content") or {}).get("m.new_content") or {})
        return _body(event.get("content") or {})

    async def _find(
        self, room_id: str, root: str, wanted: str, *, after: set[str]
    ) -> tuple[str, str] | None:
        """The bot's own message in the thread, newer than the parts known, showing
        ``wanted`` or its start: one a dead process posted without recording it."""
        for event in await self._earlier.own_messages(room_id):
            if str(event.get("event_id")) in after:
                break  # newest first: what comes next is older than the parts known
            content = event.get("content") or {}
            relates = content.get("m.relates_to") or {}
            if relates.get("rel_type") != "m.thread" or relates.get("event_id") != root:
                continue
            body = _body(content)
            if body and wanted.startswith(body):
                return str(event["event_id"]), body
        return None


def _body(content: Mapping[str, Any]) -> str | None:
    body = content.get("body")
    return body if isinstance(body, str) else None
