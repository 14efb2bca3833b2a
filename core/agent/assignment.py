"""Which agent profile runs a session: an ``agent.activated`` event, the last one wins.

A spawn records the agent it starts; an accepted handoff records the agent
it hands over to. Keeping this in the session log (rather than in binding
metadata or memory) means a rebuilt agent, after eviction or a restart,
comes back with the same profile: provider, model, prompt and tools.
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from core.sessions.payloads import register_event_type
from core.sessions.tree import SessionTree

__all__ = ["AGENT_ACTIVATED", "AgentActivatedPayload", "active_agent"]

AGENT_ACTIVATED: Final = "agent.activated"


class AgentActivatedPayload(BaseModel):
    """``agent`` now runs the session; ``by`` is the user or agent that caused it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: str = Field(min_length=1, max_length=100)
    by: str | None = Field(default=None, max_length=100)
    handoff_id: str | None = Field(default=None, max_length=32)
    artifact_id: str | None = Field(default=None, max_length=64)


register_event_type(AGENT_ACTIVATED, "system", AgentActivatedPayload)


def active_agent(tree: SessionTree) -> str | None:
    """The agent the session's last ``agent.activated`` event names, or None (the default)."""
    for event in reversed(tree.events):
        if (activated := event.data_as(AgentActivatedPayload)) is not None:
            return activated.agent
    return None
