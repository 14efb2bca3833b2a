"""``!steer``, ``!followup`` and ``!cancel`` in a session's Matrix thread.

The same calls and the same answers as Discord's ``/steer``, ``/followup`` and
``/cancel``: the message goes through the inbox as a command (keyed by the command's
event id, so it is delivered once), and the answer is core's words
(:func:`core.inbox.shown.delivered_text`, :func:`core.control.cancelled_text`).
All three change the session: its owners or a room administrator only.

The command's event id already keys its press in the inbox (answered once), so the
message it delivers is keyed apart from it (``<event id>#steer``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from adapters.matrix.command_context import (
    Asked,
    CommandAccount,
    Definitions,
    Handler,
    Handlers,
    not_a_thread,
)
from core.control import cancelled_text
from core.inbox import InboxMessage, Mode
from core.inbox.shown import COMMAND_NOT_SAVED, delivered_text
from core.logging import get_logger

__all__ = ["DEFINITIONS", "SteeringCommands"]

_log = get_logger("adapters.matrix.commands")

_DELIVERIES: Final[tuple[tuple[str, str, Mode], ...]] = (
    ("steer", "Redirect the running agent now.", "steer"),
    ("followup", "Queue a message for after this turn.", "follow_up"),
)

DEFINITIONS: Final[Definitions] = (
    *(
        {
            "type": 1,
            "name": name,
            "description": description,
            "options": [
                {"type": 3, "name": "message", "description": "The message", "required": True}
            ],
        }
        for name, description, _mode in _DELIVERIES
    ),
    {"type": 1, "name": "cancel", "description": "Stop the running turn and drop the queue."},
)


class SteeringCommands:
    """A running session's course from its thread: redirect, queue, or stop it."""

    def __init__(self, account: CommandAccount) -> None:
        self._account = account

    def handlers(self) -> Handlers:
        found: Handlers = {("cancel",): self.cancel}
        for name, _description, mode in _DELIVERIES:
            found[(name,)] = self._delivers(name, mode)
        return found

    def _delivers(self, command: str, mode: Mode) -> Handler:
        async def deliver(asked: Asked, options: Mapping[str, Any]) -> str:
            return await self.deliver(asked, str(options["message"]), command, mode)

        return deliver

    async def deliver(self, asked: Asked, message: str, command: str, mode: Mode) -> str:
        """The message into the session's inbox, as a thread message would go; the answer
        says what became of it."""
        binding = await self._account.bound_here(asked, command, changes=True)
        if isinstance(binding, str):
            return binding
        item = InboxMessage(
            conversation=binding.conversation,
            item_id=f"{asked.event_id}#{command}",  # the event id is the command's press
            seq=asked.seq * 1000,
            text=message,
            author_id=asked.sender,
            author_name=asked.sender,
            mode=mode,
            source="command",
        )
        try:
            outcome = await self._account.uses.inbox.receive(item)
        except Exception:  # not even recorded
            _log.error("inbox.record_failed", item_id=item.item_id, exc_info=True)
            return COMMAND_NOT_SAVED
        if outcome.kind == "dropped":  # the binding ended in between
            return not_a_thread(command)
        return delivered_text(outcome, message, mode)

    async def cancel(self, asked: Asked, _options: Mapping[str, Any]) -> str:
        """Stop the running turn and drop the queues, in the person's name."""
        binding = await self._account.bound_here(asked, "cancel", changes=True)
        if isinstance(binding, str):
            return binding
        done = await self._account.uses.sessions.cancel(
            binding.target_session_key, by_user_id=asked.sender, by_name=asked.sender
        )
        return cancelled_text(done)
