"""``/agents spawn`` as a use case: flags first, then a thread and a binding, or the legacy path.

With ``spawnSubagentSessions`` on (resolved for this guild and account, admin
overrides included) a spawn opens a new thread in the requester's parent
channel, binds it, and starts the subagent there. Off, the legacy behaviour
is untouched: no thread, the result is posted where it was asked for; asking
for a session (which lives in a thread) is refused with the flag's name.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

import discord

from adapters.discord.delivery import Persona
from adapters.discord.ids import conversation_for
from adapters.discord.text import split_message
from bot.account import AccountRuntime
from core.agent.events import AgentEvent, TurnEnded
from core.bindings.records import ConversationRef
from core.config import FLAG_SPAWN_SUBAGENT_SESSIONS, Config
from core.errors import FeatureDisabled, ThreadboundError
from core.logging import get_logger
from core.sessions.tree import SessionTree

__all__ = ["SpawnRefused", "SpawnRequest", "SpawnResult", "spawn"]


class SpawnRefused(ThreadboundError):
    """The spawn cannot start this agent; the message says why and what exists."""


_log = get_logger("bot.spawn")
_NO_MENTIONS = discord.AllowedMentions.none()


@dataclass(frozen=True, slots=True)
class SpawnRequest:
    guild_id: int
    channel: discord.abc.MessageableChannel
    user_id: int
    task: str
    agent: str | None = None
    mode: Literal["run", "session"] = "run"


@dataclass(frozen=True, slots=True)
class SpawnResult:
    session_key: str
    thread_id: int | None
    message: str


async def spawn(account: AccountRuntime, request: SpawnRequest) -> SpawnResult:
    """Start a subagent on ``request.task``; raises FeatureDisabled for a refused thread."""
    services = account.services
    known = services.config.account_ids()
    settings = services.overrides.thread_bindings(
        str(request.guild_id),
        account_id=account.account_id if account.account_id in known else None,
    )
    session_key = f"subagent:{uuid.uuid4().hex[:12]}"
    persona = _persona(services.config, request.agent)
    if not (settings.enabled and settings.spawn_subagent_sessions):
        if request.mode == "session":
            raise FeatureDisabled(
                FLAG_SPAWN_SUBAGENT_SESSIONS, "a session-mode subagent in a thread"
            )
        return await _legacy(account, request, session_key)

    requester = _requester(account.account_id, request.channel)
    parent = requester.parent_conversation_id or requester.conversation_id
    record = await services.bindings.bind(
        session_key,
        "subagent",
        ConversationRef(
            channel="discord",
            account_id=account.account_id,
            conversation_id="",
            parent_conversation_id=parent,
        ),
        metadata={
            "persona": {"name": persona.name, "avatar_url": persona.avatar_url},
            "agent": request.agent,
            "guild_id": str(request.guild_id),
            "spawn_mode": request.mode,
            "requester_conversation_id": requester.conversation_id,
            "thread_name": f"{persona.name}: {request.task}"[:100],
        },
        bound_by=str(request.user_id),
    )
    agent = await services.runtime.get(session_key)
    account.present(record, agent)
    await agent.send(request.task, author_id=str(request.user_id))
    thread_id = int(record.conversation.conversation_id)
    return SpawnResult(session_key, thread_id, f"Started **{persona.name}** in <#{thread_id}>.")


def _persona(config: Config, agent: str | None) -> Persona:
    """The persona of the requested agent profile; refuses unknown and handoff-only agents."""
    if not config.agents:
        return Persona(name=agent or "Subagent")
    if agent is None:
        startable = [a for a, p in config.agents.items() if p.user_startable]
        if not startable:
            raise SpawnRefused("no configured agent may be started directly; see [agents.<id>]")
        agent = startable[0]
    profile = config.agents.get(agent)
    if profile is None:
        raise SpawnRefused(
            f"there is no agent {agent!r}; configured agents: {', '.join(config.agents)}"
        )
    if not profile.user_startable:
        raise SpawnRefused(f"agent {agent!r} starts only through an accepted handoff, not directly")
    return Persona(name=profile.display_name, avatar_url=profile.avatar_url or None)


def _requester(account_id: str, channel: discord.abc.MessageableChannel) -> ConversationRef:
    if isinstance(channel, discord.Thread):
        return conversation_for(account_id, channel.id, channel.parent_id)
    return conversation_for(account_id, channel.id)


async def _legacy(account: AccountRuntime, request: SpawnRequest, session_key: str) -> SpawnResult:
    """No thread: run the task and post the answer in the channel it was asked from."""
    agent = await account.services.runtime.get(session_key)
    channel = request.channel

    def on_event(event: AgentEvent) -> None:
        if isinstance(event, TurnEnded):
            account.run_in_background(_post_answer(agent.tree, channel))
            unsubscribe()

    unsubscribe = agent.subscribe(on_event)
    await agent.send(request.task, author_id=str(request.user_id))
    return SpawnResult(session_key, None, "Working on it; the answer will be posted here.")


async def _post_answer(tree: SessionTree, channel: discord.abc.MessageableChannel) -> None:
    answers = [e.payload["text"] for e in tree.path() if e.type == "assistant_message"]
    text = next((a for a in reversed(answers) if a), "(the subagent finished without an answer)")
    try:
        for part in split_message(text):
            await channel.send(part, allowed_mentions=_NO_MENTIONS)
    except discord.HTTPException:
        _log.warning("spawn.legacy_post_failed", exc_info=True)
