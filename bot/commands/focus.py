"""``/focus`` and ``/unfocus``: bind this thread to a session, or let it go.

Both are for the session's owners or an administrator
(:mod:`bot.commands.permissions`). ``/focus`` too: a thread bound to a session
shows its conversation and can export it, so binding someone else's session
would hand it over. The bound thread's windows and mode are ``/session``'s
(:mod:`bot.commands.session`).
"""

from __future__ import annotations

from typing import Any

import discord
from discord import app_commands

from adapters.discord.account import AccountRuntime
from adapters.discord.ids import conversation_for
from bot.commands.bound import binding_for, uses_of
from bot.commands.permissions import NOT_OWNER, is_admin
from core.bindings.focus import NoSuchSession, NotOwner, persona_name
from core.errors import ConversationAlreadyBound, ThreadboundError

__all__ = ["NOT_OWNER", "FocusCommands"]

NOT_A_THREAD = "Use /focus inside the thread you want the session to speak in."


class FocusCommands:
    """Which session a thread speaks for: bind it to one by key or persona, or unbind it."""

    def __init__(self, account: AccountRuntime) -> None:
        self.account = account
        self.uses = uses_of(account)

    def commands(self) -> list[app_commands.Command[Any, ..., Any]]:
        """The slash commands, each calling its method on this object."""
        return [
            app_commands.Command(
                name="focus",
                description="Bind this thread to an existing session.",
                callback=self.focus,
            ),
            app_commands.Command(
                name="unfocus",
                description="Unbind this thread from its session.",
                callback=self.unfocus,
            ),
        ]

    @app_commands.describe(target="Session key (or the persona name of a bound session)")
    @app_commands.guild_only()
    async def focus(self, interaction: discord.Interaction, target: str) -> None:
        thread = interaction.channel
        if not isinstance(thread, discord.Thread):
            await interaction.response.send_message(NOT_A_THREAD, ephemeral=True)
            return
        focus = self.uses.focus
        found = await focus.find(
            target,
            account_id=self.account.account_id,
            user_id=str(interaction.user.id),
            admin=is_admin(interaction),
        )
        if isinstance(found, NoSuchSession):
            await interaction.response.send_message(
                f"No session {target!r}; use a session key from /agents list.", ephemeral=True
            )
            return
        if isinstance(found, NotOwner):
            await interaction.response.send_message(NOT_OWNER, ephemeral=True)
            return
        await interaction.response.defer(thinking=True)
        try:
            record = await focus.focus(
                found,
                conversation_for(self.account.account_id, thread.id, thread.parent_id),
                scope=str(interaction.guild_id),
                by=str(interaction.user.id),
                read_after=str(interaction.id),
            )
        except ConversationAlreadyBound as exc:
            await interaction.followup.send(str(exc), ephemeral=True)
            return
        except ThreadboundError as exc:
            await interaction.followup.send(str(exc)[:2000], ephemeral=True)
            return
        await interaction.followup.send(
            f"This thread is now bound to `{record.target_session_key}` as "
            f"**{persona_name(record)}**."
        )

    @app_commands.guild_only()
    async def unfocus(self, interaction: discord.Interaction) -> None:
        record = await binding_for(self.account, interaction, changes=True)
        if record is None:
            return
        await interaction.response.defer(thinking=True)
        await self.uses.bindings.unbind(record.binding_id, reason="user-unfocus")
        await interaction.followup.send(f"Unbound from `{record.target_session_key}`.")
