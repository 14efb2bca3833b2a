"""``/steer``, ``/followup`` and ``/cancel`` inside a bound thread.

The answers' words are core's (:func:`core.inbox.shown.delivered_text`,
:func:`core.control.cancelled_text`), shared with Matrix's ``!`` commands. All three
change the session, so only its owners or an administrator may use
them (:mod:`bot.commands.permissions`). Plain messages typed in the thread stay
open to everyone: a thread is a conversation.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Final

import discord
from discord import app_commands

from adapters.discord.account import AccountRuntime
from bot.commands.bound import NOT_BOUND, binding_for, uses_of
from core.control import cancelled_text
from core.inbox import InboxMessage, Mode
from core.inbox.shown import COMMAND_NOT_SAVED, delivered_text
from core.logging import get_logger

__all__ = ["NOT_SAVED", "SteeringCommands"]

_log = get_logger("bot.commands")

NOT_SAVED = COMMAND_NOT_SAVED


_DELIVERIES: Final[tuple[tuple[str, str, Mode], ...]] = (
    ("steer", "Redirect the running agent now.", "steer"),
    ("followup", "Queue a message for after this turn.", "follow_up"),
)
"""``/steer`` and ``/followup``: one handling, told apart by the mode they deliver in."""


class SteeringCommands:
    """A running session's course: redirect it, queue for after its turn, or stop it."""

    def __init__(self, account: AccountRuntime) -> None:
        self.account = account
        self.uses = uses_of(account)

    def commands(self) -> list[app_commands.Command[Any, ..., Any]]:
        """The slash commands, each calling its method on this object."""
        delivering: list[app_commands.Command[Any, ..., Any]] = [
            app_commands.Command(name=name, description=description, callback=self._delivers(mode))
            for name, description, mode in _DELIVERIES
        ]
        return [
            *delivering,
            app_commands.Command(
                name="cancel",
                description="Stop the running turn and drop the queue.",
                callback=self.cancel,
            ),
        ]

    def _delivers(
        self, mode: Mode
    ) -> Callable[[discord.Interaction, str], Coroutine[Any, Any, None]]:
        """The handler of the command delivering in ``mode``."""

        async def deliver(interaction: discord.Interaction, message: str) -> None:
            await self._deliver(interaction, message, mode)

        return deliver

    async def cancel(self, interaction: discord.Interaction) -> None:
        record = await binding_for(self.account, interaction, changes=True)
        if record is None:
            return
        user = interaction.user
        done = await self.uses.sessions.cancel(
            record.target_session_key, by_user_id=str(user.id), by_name=user.display_name
        )
        await interaction.response.send_message(cancelled_text(done)[:2000])

    async def _deliver(self, interaction: discord.Interaction, message: str, mode: Mode) -> None:
        """The message into the session's inbox, as a thread message would go; the answer
        says what became of it."""
        record = await binding_for(self.account, interaction, changes=True)
        if record is None:
            return
        item = InboxMessage(
            conversation=record.conversation,
            item_id=str(interaction.id),
            seq=interaction.id,
            text=message,
            author_id=str(interaction.user.id),
            author_name=interaction.user.display_name,
            mode=mode,
            source="command",
        )
        try:
            outcome = await self.uses.inbox.receive(item)
        except Exception:  # not even recorded
            _log.error("inbox.record_failed", item_id=item.item_id, exc_info=True)
            await interaction.response.send_message(NOT_SAVED, ephemeral=True)
            return
        if outcome.kind == "dropped":  # the binding ended in between
            await interaction.response.send_message(NOT_BOUND, ephemeral=True)
            return
        await interaction.response.send_message(delivered_text(outcome, message, mode)[:2000])
