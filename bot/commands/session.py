"""``/session idle|max-age|mode``: the bound thread's windows, and what a plain message does.

All of them change the binding of the session's thread, so they are for the
session's owners or an administrator (:mod:`bot.commands.permissions`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

import discord
from discord import app_commands

from adapters.discord.account import AccountRuntime
from bot.commands.bound import binding_for, uses_of
from core.bindings.records import BindingMetadata
from core.canary import parse_duration
from core.errors import ThreadboundError
from core.inbox import Mode

__all__ = ["SessionGroup", "parse_window"]


def parse_window(text: str) -> int:
    """``2h``, ``30m``, ``1h30m`` as milliseconds; ``off`` as 0 (never).

    Raises:
        ValueError: not a duration, with a message that says what to type.
    """
    if text.strip().lower() == "off":
        return 0
    return int(parse_duration(text) / timedelta(milliseconds=1))


def _show_window(ms: int) -> str:
    if ms == 0:
        return "off"
    minutes, seconds = divmod(ms // 1000, 60)
    hours, minutes = divmod(minutes, 60)
    parts = [f"{v}{u}" for v, u in ((hours, "h"), (minutes, "m"), (seconds, "s")) if v]
    return "".join(parts) or f"{ms}ms"


class SessionGroup(
    app_commands.Group,
    name="session",
    description="This thread's binding windows.",
    guild_only=True,
):
    """``/session``: how long this thread stays bound, and what a plain message does."""

    def __init__(self, account: AccountRuntime) -> None:
        super().__init__()
        self.account = account
        self.uses = uses_of(account)

    @app_commands.command(name="idle", description="Unbind after this long without activity.")
    @app_commands.describe(duration="e.g. 2h, 30m, 1h30m, or off")
    async def idle(self, interaction: discord.Interaction, duration: str) -> None:
        await self._change_window(interaction, "idle", duration)

    @app_commands.command(name="max-age", description="Unbind this long after binding.")
    @app_commands.describe(duration="e.g. 24h, 7d, or off")
    async def max_age(self, interaction: discord.Interaction, duration: str) -> None:
        await self._change_window(interaction, "max-age", duration)

    @app_commands.command(
        name="mode", description="What a plain message does while the agent runs."
    )
    @app_commands.describe(default="steer: redirect it now; follow_up: queue for after the turn")
    async def mode(self, interaction: discord.Interaction, default: Mode) -> None:
        record = await binding_for(self.account, interaction, changes=True)
        if record is None:
            return
        try:
            await self.uses.bindings.update_metadata(
                record.binding_id, BindingMetadata(default_mode=default)
            )
        except ThreadboundError as exc:
            await interaction.response.send_message(str(exc)[:2000], ephemeral=True)
            return
        await interaction.response.send_message(_mode_text(default))

    async def _change_window(
        self, interaction: discord.Interaction, which: Literal["idle", "max-age"], duration: str
    ) -> None:
        record = await binding_for(self.account, interaction, changes=True)
        if record is None:
            return
        try:
            ms = parse_window(duration)
        except ValueError as exc:
            await interaction.response.send_message(f"{exc}, or off", ephemeral=True)
            return
        bindings, actor = self.uses.bindings, str(interaction.user.id)
        try:
            if which == "idle":
                await bindings.set_lifetime(record.binding_id, idle_timeout_ms=ms, actor=actor)
            else:
                await bindings.set_lifetime(record.binding_id, max_age_ms=ms, actor=actor)
        except ThreadboundError as exc:
            await interaction.response.send_message(str(exc)[:2000], ephemeral=True)
            return
        label = "Idle timeout" if which == "idle" else "Maximum age"
        await interaction.response.send_message(f"{label} of this thread: {_show_window(ms)}.")


def _mode_text(default: Mode) -> str:
    """The answer to ``/session mode``: what a plain message does now, and the other way."""
    other = "follow_up" if default == "steer" else "steer"
    hint = (
        "start a message with `>>` to queue it"
        if default == "steer"
        else "use /steer to redirect it now"
    )
    return (
        f"While the agent runs, a plain message here will {default.replace('_', ' ')} "
        f"it ({hint}; /{other.replace('_', '')} works too)."
    )
