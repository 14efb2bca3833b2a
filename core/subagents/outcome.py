"""Reading a finished task from its session log: outcome, answer, and the parent's note."""

from __future__ import annotations

from typing import Any

from core.agent.endings import (
    BOT_CANCEL_REASONS,
    STOPPING,
    TIMED_OUT,
    cancelled_by,
    capitalised,
    rejected_by,
)
from core.sessions.tree import SessionTree
from core.subagents.records import Outcome

__all__ = ["parent_message", "task_outcome"]


def task_outcome(tree: SessionTree) -> tuple[Outcome, str | None, str]:
    """The outcome of the session's last turn: (outcome, reason, turn id).

    A person's cancel and a person's reject are outcomes of their own, named for the
    person (``Cancelled by @alice``), not failures of the agent."""
    for event in reversed(tree.events):
        payload = event.payload
        if event.type == "turn_ended":
            reason = payload["reason"]
            if reason == "completed":
                return "completed", None, payload["turn_id"]
            if reason == "rejected":
                said = rejected_by(payload.get("by_name"), payload.get("option"))
                return "rejected", capitalised(said), payload["turn_id"]
            if reason == "error":
                return "failed", payload.get("error") or "the model call failed", payload["turn_id"]
            if reason == "max_steps":
                return "failed", f"stopped after {payload['steps']} steps", payload["turn_id"]
            return "failed", "the session's budget is used up", payload["turn_id"]
        if event.type == "turn_cancelled":
            return _cancelled(payload)
        if event.type == "turn_interrupted":
            return "failed", "the bot restarted during the task", payload["turn_id"]
        if event.type == "turn_started":
            return "failed", "the agent stopped unexpectedly", payload["turn_id"]
    return "failed", "the task never started", "none"


def _cancelled(payload: dict[str, Any]) -> tuple[Outcome, str | None, str]:
    """A cancel: a person's, or the bot's own (its time ran out, the bot stopped)."""
    turn_id = payload.get("turn_id") or "cancelled"
    reason = payload.get("reason")
    if payload.get("by_name") is None and reason == TIMED_OUT:
        return "timed_out", BOT_CANCEL_REASONS[TIMED_OUT], turn_id
    if payload.get("by_name") is None and reason == STOPPING:
        return "failed", "the bot stopped during the task", turn_id
    return "cancelled", capitalised(cancelled_by(payload.get("by_name"), reason)), turn_id


def parent_message(name: str, outcome: Outcome, result: str) -> str:
    """What a running parent agent is told when its child finishes."""
    return f'<subagent_result name="{name}" outcome="{outcome}">\n{result}\n</subagent_result>'
