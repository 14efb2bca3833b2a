"""The agent loop: one Agent per session, steering and follow-ups, tools and policies."""

from __future__ import annotations

from core.agent.agent import Agent, AgentBusy, AgentSettings, Submission
from core.agent.events import (
    AgentErrorEvent,
    AgentEvent,
    MessageQueued,
    SteeringInjected,
    TextDelta,
    ToolFinished,
    ToolsSkipped,
    ToolStarted,
    TurnCancelled,
    TurnEnded,
    TurnInterrupted,
    TurnStarted,
)
from core.agent.messages import derive_messages, render_steering
from core.agent.policy import StepInfo, StopPolicy, default_should_continue
from core.agent.tools import Tool, ToolContext, ToolOutcome, ToolRegistry

__all__ = [
    "Agent",
    "AgentBusy",
    "AgentErrorEvent",
    "AgentEvent",
    "AgentSettings",
    "MessageQueued",
    "SteeringInjected",
    "StepInfo",
    "StopPolicy",
    "Submission",
    "TextDelta",
    "Tool",
    "ToolContext",
    "ToolFinished",
    "ToolOutcome",
    "ToolRegistry",
    "ToolStarted",
    "ToolsSkipped",
    "TurnCancelled",
    "TurnEnded",
    "TurnInterrupted",
    "TurnStarted",
    "default_should_continue",
    "derive_messages",
    "render_steering",
]
