"""``/agents spawn`` and ``/agents list``.

A spawn's refusal is for the requester's eyes only. Refusals that need no I/O
are known before the command acknowledges, and are answered privately; a
public "thinking…" is shown only for a spawn expected to start. Should it
still fail (Discord refuses the thread, the store fails), the public
"thinking…" is deleted and the reason is sent privately: a public followup
would take the place of "thinking…" and show the refusal to everyone.
"""

from __future__ import annotations

import contextlib
from typing import Literal

import discord
from discord import app_commands

from adapters.discord.account import AccountRuntime
from bot.commands.bound import uses_of
from bot.spawn import SpawnCommand, plan
from core.errors import ThreadboundError
from core.logging import get_logger
from core.subagents.overview import Overview, overview_lines

__all__ = ["AgentsGroup"]

_log = get_logger("bot.commands.agents")
_NO_MENTIONS = discord.AllowedMentions.none()
UNEXPECTED = (
    "The subagent could not start because of an unexpected error (it was logged); "
    "try again, and tell an admin if it keeps happening."
)
NOT_STARTED = "The subagent did not start."


class AgentsGroup(app_commands.Group, name="agents", description="Start and list subagents."):
    """``/agents``: start a subagent on a task, and list this account's subagents."""

    def __init__(self, account: AccountRuntime) -> None:
        super().__init__()
        self.account = account
        self.uses = uses_of(account)

    @app_commands.command(name="spawn", description="Start a subagent on a task.")
    @app_commands.describe(
        task="What the subagent should do",
        agent="Agent profile (its name is the persona)",
        mode="run: one task; session: stays available in its thread",
    )
    async def spawn(
        self,
        interaction: discord.Interaction,
        task: str,
        agent: str | None = None,
        mode: Literal["run", "session"] = "run",
    ) -> None:
        if interaction.guild_id is None or interaction.channel is None:
            await interaction.response.send_message(
                "Subagents are spawned in a server channel.", ephemeral=True
            )
            return
        request = SpawnCommand(
            guild_id=interaction.guild_id,
            channel=interaction.channel,  # type: ignore[arg-type]
            user_id=interaction.user.id,
            user_name=interaction.user.display_name,
            task=task,
            agent=agent,
            mode=mode,
        )
        try:
            planned = plan(self.account, request)
        except ThreadboundError as exc:
            await refuse_privately(interaction, str(exc))
            return
        await interaction.response.defer(thinking=True)
        try:
            result = await planned.run()
        except ThreadboundError as exc:
            await refuse_after_public_defer(interaction, str(exc))
            return
        except Exception:
            _log.error("agents.spawn_failed", exc_info=True)
            await refuse_after_public_defer(interaction, UNEXPECTED)
            return
        await interaction.followup.send(result.message, allowed_mentions=_NO_MENTIONS)

    @app_commands.command(name="list", description="Subagents: state, thread, queues and usage.")
    async def list_subagents(self, interaction: discord.Interaction) -> None:
        overview = await self.uses.subagents.overview(self.account.account_id)
        lines = subagent_lines(overview)
        await interaction.response.send_message(
            "\n".join(lines)[:2000] or "No subagents.",
            ephemeral=True,
            allowed_mentions=discord.AllowedMentions.none(),
        )


async def refuse_privately(interaction: discord.Interaction, text: str) -> None:
    """Refuse before acknowledging: an ephemeral defer, then the reason as its followup.

    Deferred rather than answered at once so that every answer to a spawn, refusal
    or start, has one shape (a followup to a deferred response) for anyone reading it.
    """
    await interaction.response.defer(ephemeral=True, thinking=True)
    await interaction.followup.send(text[:2000], ephemeral=True, allowed_mentions=_NO_MENTIONS)


async def refuse_after_public_defer(interaction: discord.Interaction, text: str) -> None:
    """Refuse after a public "thinking…": remove it, then tell the requester privately.

    The first followup after a defer edits the deferred message and keeps its
    visibility, whatever it asks for; only once that message is gone is an
    ephemeral followup really private. Should the delete fail, the public message
    is given a neutral text, so the reason still reaches the requester alone.
    """
    try:
        await interaction.delete_original_response()
    except discord.HTTPException:
        with contextlib.suppress(discord.HTTPException):
            await interaction.edit_original_response(content=NOT_STARTED)
    await interaction.followup.send(text[:2000], ephemeral=True, allowed_mentions=_NO_MENTIONS)


def subagent_lines(overview: Overview) -> list[str]:
    """``/agents list``'s lines (core's wording), a thread shown as Discord's link."""
    return overview_lines(overview, place=lambda ref: f"<#{ref.conversation_id}>")
