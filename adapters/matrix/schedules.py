"""What the scheduler posts in Matrix: the :class:`~core.scheduler.runner.ScheduleChannel`
of one account.

A run's line in a bound thread is posted by the bot in that thread; a line in a room (a
room job's run, a paused job's notice to its owner) in the room's main timeline,
mentioning only the owner it names (``m.mentions``). A room the bot was removed from
is gone: the scheduler then stops posting there.
"""

from __future__ import annotations

import contextlib
import uuid
from datetime import datetime

from mautrix.api import Method, Path
from mautrix.client import Client
from mautrix.types import RoomID

from adapters.matrix.completions import MatrixCompletionSink, bot_content, room_and_thread
from adapters.matrix.errors import MATRIX_FAILURES
from adapters.matrix.ids import CHANNEL
from adapters.matrix.sending import MatrixSender
from core.bindings.records import ConversationRef, SessionBindingRecord
from core.errors import DeliveryError
from core.scheduler.runner import ConversationGone

__all__ = ["MatrixSchedules"]

GONE_CODES = frozenset({403, 404})
"""A send refused so: the bot is no longer in the room (or it is no more)."""


class MatrixSchedules:
    """The scheduler's port for one Matrix account."""

    channel = CHANNEL

    def __init__(self, client: Client, sender: MatrixSender, earlier: MatrixCompletionSink) -> None:
        self._client = client
        self._sender = sender
        self._earlier = earlier
        """Whose look-up of a post a dead process may have made this one uses too."""

    @property
    def account_id(self) -> str:
        return self._earlier.account_id

    async def tell_thread(
        self, binding: SessionBindingRecord, text: str, /, *, since: datetime | None = None
    ) -> None:
        if since is not None:  # a run a dead process was starting: it may have said it
            with contextlib.suppress(DeliveryError):  # cannot look: the send below decides
                if await self._earlier.find_posted(binding.conversation, text, since):
                    return
        try:
            await self._earlier.send(binding.conversation, text)
        except DeliveryError as exc:
            if exc.code in GONE_CODES:
                raise ConversationGone(str(exc)) from exc
            raise

    async def tell_channel(
        self, conversation: ConversationRef, text: str, /, *, mention: str | None = None
    ) -> None:
        room_id, thread = room_and_thread(conversation)
        content = bot_content(text, thread=thread)
        if mention is not None:
            content["m.mentions"] = {"user_ids": [mention]}
        try:
            await self._sender.send(room_id, content, txn=uuid.uuid4().hex)
        except DeliveryError as exc:
            if exc.code in GONE_CODES:
                raise ConversationGone(f"room {room_id} is gone for the bot") from exc
            raise

    async def is_member(self, scope: str | None, user_id: str, /) -> bool:
        """Whether ``user_id`` is joined to the room ``scope`` (a Matrix scope is a room);
        True when it cannot be told."""
        if scope is None or not scope.startswith("!"):
            return True
        try:
            joined = await self._client.api.request(
                Method.GET, Path.v3.rooms[RoomID(scope)].joined_members
            )
        except MATRIX_FAILURES:
            return True  # the homeserver could not say: the run goes ahead
        return user_id in (joined.get("joined") or {})

    def seq_at(self, moment: datetime, /) -> int:
        """As the inbox orders a room's messages: microseconds since the epoch."""
        return int(moment.timestamp() * 1000) * 1000
