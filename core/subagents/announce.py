"""What a completion announcement says: a header by outcome, then the result.

Rendering is separate from choosing the destination (the router) and from
posting (the delivery): it only needs to know whether the destination is the
subagent's own thread, where the persona already streamed its answer and a
header is enough, or a fallback, where the result itself must be carried.
"""

from __future__ import annotations

from typing import Final

from core.subagents.records import Outcome, SpawnMode

__all__ = [
    "HEADERS",
    "MAX_ANNOUNCEMENT",
    "NO_ANSWER",
    "SESSION_LINES",
    "render_completion",
    "render_reply",
]

MAX_ANNOUNCEMENT: Final = 1900
"""Characters; under Discord's 2000, leaving room for a channel's own framing."""

HEADERS: Final[dict[Outcome, str]] = {
    "completed": "✅ **{name}** completed its task.",
    "failed": "❌ **{name}** failed.",
    "timed_out": "⏱️ **{name}** timed out.",
    "cancelled": "⏹️ **{name}** stopped.",
    "rejected": "⛔ **{name}** stopped.",
}
"""The first line by outcome; the reason follows it (a person's cancel or reject names
the person: ``⏹️ **Scout** stopped. Cancelled by @alice``)."""

_STOPPED_BY_A_PERSON: Final[frozenset[Outcome]] = frozenset({"cancelled", "rejected"})

_NO_RESULT = "(no answer was produced)"

NO_ANSWER: Final = "(the subagent finished without an answer)"
"""A reply's text when its task gave no answer."""


SESSION_LINES: Final = {
    "bound": "The session stays active: write in this thread to continue it.",
    "elsewhere": "The session stays active in its thread.",
    "unbound": "The session's thread binding has ended, so the result is posted here.",
}
"""What a completed session's announcement says about its thread, by where it is sent.

``unbound`` names no cause: the thread may be gone or locked, but a person may
also have unfocused it or let the binding expire, and the thread is then still
there to read.
"""


def render_completion(
    *,
    name: str,
    outcome: Outcome,
    result: str,
    mode: SpawnMode,
    bound: bool,
    reason: str | None = None,
    session_bound: bool = True,
) -> str:
    """The announcement text. ``bound``: it goes to the subagent's own thread.

    ``session_bound``: the session still has a live binding (a fallback while
    its binding just ended, a locked or deleted thread, must not claim the
    session stays active there).
    """
    lines = [HEADERS[outcome].format(name=name)]
    if reason and outcome in _STOPPED_BY_A_PERSON:
        lines[0] += f" {reason}"  # "Cancelled by @alice" says it all
    elif reason and outcome != "completed":
        lines[0] += f" Reason: {reason}"
    if mode == "session" and (outcome == "completed" or outcome in _STOPPED_BY_A_PERSON):
        where = "bound" if bound else "elsewhere" if session_bound else "unbound"
        lines.append(SESSION_LINES[where])
    if not bound:
        budget = MAX_ANNOUNCEMENT - sum(len(line) + 1 for line in lines) - 2
        body = result.strip() or _NO_RESULT
        if len(body) > budget:
            body = body[: budget - 1].rstrip() + "…"
        lines.append("")
        lines.append(body)
    return "\n".join(lines)


def render_reply(result: str) -> str:
    """A reply's text: the answer alone, as the spawn while threads are off always posted
    it (no header: the person who asked sees the answer where they asked). It may be
    longer than one message; the channel's sink splits it."""
    return result or NO_ANSWER
