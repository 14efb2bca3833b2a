"""What a message's author is shown of what became of it, on every channel alike.

A reaction on the message for how it was delivered, and a one-sentence reply
when it could not be saved or handed over. The channel puts them where its
people see them (a Discord reaction and reply, a Matrix annotation and
``m.in_reply_to``); the marks and the words are decided here, once.
"""

from __future__ import annotations

from typing import Final

from core.attachments import refusal_text
from core.inbox.records import Mode, Outcome

__all__ = [
    "BUSY_MARK",
    "COMMAND_NOT_SAVED",
    "FAILED_MARK",
    "MODE_MARKS",
    "delivered_text",
    "mark_of",
    "not_passed_text",
    "not_saved_text",
    "offline_text",
    "replies_of",
    "unreadable_text",
]

MODE_MARKS: Final = {"steer": "🧭", "follow_up": "📥", "started": "▶️"}
"""The reaction that shows which mode a thread message was delivered in."""
FAILED_MARK: Final = "⚠️"
BUSY_MARK: Final = MODE_MARKS["follow_up"]
"""Queued for the process that runs the session now: like a follow-up, it comes later."""


def mark_of(outcome: Outcome) -> str | None:
    """The reaction for ``outcome``; None when the message shows nothing."""
    if outcome.kind == "delivered":
        return MODE_MARKS["started" if outcome.started else outcome.mode or "steer"]
    if outcome.kind == "busy":
        return BUSY_MARK
    if outcome.kind == "failed":
        return FAILED_MARK
    return None


def replies_of(outcome: Outcome, name: str) -> list[str]:
    """The replies ``outcome`` owes its author, ``name`` being whom it was for."""
    replies = []
    if outcome.kind == "failed" and outcome.tell:
        replies.append(not_passed_text(name, outcome.reason))
    if outcome.refused and outcome.kind in ("delivered", "empty"):
        replies.append(refusal_text(list(outcome.refused)))
    return replies


def not_passed_text(name: str, reason: str | None) -> str:
    return (
        f"⚠️ This message could not be passed to **{name}**: {reason}. "
        f"It stays queued: it goes to {name} with the next message here, or "
        "when the bot restarts."
    )


def not_saved_text(name: str) -> str:
    return (
        f"⚠️ This message could not be saved, so it did not reach **{name}** "
        "(the bot's store did not answer). Please send it again."
    )


def offline_text(
    name: str, count: int, first: str, last: str, *, cut_at: str | None = None, limit: int = 0
) -> str:
    """A thread's one notice about what was written there while the bot was offline:
    ``count`` people's messages, from the link ``first`` to ``last``; ``cut_at``, the
    link of the first message left unread when only ``limit`` were read back."""
    lines = []
    if count:
        span = first if count == 1 else f"from {first} to {last}"
        plural = "message was" if count == 1 else "messages were"
        they = "it goes" if count == 1 else "they go"
        lines.append(
            f"📬 While the bot was offline, {count} {plural} written here ({span}); "
            f"{they} to **{name}** now, in the order written."
        )
    if cut_at is not None:
        lines.append(
            f"Only the first {limit} were read back (`[discord] catch_up_max_messages`): "
            f"messages from {cut_at} on did not reach {name}. Repeat what still matters."
        )
    return "\n".join(lines)


def unreadable_text(said: str) -> str:
    """A thread's notice that what was written while the bot was offline is lost."""
    return (
        "⚠️ What was written here while the bot was offline could not be read back "
        f"({said}): repeat anything that still matters."
    )


COMMAND_NOT_SAVED: Final = (
    "⚠️ Your message could not be saved (the bot's store did not answer); send it again."
)
"""The answer to a steer or follow-up command whose message the inbox could not record."""


def delivered_text(outcome: Outcome, message: str, mode: Mode) -> str:
    """A steer or follow-up command's answer: what became of ``message``."""
    if outcome.kind == "delivered":
        if outcome.started:
            return f"Started a turn with: {message}"
        word = "Steering" if mode == "steer" else "Queued as a follow-up"
        return f"{word}: {message}"
    if outcome.kind == "held":
        return (
            "Received; it goes to the agent as soon as what was written here while the bot "
            f"was offline has been read back: {message}"
        )
    if outcome.kind == "busy":
        return (
            "Queued: another bot process runs this session right now, and it gets your "
            f"message from there: {message}"
        )
    if outcome.kind == "failed":
        return (
            f"⚠️ Not passed on: {outcome.reason}. It stays queued: it goes to the agent "
            "with the next message here, or when the bot restarts."
        )
    return "Already received."
