"""When the "Ready — produce the brief" button is due in a conversation.

One rule, for the session's current agent when its profile hands off
(``handoff_to``):

- the button is due once a turn of the agent has ended (``turn_ended``) after
  the last *reset*, and the conversation has not been offered it since that
  reset;
- a reset is whatever makes a new brief possible: the agent's activation (a
  spawn, an accepted handoff to it), a rejected handoff from it ("Scout
  carries on"), and a brief of it that was asked for and never offered (its
  consolidation turn cut off by a stop or a ``kill -9``, cancelled, failed;
  see :mod:`core.handoffs.attempts`). A failed brief's reset is its turn's
  end, so it is the *next* turn that brings the button back;
- never while a handoff from the agent is offered or accepted, nor while its
  brief is being written.

Everything but "offered since" is read from the session log. Where the
button was last offered is the binding's metadata, ``brief_prompts``: per
agent, the session's last ``seq`` when the button was found due and posted.
Both are durable, so a restarted process reaches the same answer: it posts a
button its predecessor owed, and none twice. (The earlier rule, "posted once,
never again", kept the agents in ``brief_prompted``; such an entry counts as
offered at the agent's activation.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from core.agent.assignment import AgentActivatedPayload, active_agent
from core.bindings.records import BindingMetadata, SessionBindingRecord
from core.bindings.service import SessionBindingService
from core.config import AgentProfile
from core.handoffs.attempts import attempts
from core.handoffs.service import EVENT_TYPES, HandoffEventPayload, replay
from core.sessions.events import SessionEvent
from core.sessions.payloads import TurnEndedPayload
from core.sessions.tree import SessionTree

__all__ = [
    "LEGACY_PROMPTED_KEY",
    "PROMPTS_KEY",
    "BriefPrompts",
    "DueBrief",
    "brief_due",
    "prompted_at",
]

PROMPTS_KEY: Final = "brief_prompts"
"""Binding metadata: agent -> the session's last seq when its brief button was posted."""
LEGACY_PROMPTED_KEY: Final = "brief_prompted"
"""Binding metadata of the earlier rule: the agents whose button was ever posted."""


@dataclass(frozen=True, slots=True)
class DueBrief:
    """The brief button is due for ``agent`` (handing off to ``to_agent``), as the
    session stood at ``seq``."""

    agent: str
    to_agent: str
    seq: int


def brief_due(events: Iterable[SessionEvent], agent: str, prompted: int | None) -> bool:
    """Whether ``agent``'s button is due, by the log and where it was last offered.

    ``events``: the session's, in ``seq`` order; ``prompted``: the seq at which the
    button was last posted in the conversation (None: never).
    """
    events = tuple(events)
    reset = 0
    last_turn = 0
    for event in events:
        if _opens_anew(event, agent):
            reset = event.seq
        elif event.data_as(TurnEndedPayload) is not None:
            last_turn = event.seq
    for attempt in attempts(events):
        if attempt.agent != agent:
            continue
        if attempt.state == "writing":
            return False
        if attempt.state == "failed":
            reset = max(reset, attempt.settled_seq)
    key = events[0].session_key if events else ""
    if any(
        h.from_agent == agent and h.status in ("offered", "accepted") for h in replay(key, events)
    ):
        return False
    return last_turn > reset and (prompted is None or prompted < reset)


def prompted_at(
    metadata: BindingMetadata, agent: str, events: Iterable[SessionEvent]
) -> int | None:
    """Where the conversation was last offered ``agent``'s button (see :data:`PROMPTS_KEY`)."""
    if agent in metadata.brief_prompts:
        return metadata.brief_prompts[agent]
    if agent in metadata.brief_prompted:
        return max(
            (
                e.seq
                for e in events
                if (activated := e.data_as(AgentActivatedPayload)) is not None
                and activated.agent == agent
            ),
            default=0,
        )
    return None


class BriefPrompts:
    """The brief button's rule for a conversation, and its record of having posted it.

    Args:
        bindings: where :meth:`mark_prompted` records the posting.
        profiles: the agent profiles (which agents hand off, and to whom).
    """

    def __init__(
        self, bindings: SessionBindingService, profiles: Mapping[str, AgentProfile]
    ) -> None:
        self._bindings = bindings
        self._profiles = profiles

    def due(self, record: SessionBindingRecord, tree: SessionTree) -> DueBrief | None:
        """The button due in ``record``'s conversation for the session ``tree`` holds, if any."""
        agent = active_agent(tree)
        profile = self._profiles.get(agent or "")
        if agent is None or profile is None or not profile.handoff_to:
            return None
        events = tree.events
        if not brief_due(events, agent, prompted_at(record.meta, agent, events)):
            return None
        return DueBrief(agent, profile.handoff_to[0], tree.last_seq)

    async def mark_prompted(self, binding_id: str, due: DueBrief) -> SessionBindingRecord:
        """Record that ``due``'s button was posted in the binding's conversation.

        Raises:
            BindingError: the binding is not live any more.
            StoreError: not recorded; the button may be posted again.
        """
        current = self._bindings.active(binding_id)
        known = dict(current.meta.brief_prompts) if current is not None else {}
        return await self._bindings.update_metadata(
            binding_id, BindingMetadata(brief_prompts={**known, due.agent: due.seq})
        )


def _opens_anew(event: SessionEvent, agent: str) -> bool:
    """``agent`` activated, or a handoff from it rejected: a brief is possible again."""
    if (activated := event.data_as(AgentActivatedPayload)) is not None:
        return activated.agent == agent
    if event.type == EVENT_TYPES["rejected"]:
        rejected = event.data_as(HandoffEventPayload)
        return rejected is not None and rejected.from_agent == agent
    return False
