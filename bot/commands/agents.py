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
from bot.spawn import SpawnCommand, plan
from core.agent.agent import Agent
from core.agent.assignment import active_agent
from core.agent.usage import context_size
from core.errors import ThreadboundError
from core.logging import get_logger

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
        lines = await subagent_lines(self.account)
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


async def _running_agent(
    account: AccountRuntime, session_key: str, agent: Agent | None, spawned: str | None
) -> str | None:
    """The agent that runs the session now: an accepted handoff's, else the one spawned.

    The session log says it (``agent.activated``); for a session not in memory the
    handoffs table does, without loading the log.
    """
    if agent is not None:
        return active_agent(agent.tree) or spawned
    taken = [
        h
        for h in await account.services.handoffs.list(session_key)
        if h.status in ("accepted", "completed")
    ]
    return max(taken, key=lambda h: h.updated_at).to_agent if taken else spawned


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
        running = await _running_agent(account, record.session_key, agent, record.agent)
        name = f"**{services.subagents.display_name(running)}**"
        if running != record.agent:
            name += f" (handed over from {services.subagents.name_of(record)})"
        parts = [f"{name} `{record.session_key}` {state}", where]
        if agent is not None:
            snapshot = agent.snapshot()
            parts.append(
                f"{len(snapshot.steering_queue)} steer / {len(snapshot.follow_up_queue)} queued"
            )
            usage = agent.tree.total_usage
            tokens, cost = usage.prompt_tokens + usage.completion_tokens, usage.cost_usd or 0.0
            approx = "≈" if usage.estimated else ""  # the bot counted what the server did not
            window = agent.model_info.context_window
            now = context_size(agent.tree)
            context = f", context {now.tokens / window:.0%}" if window else ""
        else:
            tokens, cost, context, approx = record.tokens, record.cost_usd, "", ""
        parts.append(f"{approx}{tokens} tokens" + (f", ${cost:.4f}" if cost else "") + context)
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
