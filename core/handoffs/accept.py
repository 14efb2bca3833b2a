"""Deciding an offered handoff: the use case behind Accept and Reject.

Accept activates the target agent (:func:`core.handoffs.activate.activate`) and
gives it the conversation: the binding's persona and agent become the
target's, and the new agent is shown (``show``) before it gets the brief, so
its first words come under its own name. A target whose profile says
``handoff_thread = "new"`` takes over in a new conversation beside the offer's
instead: the new binding is made first, then the old one is let go
(:data:`HANDED_OFF`), so a session that cannot get its new conversation stays
where it was, and one live binding per session keeps completion routing
unambiguous. Should the new conversation fail, the handoff (accepted already)
is taken over in the offer's conversation rather than not at all.

Reject only records the rejection: the agent carries on, and the brief button
is due again once its next turn ends (:mod:`core.handoffs.prompts`).

Who may decide is the caller's guard (:class:`core.subagents.owners.Owners`),
asked before this.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from core.agent.agent import Agent
from core.bindings.records import BindingMetadata, BindingPersona, SessionBindingRecord
from core.bindings.service import SessionBindingService
from core.config import AgentProfile
from core.errors import ThreadboundError
from core.handoffs.activate import Activation, activate, complete_when_done
from core.handoffs.activation import HandoffRecord
from core.handoffs.service import HandoffService
from core.logging import get_logger
from core.runtime import SessionRuntime

__all__ = ["HANDED_OFF", "Accepted", "Handoffs", "Show"]

_log = get_logger("core.handoffs")

HANDED_OFF: Final = "handed-off"
"""Unbind reason of the conversation an accepted handoff leaves (``handoff_thread = "new"``)."""

Show = Callable[[SessionBindingRecord, Agent], object]
"""Shows the new agent in the binding it now speaks in, before it gets its input."""


@dataclass(frozen=True, slots=True)
class Accepted:
    """An accepted handoff: its target runs the session now, speaking in ``binding``
    (the offer's, or a new one beside it: ``moved``)."""

    handoff: HandoffRecord
    binding: SessionBindingRecord
    moved: bool
    _activation: Activation = field(repr=False)


class Handoffs:
    """Accept or reject an offered handoff in the conversation it was offered in.

    Args:
        runtime: the live agents (the target's is built from the log on Accept).
        handoffs: the handoffs' transitions and table.
        bindings: where the session speaks (its persona, a new conversation).
        profiles: the agent profiles (the target's persona and where it takes over).
    """

    def __init__(
        self,
        runtime: SessionRuntime,
        handoffs: HandoffService,
        bindings: SessionBindingService,
        profiles: Mapping[str, AgentProfile],
    ) -> None:
        self._runtime = runtime
        self._handoffs = handoffs
        self._bindings = bindings
        self._profiles = profiles

    async def accept(
        self, record: SessionBindingRecord, handoff_id: str, /, *, by: str, show: Show
    ) -> Accepted:
        """Accept ``handoff_id``, offered in ``record``'s conversation, in ``by``'s name.

        Raises:
            HandoffError: no such handoff, or it is not offered any more (nothing changed).
            ActivationRefused: the target cannot be activated now (see :func:`activate`).
        """
        where: list[SessionBindingRecord] = []

        async def take_over(agent: Agent, handoff: HandoffRecord) -> None:
            now = await self._give_conversation(record, handoff.to_agent)
            where.append(now)
            show(now, agent)

        activation = await activate(
            runtime=self._runtime,
            handoffs=self._handoffs,
            profiles=self._profiles,
            session_key=record.target_session_key,
            handoff_id=handoff_id,
            actor=by,
            before_input=take_over,
        )
        now = where[0]
        return Accepted(activation.handoff, now, now.binding_id != record.binding_id, activation)

    async def completed(self, accepted: Accepted, /) -> HandoffRecord | None:
        """Mark the handoff ``completed`` once the new agent has worked through the brief
        (run it in the background; a stop first leaves it accepted, for the next start)."""
        return await complete_when_done(
            accepted._activation, handoffs=self._handoffs, runtime=self._runtime
        )

    async def reject(self, session_key: str, handoff_id: str, /, *, by: str) -> HandoffRecord:
        """Reject ``handoff_id`` in ``by``'s name; the agent carries on.

        Raises:
            HandoffError: no such handoff, or it is not offered any more.
        """
        agent = await self._runtime.get(session_key)
        return await self._handoffs.reject(agent.tree, handoff_id, actor=by)

    async def still_offered(self, session_key: str, handoff_id: str, /) -> bool:
        """Whether ``handoff_id`` waits for a decision (a press on it may be answered)."""
        offers = await self._handoffs.list(session_key)
        return any(h.id == handoff_id and h.status == "offered" for h in offers)

    async def _give_conversation(
        self, record: SessionBindingRecord, agent_id: str
    ) -> SessionBindingRecord:
        """The binding the target speaks in, under its persona: a new conversation when its
        profile asks for one (and one can be made), else the offer's."""
        profile = self._profiles[agent_id]  # activate() checked it exists
        persona = BindingPersona.of_agent(self._profiles, agent_id)
        if profile.handoff_thread == "new":
            try:
                return await self._move(record, agent_id, persona)
            except ThreadboundError:
                # The handoff is accepted already: take over here rather than not at all.
                _log.warning(
                    "handoff.new_thread_failed", binding_id=record.binding_id, exc_info=True
                )
        return await self._bindings.update_metadata(
            record.binding_id, BindingMetadata(persona=persona, agent=agent_id)
        )

    async def _move(
        self, record: SessionBindingRecord, agent_id: str, persona: BindingPersona
    ) -> SessionBindingRecord:
        """Bind the session to a new conversation beside ``record``'s, then let that one go.

        The new binding comes first: if the conversation cannot be made, the session
        stays bound where it was.
        """
        conversation = record.conversation
        metadata = record.meta.model_copy(
            update={
                "persona": persona,
                "agent": agent_id,
                "thread_name": f"{persona.name}: handoff"[:100],
                "handed_off_from": conversation.conversation_id,
            }
        )
        new = await self._bindings.bind(
            record.target_session_key,
            record.target_kind,
            conversation.new_beside(),
            metadata=metadata,
            bound_by=record.bound_by,
            scope=record.scope,
        )
        await self._bindings.unbind(record.binding_id, reason=HANDED_OFF)
        return new
