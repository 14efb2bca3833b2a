"""The subagent session events: the history behind the ``subagents`` table.

``subagent.spawned`` opens the child's log (so a child whose binding then
fails is a log with nothing else in it, which the spawn removes);
``subagent.completed`` closes its task; ``subagent.child_finished`` is how the
parent session learns of it, with the child's result.
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from core.sessions.payloads import register_event_type
from core.subagents.records import Outcome, SpawnMode

__all__ = [
    "CHILD_FINISHED",
    "COMPLETED",
    "SPAWNED",
    "ChildFinishedPayload",
    "CompletedPayload",
    "SpawnedPayload",
]

SPAWNED: Final = "subagent.spawned"
COMPLETED: Final = "subagent.completed"
CHILD_FINISHED: Final = "subagent.child_finished"


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SpawnedPayload(_Payload):
    agent: str | None
    mode: SpawnMode
    thread: bool
    task: str = Field(min_length=1)
    parent_session_key: str | None = None
    requested_by: str | None = None


class CompletedPayload(_Payload):
    completion_id: str
    outcome: Outcome
    result: str
    reason: str | None = None


class ChildFinishedPayload(_Payload):
    child_session_key: str
    completion_id: str
    agent: str | None
    outcome: Outcome
    result: str


register_event_type(SPAWNED, "system", SpawnedPayload)
register_event_type(COMPLETED, "system", CompletedPayload)
register_event_type(CHILD_FINISHED, "system", ChildFinishedPayload)
