"""What the bot says in a thread when a binding starts and ends.

Sent by the bot account, not through the persona's webhook: they are the
system speaking about the binding, and a reader must be able to tell them
from the agent's own words.
"""

from __future__ import annotations

from core.bindings.records import SessionBindingRecord

__all__ = ["FAREWELL_REASONS", "farewell", "format_window", "intro"]

FAREWELL_REASONS = {
    "idle-expired": "it was idle for longer than its idle window",
    "max-age-expired": "it reached its maximum age",
    "thread-archived": "the thread was archived and locked",
    "thread-deleted": "the thread was deleted",
    "run-complete": "the subagent finished its task",
    "spawn-failed": "the subagent could not be started",
    "run-failed": "the subagent's task failed",
    "run-cancelled": "the subagent's task was cancelled",
    "run-rejected": "the subagent stopped where its request was rejected",
    "handed-off": "the session was handed off to a new thread",
    "user-unfocus": "it was unfocused",
}


def format_window(ms: int) -> str:
    """``90 minutes``, ``2 hours``, ``1 day``; ``no limit`` for 0."""
    if ms <= 0:
        return "no limit"
    minutes = ms // 60_000
    for size, unit in ((1440, "day"), (60, "hour"), (1, "minute")):
        if minutes >= size and minutes % size == 0:
            count = minutes // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{ms // 1000} seconds"


def intro(record: SessionBindingRecord, persona_name: str) -> str:
    return (
        f"**{persona_name}** is working in this thread. Messages here go to it: "
        "a plain message steers it while it runs, one starting with `>>` is queued as a "
        f"follow-up. Idle window: {format_window(record.idle_timeout_ms)}; "
        f"maximum age: {format_window(record.max_age_ms)}."
    )


def farewell(record: SessionBindingRecord, reason: str) -> str:
    why = FAREWELL_REASONS.get(reason, reason.replace("-", " "))
    return f"This thread is no longer bound to its agent: {why}. The history stays here."
