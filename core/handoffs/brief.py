"""Producing the brief: the use case behind "Ready — produce the brief".

When the people in a session think it has settled what the next agent needs,
they ask its current agent for the brief: one consolidation turn, whose answer
becomes a ``brief`` artifact confirmed by the person who asked (the only path
to one: a model cannot emit that type by itself), and the handoff to the
profile's first ``handoff_to`` agent is offered with it. A channel asks
:meth:`Briefs.ready` first (every refusal, in words for the person) and shows
what it likes while :meth:`Briefs.produce` runs.

The request is recorded (``brief.requested``) before the consolidation
message, so the log tells which turn was the brief's and how it ended
(:mod:`core.handoffs.attempts`). Only a turn that ended ``completed`` becomes
a brief: one cut off by a stop or a restart, cancelled or failed never does,
even when the agent had said part of its answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from core.agent.agent import Agent, AgentBusy
from core.agent.assignment import active_agent
from core.artifacts.builtin import BriefData
from core.artifacts.registry import artifact_of
from core.artifacts.service import ArtifactService
from core.config import AgentProfile, agent_display_name
from core.errors import ThreadboundError
from core.handoffs.activation import HandoffRecord
from core.handoffs.attempts import BriefRequestedPayload, attempt_after
from core.handoffs.service import HandoffService
from core.runtime import SessionRuntime

__all__ = [
    "CONSOLIDATION_TIMEOUT",
    "Brief",
    "BriefNotWritten",
    "BriefRefused",
    "Briefs",
    "ReadyBrief",
    "brief_from_answer",
    "display_name",
]

CONSOLIDATION_TIMEOUT: Final = 600.0
"""Seconds the consolidation turn may take before the brief is given up on."""


class BriefRefused(ThreadboundError):
    """No brief now; the message says why, in words for the person who asked."""


class BriefNotWritten(ThreadboundError):
    """The consolidation turn did not end normally, so nothing it said is the brief.

    Attributes:
        ending: how the turn ended, in words ("was cancelled", ...).
    """

    def __init__(self, name: str, ending: str) -> None:
        super().__init__(f"{name}'s turn {ending} before the brief was finished")
        self.ending = ending


@dataclass(frozen=True, slots=True)
class ReadyBrief:
    """A session whose current agent may write its brief now."""

    agent: Agent
    from_agent: str
    to_agent: str


@dataclass(frozen=True, slots=True)
class Brief:
    """The brief written and confirmed, and the handoff offered with it."""

    handoff: HandoffRecord
    title: str


def display_name(profiles: Mapping[str, AgentProfile], agent: str | None) -> str:
    """How the bot's sentences name ``agent``: its profile's name, else its id."""
    return agent_display_name(profiles, agent, fallback=agent or "the agent")


def brief_from_answer(answer: str, *, next_agent: str | None) -> BriefData:
    """Title: the first non-empty line, markdown marks stripped; summary: the rest, or the title."""
    lines = answer.strip().splitlines()
    title = ""
    rest: list[str] = []
    for index, line in enumerate(lines):
        cleaned = line.strip().lstrip("#").strip().strip("*_").strip()
        if cleaned:
            title, rest = cleaned, lines[index + 1 :]
            break
    summary = "\n".join(rest).strip() or title
    return BriefData(title=title[:200], summary=summary, next_agent=next_agent)


class Briefs:
    """Briefs and the handoffs they open, one at a time per session."""

    def __init__(
        self,
        runtime: SessionRuntime,
        artifacts: ArtifactService,
        handoffs: HandoffService,
        profiles: Mapping[str, AgentProfile],
        *,
        timeout_seconds: float = CONSOLIDATION_TIMEOUT,
    ) -> None:
        self._runtime = runtime
        self._artifacts = artifacts
        self._handoffs = handoffs
        self._profiles = profiles
        self._timeout = timeout_seconds
        self._writing: set[str] = set()
        """Sessions whose brief is being written now (a second press writes none)."""

    async def ready(self, session_key: str) -> ReadyBrief:
        """The session's agent, if it may write its brief now.

        Raises:
            BriefRefused: no agent to hand off to, an offer already open, or busy.
        """
        agent = await self._runtime.get(session_key)
        current = active_agent(agent.tree)
        profile = self._profiles.get(current or "")
        name = display_name(self._profiles, current)
        if current is None or profile is None or not profile.handoff_to:
            raise BriefRefused(f"{name} has no agent to hand off to.")
        offered = [
            h
            for h in await self._handoffs.list(session_key)
            if h.status == "offered" and h.from_agent == current
        ]
        if offered:
            raise BriefRefused("A handoff is already offered in this thread; accept or reject it.")
        if agent.running or session_key in self._writing:
            raise BriefRefused(f"{name} is busy; press again once it is idle.")
        return ReadyBrief(agent, current, profile.handoff_to[0])

    async def produce(self, ready: ReadyBrief, *, by_user: str) -> Brief:
        """Run the consolidation turn, record the brief ``by_user`` confirmed, offer the
        handoff with it.

        Raises:
            BriefRefused: another brief of the session is being written.
            BriefNotWritten: the consolidation turn was cut off, cancelled or failed.
            ThreadboundError: the agent gave no answer.
            TimeoutError: no answer within the consolidation timeout.
        """
        agent = ready.agent
        key = agent.session_key
        if key in self._writing:
            name = display_name(self._profiles, ready.from_agent)
            raise BriefRefused(f"{name} is busy; press again once it is idle.")
        self._writing.add(key)
        try:
            return await self._write(ready, by_user)
        finally:
            self._writing.discard(key)

    async def _write(self, ready: ReadyBrief, by_user: str) -> Brief:
        agent = ready.agent
        name = display_name(self._profiles, ready.from_agent)
        origin = [event.node_id for event in agent.tree.said()]
        target = display_name(self._profiles, ready.to_agent)
        request = await agent.append(
            BriefRequestedPayload(
                from_agent=ready.from_agent, to_agent=ready.to_agent, actor=by_user
            )
        )
        try:
            await agent.send(
                f"Write the brief for {target}: first line a title, "
                "then a summary of what was decided.",
                author_id=by_user,
            )
        except AgentBusy:  # someone's message started a turn since ready()
            raise BriefRefused(f"{name} is busy; press again once it is idle.") from None
        async with asyncio.timeout(self._timeout):
            await agent.wait_idle()
        # How the consolidation turn ended is in the log: only a normal end is a brief.
        attempt = attempt_after(agent.tree.events, request.seq)
        if not attempt.completed:
            raise BriefNotWritten(name, attempt.ending())
        if not attempt.answer.strip():
            raise ThreadboundError(f"{name} gave no answer to write it from")
        brief = brief_from_answer(attempt.answer, next_agent=ready.to_agent)
        event = await self._artifacts.produce_confirmed(
            agent.tree,
            type="brief",
            data=brief.model_dump(),
            origin=origin,
            confirmed_by=by_user,
            agent=ready.from_agent,
        )
        handoff = await self._handoffs.offer(
            agent.tree,
            from_agent=ready.from_agent,
            to_agent=ready.to_agent,
            artifact_id=artifact_of(event).artifact_id,
            actor=by_user,
        )
        return Brief(handoff, brief.title)
