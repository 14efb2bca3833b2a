"""``/steer``, ``/followup`` and ``/cancel`` inside a bound thread.

All three change the session, so only its owners or an administrator may use
them (:mod:`bot.commands.permissions`). Plain messages typed in the thread stay
open to everyone: a thread is a conversation.
"""

from __future__ import annotations

from typing import Any, Literal

import discord
from discord import app_commands

from adapters.discord.account import AccountRuntime
from bot.commands.bound import NOT_BOUND, binding_for
from core.inbox import InboxMessage, Outcome
from core.logging import get_logger

__all__ = ["NOT_SAVED", "SteeringCommands"]

_log = get_logger("bot.commands")

NOT_SAVED = "⚠️ Your message could not be saved (the bot's store did not answer); send it again."


def _said(outcome: Outcome, message: str, mode: Literal["steer", "follow_up"]) -> str:
    """The command's answer: what became of the message."""
    if outcome.kind == "delivered":
        if outcome.started:
            return f"Started a turn with: {message}"
        word = "Steering" if mode == "steer" else "Queued as a follow-up"
        return f"{word}: {message}"
    if outcome.kind == "held":
        return (
            "Received; it goes to the agent as soon as what was written here while the bot "
            f"was offline has been read back: {message}"
        )
    if outcome.kind == "busy":
        return (
            "Queued: another bot process runs this session right now, and it gets your "
            f"message from there: {message}"
        )
    if outcome.kind == "failed":
        return (
            f"⚠️ Not passed on: {outcome.reason}. It stays queued: it goes to the agent "
            "with the next message here, or when the bot restarts."
        )
    return "Already received."


class SteeringCommands:
    """A running session's course: redirect it, queue for after its turn, or stop it."""

    def __init__(self, account: AccountRuntime) -> None:
        self.account = account

    def commands(self) -> list[app_commands.Command[Any, ..., Any]]:
        """The slash commands, each calling its method on this object."""
        return [
            app_commands.Command(
                name="steer", description="Redirect the running agent now.", callback=self.steer
            ),
            app_commands.Command(
                name="followup",
                description="Queue a message for after this turn.",
                callback=self.followup,
            ),
            app_commands.Command(
                name="cancel",
                description="Stop the running turn and drop the queue.",
                callback=self.cancel,
            ),
        ]

    async def steer(self, interaction: discord.Interaction, message: str) -> None:
        await self._deliver(interaction, message, "steer")

    async def followup(self, interaction: discord.Interaction, message: str) -> None:
        await self._deliver(interaction, message, "follow_up")

    async def cancel(self, interaction: discord.Interaction) -> None:
        record = await binding_for(self.account, interaction, changes=True)
        if record is None:
            return
        agent = self.account.services.runtime.peek(record.target_session_key)
        user = interaction.user
        dropped = (
            await agent.cancel(by_user_id=str(user.id), by_name=user.display_name)
            if agent is not None
            else []
        )
        if agent is not None:
            _log.info(
                "turn.cancelled",
                session_key=record.target_session_key,
                user=str(user.id),
                dropped=len(dropped),
            )
        if dropped:
            listed = "\n".join(f"- ({m.mode}) {m.text}" for m in dropped)
            text = f"Cancelled. Dropped {len(dropped)} queued message(s):\n{listed}"
        else:
            text = "Cancelled." if agent is not None else "Nothing is running here."
        await interaction.response.send_message(text[:2000])

    async def _deliver(
        self, interaction: discord.Interaction, message: str, mode: Literal["steer", "follow_up"]
    ) -> None:
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
            outcome = await self.account.services.inbox.receive(item)
        except Exception:  # not even recorded
            _log.error("inbox.record_failed", item_id=item.item_id, exc_info=True)
            await interaction.response.send_message(NOT_SAVED, ephemeral=True)
            return
        if outcome.kind == "dropped":  # the binding ended in between
            await interaction.response.send_message(NOT_BOUND, ephemeral=True)
            return
        await interaction.response.send_message(_said(outcome, message, mode)[:2000])
