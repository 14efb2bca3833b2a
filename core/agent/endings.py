"""How a turn that did not complete is named, in one place: the thread's status line,
its tool lines, a plan line, a subagent's announcement and an approval request's
message all say the same words.

A person's ``/cancel`` and a person's choice of an external agent's reject option
are not failures, and never read as the agent's doing: they name the person
(``cancelled by @alice``, ``rejected by @alice: Reject``). A cancel the bot made
itself (a subagent's time ran out, the bot is stopping) names no person.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "BOT_CANCEL_REASONS",
    "CANCEL",
    "STOPPING",
    "TIMED_OUT",
    "by_whom",
    "cancelled_by",
    "capitalised",
    "is_cancel",
    "rejected_by",
]

CANCEL: Final = "cancel"
"""A withdrawal's reason when a person's ``/cancel`` ended the turn."""
TIMED_OUT: Final = "timed_out"
"""A cancel's reason when a subagent's task ran out of time."""
STOPPING: Final = "stopping"
"""A cancel's reason when the bot stops (the turn is cut off, its queue kept)."""
BOT_CANCEL_REASONS: Final[dict[str, str]] = {
    TIMED_OUT: "no result in time",
    STOPPING: "the bot is stopping",
}
"""Why the bot itself cancelled a turn, as a reader is told."""


def is_cancel(reason: str | None) -> bool:
    """Whether a withdrawal's ``reason`` is a cancel (a person's, or a subagent's time
    running out), which names who or why, rather than a turn that moved on."""
    return reason in (CANCEL, TIMED_OUT)


def by_whom(name: str | None) -> str:
    """``@alice``: a person as the thread names them (never a ping: nothing the bot
    posts may mention anyone)."""
    return f"@{name}" if name else "someone"


def cancelled_by(name: str | None, reason: str | None = None) -> str:
    """``cancelled by @alice``; a cancel of the bot's own says why instead."""
    if name:
        return f"cancelled by {by_whom(name)}"
    why = BOT_CANCEL_REASONS.get(reason or "")
    return f"cancelled: {why}" if why else "cancelled"


def rejected_by(name: str | None, option: str | None) -> str:
    """``rejected by @alice: Reject``: the external agent's option, in its own words."""
    label = " ".join((option or "").split())
    return f"rejected by {by_whom(name)}" + (f": {label}" if label else "")


def capitalised(phrase: str) -> str:
    """The phrase opening a sentence (``Cancelled by @alice``)."""
    return phrase[:1].upper() + phrase[1:]
