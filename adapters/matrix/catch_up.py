"""What people wrote in bound threads while the bot was down, said once per thread.

A restarted account resumes ``/sync`` from the position it saved, so its first batch
(the gap of a limited timeline read back) carries everything written while it was
down. For that batch every bound thread of the account is *held*: its messages are
recorded in the inbox but wait. Then each thread that received any (new to the inbox:
one recorded before is not counted again) gets the same one notice as on Discord
(:func:`core.inbox.shown.offline_text`), and is released: its messages go to the
session in the order written, after the notice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from adapters.matrix.ids import CHANNEL
from core.bindings.records import ConversationRef
from core.bindings.service import SessionBindingService
from core.errors import ThreadboundError
from core.inbox import Inbox, InboxMessage, Outcome
from core.inbox.shown import offline_text
from core.logging import get_logger

__all__ = ["OfflineNotices", "event_link"]

_log = get_logger("adapters.matrix.catch_up")

LINKS: Final = "https://matrix.to/#/"
"""matrix.to: a link to an event that every client opens."""

Say = Callable[[ConversationRef, str], Awaitable[object]]


def event_link(room_id: str, event_id: str) -> str:
    """A link to ``event_id`` in ``room_id``."""
    return f"{LINKS}{room_id}/{event_id}"


class OfflineNotices:
    """One account's catch-up after a restart: hold, count, say once, release."""

    def __init__(
        self, account_id: str, inbox: Inbox, bindings: SessionBindingService, say: Say
    ) -> None:
        self.account_id = account_id
        self._inbox = inbox
        self._bindings = bindings
        self._say = say
        self._held: list[ConversationRef] = []
        self._received: dict[tuple[str, str, str], list[InboxMessage]] = {}
        self.active = False

    def begin(self) -> None:
        """Hold every bound thread of the account for the batch being read."""
        self._held = [
            b.conversation
            for b in self._bindings.live()
            if b.conversation.channel == CHANNEL
            and b.conversation.account_id == self.account_id
            and b.status == "active"
            and self._bindings.mine(b)
        ]
        self._received = {}
        self._inbox.hold(self._held)
        self.active = True

    def received(self, message: InboxMessage, outcome: Outcome) -> None:
        """The inbox's answer for one message of the batch: new ones wait, and count (one
        a stopped process recorded but had not handed over waits too, but is no news)."""
        if self.active and outcome.kind == "held" and not outcome.recorded_before:
            self._received.setdefault(message.conversation.key, []).append(message)

    async def finish(self) -> None:
        """Say in each thread what it received, then release every thread held."""
        self.active = False
        for conversation in self._held:
            received = self._received.get(conversation.key) or []
            if received:
                await self._notice(conversation, received)
            try:
                await self._inbox.release(conversation, pending=bool(received))
            except Exception:
                _log.warning(
                    "catch_up.release_failed", conversation=conversation.describe(), exc_info=True
                )
        self._held, self._received = [], {}

    async def _notice(self, conversation: ConversationRef, received: list[InboxMessage]) -> None:
        binding = self._bindings.active_for_conversation(conversation)
        if binding is None:
            return
        room_id = conversation.parent_conversation_id or conversation.conversation_id
        first = event_link(room_id, received[0].item_id)
        last = event_link(room_id, received[-1].item_id)
        text = offline_text(binding.meta.persona.shown_name, len(received), first, last)
        _log.info("catch_up.recorded", binding_id=binding.binding_id, messages=len(received))
        try:
            await self._say(conversation, text)
        except ThreadboundError:
            _log.warning("catch_up.notice_failed", binding_id=binding.binding_id)
