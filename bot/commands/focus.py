"""``/focus``, ``/unfocus``, ``/session idle|max-age|mode``: bind a thread and manage it.

All of them are for the session's owners or an administrator
(:mod:`bot.commands.permissions`). ``/focus`` too: a thread bound to a session
shows its conversation and can export it, so binding someone else's session
would hand it over.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

import discord
from discord import app_commands

from adapters.discord.account import AccountRuntime
from adapters.discord.ids import conversation_for
from bot.commands.bound import binding_for
from bot.commands.permissions import NOT_OWNER, may_change
from core.bindings.focus import find_session, persona_name
from core.bindings.focus import focus as focus_session
from core.canary import parse_duration
from core.errors import ConversationAlreadyBound, ThreadboundError

__all__ = ["NOT_OWNER", "focus_commands", "parse_window"]

NOT_A_THREAD = "Use /focus inside the thread you want the session to speak in."


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


def focus_commands(
    account: AccountRuntime,
) -> list[app_commands.Command[Any, ..., Any] | app_commands.Group]:
    services = account.services

    @app_commands.command(name="focus", description="Bind this thread to an existing session.")
    @app_commands.describe(target="Session key (or the persona name of a bound session)")
    @app_commands.guild_only()
    async def focus(interaction: discord.Interaction, target: str) -> None:
        thread = interaction.channel
        if not isinstance(thread, discord.Thread):
            await interaction.response.send_message(NOT_A_THREAD, ephemeral=True)
            return
        known = set(await services.sessions.session_keys())
        session_key = find_session(
            services.bindings, known, target.strip(), account_id=account.account_id
        )
        if session_key is None:
            await interaction.response.send_message(
                f"No session {target!r}; use a session key from /agents list.", ephemeral=True
            )
            return
        if not await may_change(interaction, services, session_key):
            await interaction.response.send_message(NOT_OWNER, ephemeral=True)
            return
        await interaction.response.defer(thinking=True)
        try:
            record = await focus_session(
                services.bindings,
                session_key,
                conversation_for(account.account_id, thread.id, thread.parent_id),
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

    @app_commands.command(name="unfocus", description="Unbind this thread from its session.")
    @app_commands.guild_only()
    async def unfocus(interaction: discord.Interaction) -> None:
        record = await binding_for(account, interaction, changes=True)
        if record is None:
            return
        await interaction.response.defer(thinking=True)
        await services.bindings.unbind(record.binding_id, reason="user-unfocus")
        await interaction.followup.send(f"Unbound from `{record.target_session_key}`.")

    session = app_commands.Group(
        name="session", description="This thread's binding windows.", guild_only=True
    )

    async def change_window(interaction: discord.Interaction, which: str, duration: str) -> None:
        record = await binding_for(account, interaction, changes=True)
        if record is None:
            return
        try:
            ms = parse_window(duration)
        except ValueError as exc:
            await interaction.response.send_message(f"{exc}, or off", ephemeral=True)
            return
        try:
            if which == "idle":
                await services.bindings.set_lifetime(
                    record.binding_id, idle_timeout_ms=ms, actor=str(interaction.user.id)
                )
            else:
                await services.bindings.set_lifetime(
                    record.binding_id, max_age_ms=ms, actor=str(interaction.user.id)
                )
        except ThreadboundError as exc:
            await interaction.response.send_message(str(exc)[:2000], ephemeral=True)
            return
        label = "Idle timeout" if which == "idle" else "Maximum age"
        await interaction.response.send_message(f"{label} of this thread: {_show_window(ms)}.")

    @session.command(name="idle", description="Unbind after this long without activity.")
    @app_commands.describe(duration="e.g. 2h, 30m, 1h30m, or off")
    async def idle(interaction: discord.Interaction, duration: str) -> None:
        await change_window(interaction, "idle", duration)

    @session.command(name="max-age", description="Unbind this long after binding.")
    @app_commands.describe(duration="e.g. 24h, 7d, or off")
    async def max_age(interaction: discord.Interaction, duration: str) -> None:
        await change_window(interaction, "max-age", duration)

    @session.command(name="mode", description="What a plain message does while the agent runs.")
    @app_commands.describe(default="steer: redirect it now; follow_up: queue for after the turn")
    async def mode(
        interaction: discord.Interaction, default: Literal["steer", "follow_up"]
    ) -> None:
        record = await binding_for(account, interaction, changes=True)
        if record is None:
            return
        try:
            await services.bindings.update_metadata(record.binding_id, default_mode=default)
        except ThreadboundError as exc:
            await interaction.response.send_message(str(exc)[:2000], ephemeral=True)
            return
        other = "follow_up" if default == "steer" else "steer"
        hint = (
            "start a message with `>>` to queue it"
            if default == "steer"
            else ("use /steer to redirect it now")
        )
        await interaction.response.send_message(
            f"While the agent runs, a plain message here will {default.replace('_', ' ')} "
            f"it ({hint}; /{other.replace('_', '')} works too)."
        )

    return [focus, unfocus, session]
