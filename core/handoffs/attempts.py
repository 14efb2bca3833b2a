"""A brief asked for, and how its consolidation turn ended, read from the session log.

Pressing "Ready — produce the brief" first records ``brief.requested`` (who
asked, from which agent to which), then sends the consolidation message, which
starts a turn of its own: the first turn that starts after the request is its
consolidation turn. How that turn ended is in the log, whatever process was
running it: ``turn_ended`` (with its ``reason``), ``turn_cancelled`` (a
``/cancel``, or a clean stop), ``turn_interrupted`` (a ``kill -9``, closed by
the next process that loads the session). Only a turn that ended ``completed``
may become a brief: an answer cut off half-way never does.

Each attempt is, in the log's terms:

- ``writing``: its consolidation turn has not ended (or not started) yet;
- ``written``: a handoff was offered from its agent after it (the brief is an
  artifact, and the offer carries it);
- ``failed``: its turn ended (however it ended) and no handoff was offered, or
  a later request replaced it before anything happened. The log cannot tell a
  process that died before the offer from one that refused an empty answer, and
  need not: either way no brief was offered, and the button is due again.

A process that died between the request and the consolidation message leaves a
request whose "consolidation turn" is the next turn a person started: it ends
without an offer and counts as failed, which is what it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.agent.endings import rejected_by
from core.handoffs.service import EVENT_TYPES, HandoffEventPayload
from core.sessions.events import SessionEvent
from core.sessions.payloads import (
    AssistantMessagePayload,
    TurnCancelledPayload,
    TurnEndedPayload,
    TurnInterruptedPayload,
    TurnStartedPayload,
    register_event_type,
)

__all__ = [
    "BRIEF_REQUESTED",
    "TURN_ENDS",
    "AttemptState",
    "BriefAttempt",
    "BriefRequestedPayload",
    "attempt_after",
    "attempts",
]

BRIEF_REQUESTED: Final = "brief.requested"
TURN_ENDS: Final = frozenset({"turn_ended", "turn_cancelled", "turn_interrupted"})
"""The events that close a turn, however it went."""
_TurnEnd = TurnEndedPayload | TurnCancelledPayload | TurnInterruptedPayload
"""Their payloads."""

AttemptState = Literal["writing", "written", "failed"]


class BriefRequestedPayload(BaseModel):
    """``actor`` asked ``from_agent`` for the brief that hands over to ``to_agent``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    from_agent: str = Field(min_length=1, max_length=100)
    to_agent: str = Field(min_length=1, max_length=100)
    actor: str = Field(min_length=1, max_length=100)


register_event_type(BRIEF_REQUESTED, "system", BriefRequestedPayload)


@dataclass(frozen=True, slots=True)
class BriefAttempt:
    """One ``brief.requested`` and what followed it in the log."""

    request: SessionEvent
    asked: BriefRequestedPayload
    """The request's payload: who asked whom."""
    turn_id: str | None = None
    """The consolidation turn (None: none has started since the request)."""
    end: SessionEvent | None = None
    """The event that closed the consolidation turn (None: it has not ended)."""
    answer: str = ""
    """The last non-empty text the agent said in the consolidation turn."""
    offered: bool = False
    """A handoff from the agent was offered after the request."""
    replaced: bool = False
    """A later request came before the consolidation turn ended."""

    @property
    def agent(self) -> str:
        return self.asked.from_agent

    @property
    def completed(self) -> bool:
        """The consolidation turn ended normally: only then may its answer be the brief."""
        end = self.end.data if self.end is not None else None
        return isinstance(end, TurnEndedPayload) and end.reason == "completed"

    @property
    def state(self) -> AttemptState:
        if self.offered:
            return "written"
        if self.end is None and not self.replaced:
            return "writing"
        return "failed"

    @property
    def settled_seq(self) -> int:
        """Where in the log the attempt was over: its turn's end, else its request."""
        return self.end.seq if self.end is not None else self.request.seq

    def ending(self) -> str:
        """How the consolidation turn ended, in words (for a refusal)."""
        if self.end is None:
            return "was stopped before it ended"
        match self.end.data:
            case TurnCancelledPayload():
                return "was cancelled"
            case TurnInterruptedPayload():
                return "was cut off by a bot restart"
            case TurnEndedPayload(reason="completed"):
                return "ended"
            case TurnEndedPayload(reason="rejected", by_name=name, option=option):
                return f"was stopped: {rejected_by(name, option)}"
            case TurnEndedPayload(reason="error", error=error):
                return f"failed ({error or 'the model call failed'})"
            case TurnEndedPayload(reason="max_steps", steps=steps):
                return f"was stopped after {steps} steps"
            case TurnEndedPayload(reason="budget"):
                return "was stopped: the session's budget is used up"
        return "was stopped before it ended"


def attempts(events: Iterable[SessionEvent]) -> list[BriefAttempt]:
    """Every brief asked for in ``events`` (a session's, in ``seq`` order), oldest first."""
    found: list[BriefAttempt] = []
    current: BriefAttempt | None = None
    for event in events:
        if (asked := event.data_as(BriefRequestedPayload)) is not None:
            if current is not None:
                found.append(_replaced(current))
            current = BriefAttempt(request=event, asked=asked)
            continue
        if current is None:
            continue
        current = _step(current, event)
    if current is not None:
        found.append(current)
    return found


def attempt_after(events: Iterable[SessionEvent], request_seq: int) -> BriefAttempt:
    """The attempt the ``brief.requested`` event at ``request_seq`` opened.

    Raises:
        LookupError: no such request in ``events``.
    """
    for attempt in attempts(events):
        if attempt.request.seq == request_seq:
            return attempt
    raise LookupError(f"no {BRIEF_REQUESTED} event at seq {request_seq}")


def _replaced(attempt: BriefAttempt) -> BriefAttempt:
    if attempt.end is not None or attempt.offered:
        return attempt
    return replace(attempt, replaced=True)


def _step(attempt: BriefAttempt, event: SessionEvent) -> BriefAttempt:
    """``attempt`` once ``event`` (a later one) is taken into account."""
    if attempt.end is None and attempt.turn_id is None:
        if (started := event.data_as(TurnStartedPayload)) is not None:
            return replace(attempt, turn_id=started.turn_id)
        if _turn_end(event) is not None:  # stopped before its turn had started
            return replace(attempt, end=event)
        return attempt
    if attempt.end is None:
        reply = event.data_as(AssistantMessagePayload)
        if reply is not None and reply.turn_id == attempt.turn_id:
            return replace(attempt, answer=reply.text) if reply.text.strip() else attempt
        end = _turn_end(event)
        if end is not None and end.turn_id == attempt.turn_id:
            return replace(attempt, end=event)
        return attempt
    if event.type == EVENT_TYPES["offered"] and not attempt.offered:
        offer = event.data_as(HandoffEventPayload)
        if offer is not None and offer.from_agent == attempt.agent:
            return replace(attempt, offered=True)
    return attempt


def _turn_end(event: SessionEvent) -> _TurnEnd | None:
    """The payload of ``event`` if it closes a turn (its type is asked first: no parsing
    of the events in between)."""
    if event.type not in TURN_ENDS:
        return None
    data = event.data
    return data if isinstance(data, _TurnEnd) else None
