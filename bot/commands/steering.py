"""``/steer``, ``/followup`` and ``/cancel`` inside a bound thread.

All three change the session, so only its owners or an administrator may use
them (:mod:`bot.commands.permissions`). Plain messages typed in the thread stay
open to everyone: a thread is a conversation.
"""

from __future__ import annotations

from typing import Literal

import discord
from discord import app_commands

from bot.account import AccountRuntime
from bot.commands.bound import NOT_BOUND, binding_for

__all__ = ["steering_commands"]


def steering_commands(account: AccountRuntime) -> list[app_commands.Command]:
    async def deliver(
        interaction: discord.Interaction, message: str, mode: Literal["steer", "follow_up"]
    ) -> None:
        record = await binding_for(account, interaction, changes=True)
        if record is None:
            return
        result = await account.services.inbound.handle(
            record.conversation,
            message,
            author_id=str(interaction.user.id),
            author_name=interaction.user.display_name,
            mode=mode,
        )
        if result is None:  # the binding ended in between
            await interaction.response.send_message(NOT_BOUND, ephemeral=True)
            return
        word = "Steering" if mode == "steer" else "Queued as a follow-up"
        if not result.submission.queued:
            word = "Started a turn with"
        await interaction.response.send_message(f"{word}: {message}")

    @app_commands.command(name="steer", description="Redirect the running agent now.")
    async def steer(interaction: discord.Interaction, message: str) -> None:
        await deliver(interaction, message, "steer")

    @app_commands.command(name="followup", description="Queue a message for after this turn.")
    async def followup(interaction: discord.Interaction, message: str) -> None:
        await deliver(interaction, message, "follow_up")

    @app_commands.command(name="cancel", description="Stop the running turn and drop the queue.")
    async def cancel(interaction: discord.Interaction) -> None:
        record = await binding_for(account, interaction, changes=True)
        if record is None:
            return
        agent = account.services.runtime.peek(record.target_session_key)
        dropped = await agent.cancel() if agent is not None else []
        if dropped:
            listed = "\n".join(f"- ({m.mode}) {m.text}" for m in dropped)
            text = f"Cancelled. Dropped {len(dropped)} queued message(s):\n{listed}"
        else:
            text = "Cancelled." if agent is not None else "Nothing is running here."
        await interaction.response.send_message(text[:2000])

    return [steer, followup, cancel]
