"""When a conversation is offered the "produce the brief" button: the questions a channel
asks, each answered by one call.

The rule of when the button is due is :class:`core.handoffs.prompts.BriefPrompts`'
(the session log, and the binding's record of where it was last posted). What
is here is *when to ask* it, and for which conversations:

- after each turn of an agent whose profile hands off (:meth:`BriefOffers.watch`),
  except a subagent's task turn: its announcement comes first, and the button
  is asked for after it (:func:`task_unannounced`, read as the turn ends);
- for each of the session's active conversations on one channel account
  (:meth:`BriefOffers.conversations`);
- once at start-up, for what a previous process owed (:meth:`BriefOffers.missed`):
  it stopped between a turn's end and the button.

A channel then asks :meth:`BriefOffers.due` per conversation, posts the button,
and records it with :meth:`BriefOffers.mark_prompted`; a restarted process
reaches the same answer, so it posts a button its predecessor owed, and none twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from core.agent.agent import Agent
from core.agent.events import AgentEvent, TurnEnded
from core.bindings.records import SessionBindingRecord
from core.bindings.service import SessionBindingService
from core.config import AgentProfile
from core.handoffs.prompts import BriefPrompts, DueBrief
from core.runtime import SessionRuntime
from core.sessions.log import SessionLog
from core.sessions.tree import SessionTree
from core.subagents.events import COMPLETED, SPAWNED
from core.subagents.service import SubagentService

__all__ = ["BriefOffers", "DueOffer", "task_unannounced"]

_UNFINISHED_TASK: Final = ("starting", "running")
"""A subagent in these states has its announcement to come (which brings the button)."""


@dataclass(frozen=True, slots=True)
class DueOffer:
    """The button is due in ``binding``'s conversation (see :class:`DueBrief`)."""

    binding: SessionBindingRecord
    due: DueBrief


def task_unannounced(tree: SessionTree) -> bool:
    """A subagent's task not yet completed: its announcement comes first, then the button.

    Read when its turn ends, before the task's completion is recorded, so a task's
    last turn is told apart from a later turn of the conversation by the log alone.
    """
    types = {event.type for event in tree.events if event.type in (SPAWNED, COMPLETED)}
    return SPAWNED in types and COMPLETED not in types


class BriefOffers:
    """Where and when the brief button is offered.

    Args:
        bindings: the conversations sessions are bound to (and their record of the button).
        profiles: the agent profiles (which agents hand off, and to whom).
        runtime: the agents in memory (a session is read from its agent when it has one).
        sessions: the session log (read when no agent of the session is in memory).
        subagents: the subagent records (a task still at work brings its own button).
    """

    def __init__(
        self,
        bindings: SessionBindingService,
        profiles: Mapping[str, AgentProfile],
        runtime: SessionRuntime,
        sessions: SessionLog,
        subagents: SubagentService,
    ) -> None:
        self._bindings = bindings
        self._profiles = profiles
        self._runtime = runtime
        self._sessions = sessions
        self._subagents = subagents
        self._prompts = BriefPrompts(bindings, profiles)

    def _hands_off(self, agent: str | None) -> bool:
        profile = self._profiles.get(agent or "")
        return profile is not None and bool(profile.handoff_to)

    def watch(self, agent: Agent, ask: Callable[[str], object]) -> None:
        """After each turn of ``agent`` ends, ``ask`` with its session key (not after a
        task's turn: its announcement asks).

        Called once per agent built (first use, a restart, after an eviction or a
        handoff), so every turn of every agent is seen. An agent is built for one
        profile (a handoff builds the next one's): one that hands off to nobody is
        not watched at all.
        """
        if not self._hands_off(agent.agent_name):
            return
        key = agent.session_key

        def on_event(event: AgentEvent) -> None:
            if isinstance(event, TurnEnded) and not task_unannounced(agent.tree):
                ask(key)

        agent.subscribe(on_event)

    def conversations(self, session_key: str, /, *, channel: str, account_id: str) -> list[str]:
        """The session's active bindings on ``channel``'s ``account_id``: where to ask."""
        return [
            record.binding_id
            for record in self._bindings.active_for_session(session_key)
            if record.conversation.channel == channel
            and record.conversation.account_id == account_id
        ]

    async def missed(self, *, channel: str, account_id: str) -> list[str]:
        """The bindings on ``channel``'s ``account_id`` whose button a previous process may
        have owed: this process's, of an agent that hands off, not a task still at work."""
        at_work = {r.session_key for r in await self._subagents.list(*_UNFINISHED_TASK)}
        owed = []
        for record in self._bindings.live():
            conversation = record.conversation
            if conversation.channel != channel or conversation.account_id != account_id:
                continue
            if not self._bindings.mine(record):
                continue  # another process's guild: that process offers it
            if not self._hands_off(record.meta.agent):
                continue
            if record.target_session_key in at_work:
                continue  # still at work: the announcement will bring the button
            owed.append(record.binding_id)
        return owed

    async def due(self, binding_id: str, /) -> DueOffer | None:
        """The button due in the binding's conversation now, if any (None too when the
        binding is no longer active)."""
        record = self._bindings.active(binding_id)
        if record is None:
            return None
        due = self._prompts.due(record, await self._tree(record.target_session_key))
        return DueOffer(record, due) if due is not None else None

    async def mark_prompted(self, offer: DueOffer, /) -> None:
        """Record that ``offer``'s button was posted.

        Raises:
            BindingError: the binding is not live any more.
            StoreError: not recorded; the button may be posted again.
        """
        await self._prompts.mark_prompted(offer.binding.binding_id, offer.due)

    async def _tree(self, session_key: str) -> SessionTree:
        """The session as its agent holds it, or as the log has it (no agent started)."""
        agent = self._runtime.peek(session_key)
        return agent.tree if agent is not None else await self._sessions.load(session_key)
