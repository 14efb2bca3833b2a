"""Subagents: spawn, watch the task, announce its completion once, tell the parent."""

from __future__ import annotations

from core.subagents import events as _events  # registers the subagent.* event types
from core.subagents.announce import render_completion
from core.subagents.delivery import CompletionDelivery, CompletionSink, Posted, SinkRegistry
from core.subagents.records import Outcome, SpawnMode, SubagentRecord, SubagentState
from core.subagents.service import Spawned, SpawnRefused, SpawnRequest, SubagentService

del _events

__all__ = [
    "CompletionDelivery",
    "CompletionSink",
    "Outcome",
    "Posted",
    "SinkRegistry",
    "SpawnMode",
    "SpawnRefused",
    "SpawnRequest",
    "Spawned",
    "SubagentRecord",
    "SubagentService",
    "SubagentState",
    "render_completion",
]
