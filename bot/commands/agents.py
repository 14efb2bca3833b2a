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

    @group.command(name="list", description="Subagents: state, thread, queues and usage.")
    async def list_command(interaction: discord.Interaction) -> None:
        lines = await subagent_lines(account)
        await interaction.response.send_message(
            "\n".join(lines)[:2000] or "No subagents.",
            ephemeral=True,
            allowed_mentions=discord.AllowedMentions.none(),
        )

    return group


async def subagent_lines(account: AccountRuntime, *, limit: int = 25) -> list[str]:
    """One line per subagent of this account, newest first: state, thread, queues, usage.

    Completed and failed subagents come from the ``subagents`` table (they may
    have left memory long ago); running ones add their live queue lengths.
    """
    services = account.services
    lines = []
    records = await services.subagents.list()
    for record in reversed(records):
        requester = record.requester
        if requester is not None and requester.account_id != account.account_id:
            continue
        agent = services.runtime.peek(record.session_key)
        state = record.state
        if agent is not None and agent.running:
            state = "running"
        binding = services.subagents.binding_of(record.session_key)
        where = f"<#{binding.conversation.conversation_id}>" if binding else "no thread"
        parts = [f"**{services.subagents.name_of(record)}** `{record.session_key}` {state}", where]
        if agent is not None:
            snapshot = agent.snapshot()
            parts.append(
                f"{len(snapshot.steering_queue)} steer / {len(snapshot.follow_up_queue)} queued"
            )
            usage = agent.tree.total_usage
            tokens, cost = usage.prompt_tokens + usage.completion_tokens, usage.cost_usd or 0.0
        else:
            tokens, cost = record.tokens, record.cost_usd
        parts.append(f"{tokens} tokens" + (f", ${cost:.4f}" if cost else ""))
        lines.append(" · ".join(parts))
        if len(lines) >= limit:
            lines.append("… and more (newest first)")
            return lines
    known = {record.session_key for record in records}
    for key in services.runtime.resident():  # legacy runs: no thread, no subagent record
        agent = services.runtime.peek(key)
        if key in known or agent is None or services.bindings.list_by_session(key):
            continue
        lines.append(f"unbound run `{key}` ({'running' if agent.running else 'idle'})")
    return lines
