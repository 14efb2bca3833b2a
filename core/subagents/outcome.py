"""Reading a finished task from its session log: outcome, answer, and the parent's note."""

from __future__ import annotations

from core.agent.endings import (
    BOT_CANCEL_REASONS,
    STOPPING,
    TIMED_OUT,
    cancelled_by,
    capitalised,
    rejected_by,
)
from core.sessions.payloads import (
    TurnCancelledPayload,
    TurnEndedPayload,
    TurnInterruptedPayload,
    TurnStartedPayload,
)
from core.sessions.tree import SessionTree
from core.subagents.records import Outcome

__all__ = ["parent_message", "task_outcome"]


def task_outcome(tree: SessionTree) -> tuple[Outcome, str | None, str]:
    """The outcome of the session's last turn: (outcome, reason, turn id).

    A person's cancel and a person's reject are outcomes of their own, named for the
    person (``Cancelled by @alice``), not failures of the agent."""
    for event in reversed(tree.events):
        match event.data:
            case TurnEndedPayload(reason="completed", turn_id=turn_id):
                return "completed", None, turn_id
            case TurnEndedPayload(reason="rejected", turn_id=turn_id) as ended:
                said = rejected_by(ended.by_name, ended.option)
                return "rejected", capitalised(said), turn_id
            case TurnEndedPayload(reason="error", turn_id=turn_id, error=error):
                return "failed", error or "the model call failed", turn_id
            case TurnEndedPayload(reason="max_steps", turn_id=turn_id, steps=steps):
                return "failed", f"stopped after {steps} steps", turn_id
            case TurnEndedPayload(turn_id=turn_id):
                return "failed", "the session's budget is used up", turn_id
            case TurnCancelledPayload() as cancelled:
                return _cancelled(cancelled)
            case TurnInterruptedPayload(turn_id=turn_id):
                return "failed", "the bot restarted during the task", turn_id
            case TurnStartedPayload(turn_id=turn_id):
                return "failed", "the agent stopped unexpectedly", turn_id
    return "failed", "the task never started", "none"


def _cancelled(cancel: TurnCancelledPayload) -> tuple[Outcome, str | None, str]:
    """A cancel: a person's, or the bot's own (its time ran out, the bot stopped)."""
    turn_id = cancel.turn_id or "cancelled"
    if cancel.by_name is None and cancel.reason == TIMED_OUT:
        return "timed_out", BOT_CANCEL_REASONS[TIMED_OUT], turn_id
    if cancel.by_name is None and cancel.reason == STOPPING:
        return "failed", "the bot stopped during the task", turn_id
    return "cancelled", capitalised(cancelled_by(cancel.by_name, cancel.reason)), turn_id


def parent_message(name: str, outcome: Outcome, result: str) -> str:
    """What a running parent agent is told when its child finishes."""
    return f'<subagent_result name="{name}" outcome="{outcome}">\n{result}\n</subagent_result>'
