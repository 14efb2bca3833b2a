"""``/agents spawn`` from Discord: the command parsed into the spawn use case, its answer
rendered.

What the request becomes is :class:`core.subagents.SubagentService`'s decision
(:meth:`~core.subagents.SubagentService.request_for`): with
``spawnSubagentSessions`` on there, a subagent in a thread of its own, announced
once; off, a reply, whose answer alone is posted where it was asked through the
same outbox (so a restart still posts it), and a session is refused with the
flag's name. Only the wording of the answer is this module's.

:func:`plan` makes every check that needs no I/O and :meth:`SpawnPlan.run`
does the rest, so ``/agents spawn`` knows a refusal (which only the requester
should see) before it shows everyone it is thinking.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import discord

from adapters.discord.account import AccountRuntime
from adapters.discord.ids import conversation_of
from core.subagents import service as core_spawn
from core.subagents.service import SpawnRefused

__all__ = ["SpawnCommand", "SpawnPlan", "SpawnRefused", "SpawnResult", "plan", "spawn"]


@dataclass(frozen=True, slots=True)
class SpawnCommand:
    guild_id: int
    channel: discord.abc.MessageableChannel
    user_id: int
    task: str
    agent: str | None = None
    mode: Literal["run", "session"] = "run"
    user_name: str | None = None


@dataclass(frozen=True, slots=True)
class SpawnResult:
    session_key: str
    thread_id: int | None
    message: str


@dataclass(frozen=True, slots=True)
class SpawnPlan:
    """A request that passed every check needing no I/O; :meth:`run` does the I/O."""

    account: AccountRuntime
    core: core_spawn.SpawnRequest
    """What the spawn use case gets: with a thread, or a reply (threads off here)."""

    async def run(self) -> SpawnResult:
        """Start the subagent; raises ThreadboundError when Discord or the store refuse."""
        spawned = await self.account.services.subagents.spawn(self.core)
        if spawned.binding is None:  # a reply
            return SpawnResult(
                spawned.record.session_key, None, "Working on it; the answer will be posted here."
            )
        thread_id = int(spawned.binding.conversation.conversation_id)
        return SpawnResult(
            spawned.record.session_key,
            thread_id,
            f"Started **{spawned.display_name}** in <#{thread_id}>.",
        )


def plan(account: AccountRuntime, request: SpawnCommand) -> SpawnPlan:
    """Check ``request`` without any I/O: the same refusals as the spawn itself.

    Raises:
        SpawnRefused: a blank task, an agent that may not be started.
        FeatureDisabled: a session while spawning threads is off here.
    """
    subagents = account.services.subagents
    core = subagents.request_for(
        conversation_of(account.account_id, request.channel),
        task=request.task,
        agent=request.agent,
        mode=request.mode,
        requested_by=str(request.user_id),
        requested_by_name=request.user_name,
        scope=str(request.guild_id),
    )
    subagents.check(core)  # refused now, before Discord is asked for anything
    return SpawnPlan(account, core)


async def spawn(account: AccountRuntime, request: SpawnCommand) -> SpawnResult:
    """Start a subagent on ``request.task``; raises FeatureDisabled for a refused thread."""
    return await plan(account, request).run()
