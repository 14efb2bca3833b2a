"""Reading a finished task from its session log: outcome, answer, and the parent's note."""

from __future__ import annotations

from core.sessions.tree import SessionTree
from core.subagents.records import Outcome

__all__ = ["parent_message", "task_outcome"]


def task_outcome(tree: SessionTree) -> tuple[Outcome, str | None, str]:
    """The outcome of the session's last turn: (outcome, reason, turn id)."""
    for event in reversed(tree.events):
        payload = event.payload
        if event.type == "turn_ended":
            reason = payload["reason"]
            if reason == "completed":
                return "completed", None, payload["turn_id"]
            if reason == "error":
                return "failed", payload.get("error") or "the model call failed", payload["turn_id"]
            if reason == "max_steps":
                return "failed", f"stopped after {payload['steps']} steps", payload["turn_id"]
            return "failed", "the session's budget is used up", payload["turn_id"]
        if event.type == "turn_cancelled":
            return "failed", "the turn was cancelled", payload.get("turn_id") or "cancelled"
        if event.type == "turn_interrupted":
            return "failed", "the bot restarted during the task", payload["turn_id"]
        if event.type == "turn_started":
            return "failed", "the agent stopped unexpectedly", payload["turn_id"]
    return "failed", "the task never started", "none"


def parent_message(name: str, outcome: Outcome, result: str) -> str:
    """What a running parent agent is told when its child finishes."""
    return f'<subagent_result name="{name}" outcome="{outcome}">\n{result}\n</subagent_result>'
