"""``/help``: how a conversation with the bot starts, and its commands.

A newcomer's first question is how to begin; the answer leads, then what a
session's thread understands, then every command the bot registered (read from
its command tree, so the list cannot fall behind the commands). The command's
own description says how to start too: it is what a client's command list shows
before anyone runs it.
"""

from __future__ import annotations

from typing import Any, Final

import discord
from discord import app_commands

from adapters.discord.account import AccountRuntime
from bot.mentions import START_HINT

__all__ = ["DESCRIPTION", "HelpCommands", "help_text"]

DESCRIPTION: Final = (
    "How to start: @mention the bot in a channel with your request, or /agents spawn"
)
"""Under Discord's 100 characters: the line a client's command list shows."""
_LIMIT: Final = 2000

_IN_A_THREAD: Final = (
    "**In a session's thread** write to the agent: a message while it works steers it "
    "(🧭), `>> text` queues a follow-up for after its turn (📥), `/cancel` stops the turn."
)


def help_text(commands: list[tuple[str, str]]) -> str:
    """The answer: how to start, the thread's ways, then ``/name — description`` per command,
    cut to one message (the last lines give way)."""
    head = [f"**To start a conversation**, {START_HINT}.", _IN_A_THREAD, "", "**Commands**"]
    text = "\n".join(head)
    for name, description in sorted(commands):
        line = f"\n`/{name}` — {description}"
        if len(text) + len(line) > _LIMIT:
            break
        text += line
    return text


class HelpCommands:
    """``/help``, open to everyone, answered privately."""

    def __init__(self, account: AccountRuntime) -> None:
        self.account = account

    def commands(self) -> list[app_commands.Command[Any, ..., Any]]:
        """The slash command, calling :meth:`help` on this object."""
        return [app_commands.Command(name="help", description=DESCRIPTION, callback=self.help)]

    async def help(self, interaction: discord.Interaction) -> None:
        tree = getattr(interaction.client, "tree", None)
        listed: list[tuple[str, str]] = []
        if isinstance(tree, app_commands.CommandTree):
            listed = [
                (command.qualified_name, command.description)
                for command in tree.walk_commands()
                if isinstance(command, app_commands.Command)
            ]
        await interaction.response.send_message(
            help_text(listed), ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
        )
