"""``/agents spawn`` and ``/agents list``."""

from __future__ import annotations

from typing import Literal

import discord
from discord import app_commands

from bot.account import AccountRuntime
from bot.spawn import SpawnRequest, spawn
from core.errors import ThreadboundError

__all__ = ["agents_group"]


def agents_group(account: AccountRuntime) -> app_commands.Group:
    group = app_commands.Group(name="agents", description="Start and list subagents.")

    @group.command(name="spawn", description="Start a subagent on a task.")
    @app_commands.describe(
        task="What the subagent should do",
        agent="Agent profile (its name is the persona)",
        mode="run: one task; session: stays available in its thread",
    )
    async def spawn_command(
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
        await interaction.response.defer(thinking=True)
        try:
            result = await spawn(
                account,
                SpawnRequest(
                    guild_id=interaction.guild_id,
                    channel=interaction.channel,  # type: ignore[arg-type]
                    user_id=interaction.user.id,
                    task=task,
                    agent=agent,
                    mode=mode,
                ),
            )
        except ThreadboundError as exc:
            await interaction.followup.send(str(exc), ephemeral=True)
            return
        await interaction.followup.send(result.message)

    @group.command(name="list", description="Bound threads and running subagents.")
    async def list_command(interaction: discord.Interaction) -> None:
        services = account.services
        lines = []
        for record in services.bindings.live():
            if record.conversation.account_id != account.account_id:
                continue
            agent = services.runtime.peek(record.target_session_key)
            snapshot = agent.snapshot() if agent else None
            state = "running" if snapshot and snapshot.running else "idle"
            queued = (
                f", {len(snapshot.steering_queue)} steer / {len(snapshot.follow_up_queue)} queued"
                if snapshot
                else ""
            )
            lines.append(
                f"<#{record.conversation.conversation_id}> `{record.target_session_key}` "
                f"({state}{queued})"
            )
        bound = {r.target_session_key for r in services.bindings.live()}
        for key in services.runtime.resident():
            if key in bound:
                continue
            agent = services.runtime.peek(key)
            if agent is None:
                continue
            state = "running" if agent.running else "idle"
            lines.append(f"unbound run `{key}` ({state})")
        await interaction.response.send_message(
            "\n".join(lines)[:2000] or "No subagents.", ephemeral=True
        )

    return group
