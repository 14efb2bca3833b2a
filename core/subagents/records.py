"""What a subagent is, as the store and the commands see it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict

from core.bindings.records import ConversationRef

__all__ = [
    "Outcome",
    "SpawnMode",
    "SubagentFinished",
    "SubagentRecord",
    "SubagentState",
    "outcome_state",
]

SpawnMode = Literal["run", "session"]
"""``run``: one task, then the thread is let go; ``session``: stays bound for more."""

SubagentState = Literal[
    "starting", "running", "idle", "completed", "failed", "timed_out", "cancelled", "rejected"
]
"""``idle`` is a session-mode subagent that finished its task and waits for more."""

Outcome = Literal["completed", "failed", "timed_out", "cancelled", "rejected"]
"""How a task ended. ``cancelled`` (a person's ``/cancel``) and ``rejected`` (a person
chose an external agent's reject option, and it stopped) are a person's doing, never
counted as failures."""


def outcome_state(outcome: Outcome, mode: SpawnMode) -> SubagentState:
    """The state a subagent is left in by its task's outcome."""
    if outcome == "completed" and mode == "session":
        return "idle"
    return outcome


class SubagentRecord(BaseModel):
    """One spawned subagent. ``requester`` is where the spawn was asked for (the
    completion's requester in routing terms); ``scope`` is the guild whose flags
    applied. ``reply``: a spawn asked while threads are off, whose answer alone is
    posted where it was asked; it is no subagent to list (see
    :meth:`core.subagents.service.SubagentService.list`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_key: str
    parent_session_key: str | None
    agent: str | None
    mode: SpawnMode
    thread: bool
    reply: bool = False
    requester: ConversationRef | None
    requested_by: str | None
    scope: str | None
    task: str
    state: SubagentState
    binding_id: str | None
    outcome_reason: str | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    created_at: AwareDatetime
    updated_at: AwareDatetime

    def moved(self, state: SubagentState, at: datetime, **changes: object) -> SubagentRecord:
        return self.model_copy(update={"state": state, "updated_at": at, **changes})


@dataclass(frozen=True, slots=True)
class SubagentFinished:
    """A subagent's task was seen through: announced once, its run-mode thread let go.
    What comes after an announcement (a handoff's brief button) hangs off this."""

    record: SubagentRecord
