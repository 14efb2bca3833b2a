"""Finishing, in Matrix, a persona message its thread is still owed.

The :class:`~core.transcript.TranscriptSink` of one account. A message is recorded
(:func:`owed_content`: its whole text and the size of its parts; the parts' event ids
once sent) before its final text is posted. When a process died before the thread
showed it, this compares each part with what its event shows now (the newest
``m.replace`` edit by the bot, else the event itself) and changes only what differs:
an edit of a part that shows less, and for a part no recorded event holds, first a
look through the speaker's own recent messages in the room for one a dead process
posted in that thread showing the part or its start, then a post under the same
transaction id the stream gave that part (:mod:`adapters.matrix.streaming`): a post a
dead process had under way is handed back by the homeserver, not made twice. Run
twice, it changes nothing the second time.

The speaker is the presenter's (:mod:`adapters.matrix.personas`): the persona's own
user where an application service gives it one, else the bot under the persona's
name. Only the speaker may edit its events, and only its edits count.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mautrix.api import Method, Path
from mautrix.client import Client
from mautrix.types import EventID, RoomID

from adapters.matrix.completions import MatrixCompletionSink
from adapters.matrix.errors import MATRIX_FAILURES, matrix_said
from adapters.matrix.ids import CHANNEL
from adapters.matrix.personas import PersonaVoices
from adapters.matrix.replies import txn_id
from adapters.matrix.sending import EventSender, MatrixSender
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


@dataclass(frozen=True, slots=True)
class _Speaker:
    """Who sent the message's parts: what sends as them, the name their text starts
    with (None: the persona speaks as itself), and their user id."""

    sender: EventSender
    name: str | None
    user_id: str


class MatrixTranscriptSink:
    """Makes a bound thread show a recorded persona message, changing only what differs."""

    channel = CHANNEL

    def __init__(
        self,
        client: Client,
        sender: MatrixSender,
        earlier: MatrixCompletionSink,
        *,
        voices: PersonaVoices | None = None,
    ) -> None:
        """``voices``: who speaks for each persona, as the presenters have it (none: the
        bot, under the persona's name)."""
        self._client = client
        self._sender = sender
        self._earlier = earlier
        self._voices = voices

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
        speaker = await self._speaker(binding, room_id)
        sent = [p.message_id for p in message.sent]
        changed = 0
        for index, part in enumerate(parts_of(message)):
            wanted = message_content(part, name=speaker.name)
            if index < len(sent):
                if await self._shows(room_id, sent[index], speaker) != wanted["body"]:
                    await self._edit(room_id, sent[index], wanted, speaker)
                    changed += 1
                continue
            found = await self._find(room_id, root, wanted["body"], speaker, after=set(sent))
            if found is None:
                # the stream's own transaction for this part: a post of it a dead
                # process had under way is handed back, showing what it was sent with
                event_id = await speaker.sender.send(
                    room_id,
                    wanted | {"m.relates_to": _in_thread(root)},
                    txn=txn_id("stream", message.key, str(index)),
                )
                found = (event_id, await self._shows(room_id, event_id, speaker))
                changed += 1
            event_id, shows = found
            if shows != wanted["body"]:
                await self._edit(room_id, event_id, wanted, speaker)
                changed += 1
            sent.append(event_id)
        if changed:
            _log.info(
                "transcript.finished",
                binding_id=binding.binding_id,
                key=message.key,
                changed=changed,
            )
        path = "bot" if speaker.name is not None else "persona"
        return message.showing(tuple(SentPart(event_id, path) for event_id in sent))

    async def _speaker(self, binding: SessionBindingRecord, room_id: str) -> _Speaker:
        """Who speaks for the binding's persona in ``room_id``, as its presenter has it.

        Raises:
            DeliveryError: the persona's user could not be made to speak there.
        """
        persona = binding.meta.persona
        if self._voices is None:
            return _Speaker(self._sender, persona.shown_name, str(self._client.mxid))
        voice = await self._voices.voice(persona, room_id)
        return _Speaker(voice.sender, voice.name, voice.user_id)

    async def _edit(
        self, room_id: str, event_id: str, wanted: dict[str, Any], speaker: _Speaker
    ) -> None:
        content = edit_content(event_id, wanted)
        await speaker.sender.send(room_id, content, txn=uuid.uuid4().hex)

    async def _shows(self, room_id: str, event_id: str, speaker: _Speaker) -> str | None:
        """The body the event shows now: its newest edit by the speaker, else its own."""
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
        newest = [e for e in edits.get("chunk") or () if e.get("sender") == speaker.user_id]
        if newest:
            return _body((newest[0].get("content") or {}).get("m.new_content") or {})
        return _body(event.get("content") or {})

    async def _find(
        self, room_id: str, root: str, wanted: str, speaker: _Speaker, *, after: set[str]
    ) -> tuple[str, str | None] | None:
        """The speaker's own message in the thread, newer than the parts known, showing
        ``wanted`` or its start: one a dead process posted without recording it."""
        for event in await self._earlier.own_messages(room_id, sender=speaker.user_id):
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


def _in_thread(root: str) -> dict[str, Any]:
    return {
        "rel_type": "m.thread",
        "event_id": root,
        "is_falling_back": True,
        "m.in_reply_to": {"event_id": root},
    }


def _body(content: Mapping[str, Any]) -> str | None:
    body = content.get("body")
    return body if isinstance(body, str) else None
