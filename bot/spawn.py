"""``/agents spawn`` from Discord: flags first, then the spawn use case or the legacy path.

With ``spawnSubagentSessions`` on (resolved for this guild and account, admin
overrides included) the request goes to :class:`core.subagents.SubagentService`
with a thread: it opens a thread in the requester's parent channel, binds it,
starts the subagent there and later announces its completion once. Off, the
legacy behaviour is untouched: no thread, the answer is posted where it was
asked for; asking for a session (which lives in a thread) is refused with the
flag's name.

:func:`plan` makes every check that needs no I/O and :meth:`SpawnPlan.run`
does the rest, so ``/agents spawn`` knows a refusal (which only the requester
should see) before it shows everyone it is thinking.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

import discord

from adapters.discord.account import AccountRuntime
from adapters.discord.ids import conversation_of
from adapters.discord.text import split_message
from core import log_events
from core.agent.assignment import AGENT_ACTIVATED
from core.agent.events import AgentEvent, TurnEnded
from core.config import FLAG_SPAWN_SUBAGENT_SESSIONS
from core.errors import FeatureDisabled
from core.logging import get_logger
from core.sessions.tree import SessionTree
from core.subagents import service as core_spawn
from core.subagents.service import SpawnRefused

__all__ = ["SpawnCommand", "SpawnPlan", "SpawnRefused", "SpawnResult", "plan", "spawn"]


_log = get_logger("bot.spawn")
_NO_MENTIONS = discord.AllowedMentions.none()


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
    request: SpawnCommand
    core: core_spawn.SpawnRequest
    """What the spawn use case gets; ``thread`` says whether this is the threaded path."""
    agent_id: str | None = None
    """The profile the checks chose (None: the default agent)."""

    async def run(self) -> SpawnResult:
        """Start the subagent; raises ThreadboundError when Discord or the store refuse."""
        if not self.core.thread:
            key = f"subagent:{uuid.uuid4().hex[:12]}"
            return await _legacy(self.account, self.request, key, self.agent_id)
        spawned = await self.account.services.subagents.spawn(self.core)
        assert spawned.binding is not None  # thread=True binds or raises
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
    services = account.services
    threads = _threads_on(account, request.guild_id)
    if not threads and request.mode == "session":
        raise FeatureDisabled(FLAG_SPAWN_SUBAGENT_SESSIONS, "a session-mode subagent in a thread")
    requester = conversation_of(account.account_id, request.channel)
    here = services.bindings.active_for_conversation(requester) if threads else None
    core = core_spawn.SpawnRequest(
        task=request.task,
        agent=request.agent,
        mode=request.mode,
        thread=threads,
        parent_session_key=here.target_session_key if here else None,  # asked from a thread
        requester=requester,
        requested_by=str(request.user_id),
        requested_by_name=request.user_name,
        scope=str(request.guild_id),
    )
    return SpawnPlan(account, request, core, services.subagents.check(core))


async def spawn(account: AccountRuntime, request: SpawnCommand) -> SpawnResult:
    """Start a subagent on ``request.task``; raises FeatureDisabled for a refused thread."""
    return await plan(account, request).run()


def _threads_on(account: AccountRuntime, guild_id: int) -> bool:
    """Whether this guild and account spawn subagents in threads (admin overrides included)."""
    return account.services.overrides.spawns_threads(str(guild_id), account.account_id)


async def _legacy(
    account: AccountRuntime, request: SpawnCommand, session_key: str, agent_id: str | None
) -> SpawnResult:
    """No thread: run the task and post the answer in the channel it was asked from.

    The chosen profile is recorded first, as on the threaded path: the runtime
    builds a session's agent from the ``agent.activated`` its log names.
    """
    services = account.services
    if agent_id is not None:
        tree = await services.sessions.load(session_key)
        activated = {"agent": agent_id, "by": str(request.user_id)}
        await services.sessions.append(tree, AGENT_ACTIVATED, activated)
    agent = await services.runtime.get(session_key)
    channel = request.channel

    def on_event(event: AgentEvent) -> None:
        if isinstance(event, TurnEnded):
            answer = _post_answer(agent.tree, channel, account.account_id, request.guild_id)
            account.run_in_background(answer)
            unsubscribe()

    unsubscribe = agent.subscribe(on_event)
    await agent.send(request.task, author_id=str(request.user_id), author_name=request.user_name)
    return SpawnResult(session_key, None, "Working on it; the answer will be posted here.")


async def _post_answer(
    tree: SessionTree, channel: discord.abc.MessageableChannel, account_id: str, guild_id: int
) -> None:
    text = tree.last_answer() or "(the subagent finished without an answer)"
    try:
        for part in split_message(text):
            await channel.send(part, allowed_mentions=_NO_MENTIONS)
    except discord.HTTPException as exc:
        log_events.emit(
            log_events.DeliveryFailed(
                completion_id=None,
                path="bot",
                destination=str(getattr(channel, "id", "")) or None,
                binding_id=None,
                error=exc,
                code=exc.code or None,
                retryable=False,
                account=account_id,
                guild=str(guild_id),
            ),
            _log,
        )
