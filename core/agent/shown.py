"""What a bound thread shows of an agent's turn beyond its words: where a message ends,
where words were cut off and why, and the bot's notices about the turn.

Every chat platform shows an agent the same way: the model's words stream into a
message under the persona; some events close that message so the next words start
below it, in order (a tool call, a steer, a notice, the turn's end); words a cancel,
a reject or a cutting steer stopped mid-way get a mark saying so, so they never read
as finished; a turn cut off by a stop, a failed turn and a compaction are told by the
bot itself. Deciding that is the same on Discord and Matrix, so it is decided here;
each presenter only renders it (Discord's small-text markdown, Matrix's ``m.notice``).
"""

from __future__ import annotations

from typing import Final

from core.agent.endings import cancelled_by, rejected_by
from core.agent.events import (
    AgentErrorEvent,
    AgentEvent,
    AgentNotice,
    Compacted,
    FileShown,
    SteeringInjected,
    ToolFinished,
    ToolsSkipped,
    ToolStarted,
    TurnCancelled,
    TurnEnded,
    TurnInterrupted,
)
from core.logging import redact_text

__all__ = [
    "CUT_OFF",
    "NOTICE_LIMIT",
    "closes_message",
    "compaction_notice",
    "cut_off_reason",
    "failure_notice",
    "interrupted_notice",
    "notice_of",
]

NOTICE_LIMIT: Final = 300
"""Characters of a model's error shown in a thread (the rest is in the logs)."""
CUT_OFF: Final = "✂️ cut off here: {why}"
"""The mark under words a cancel, a steer or a reject cut off mid-way."""
STEER_CUT: Final = "a new message redirected the agent"

_CLOSING = (
    ToolStarted,
    ToolsSkipped,
    SteeringInjected,
    TurnEnded,
    TurnCancelled,
    TurnInterrupted,
    AgentErrorEvent,
    Compacted,
    FileShown,
    AgentNotice,
)


def closes_message(event: AgentEvent) -> bool:
    """Whether ``event`` ends the message being written: its final text lands whole and
    the next words start a new message below what the event brings (a notice, a file,
    a tool call, the next turn)."""
    if isinstance(event, ToolFinished):
        return event.notice is not None
    return isinstance(event, _CLOSING)


def cut_off_reason(event: AgentEvent) -> str | None:
    """Why the open message's words stopped mid-way, when ``event`` stopped them: a
    person's cancel (``cancelled by @alice``), a person's reject of an external agent's
    call, or a steer that cut an external agent off; None otherwise."""
    if isinstance(event, TurnCancelled):
        return cancelled_by(event.by_name, event.reason)
    if isinstance(event, TurnEnded) and event.reason == "rejected":
        return rejected_by(event.by_name, event.option)
    if isinstance(event, SteeringInjected) and event.cut:
        return STEER_CUT
    return None


def notice_of(event: AgentEvent, name: str, *, prefix: str = "/") -> str | None:
    """The bot's own line in the thread about ``event`` (``name``: the persona), if it
    has one; ``prefix``: how the platform's commands are typed."""
    if isinstance(event, TurnInterrupted):
        return interrupted_notice(event, name)
    if isinstance(event, AgentErrorEvent):
        return failure_notice(event)
    if isinstance(event, Compacted):
        return compaction_notice(event, prefix=prefix)
    if isinstance(event, AgentNotice):
        return event.text
    if isinstance(event, ToolFinished):
        return event.notice
    return None


def failure_notice(event: AgentErrorEvent) -> str:
    """What the thread reads when a turn fails: what failed and that a message retries.

    A model's error says what the provider answered (one line, redacted, short);
    an error of the bot itself is only named, its details stay in the logs.
    """
    if event.internal:
        what = "something went wrong inside the bot (the details are in its logs)"
    else:
        reason = " ".join(redact_text(event.message).split()) or "no reason given"
        if len(reason) > NOTICE_LIMIT:
            reason = reason[: NOTICE_LIMIT - 1] + "…"
        # an external agent's failure names the agent and what it did
        what = reason if event.external else f"the model could not answer: {reason}"
    return f"⚠️ This turn failed: {what}. Your next message starts a new turn."


def interrupted_notice(event: TurnInterrupted, name: str) -> str:
    """What the thread reads where a stop cut a turn off, so nothing looks frozen."""
    if event.stopping:
        return (
            f"⏹️ The bot is stopping, so **{name}**'s turn was cut off here. Messages "
            "already queued are kept; once the bot is back, send a message to carry on."
        )
    return (
        f"⚠️ The bot stopped unexpectedly while **{name}** was working; that turn was cut "
        "off here. Send a message to carry on."
    )


def compaction_notice(event: Compacted, *, prefix: str = "/") -> str:
    """What the thread reads when the older conversation was summarised."""
    why = {
        "overflow": "the model said the conversation no longer fit",
        "command": f"asked with {prefix}compact",
    }.get(event.reason, "to stay within the model's context window")
    return (
        f"🗜️ Compacted the older conversation into a summary ({why}): "
        f"{event.tokens_before:,} → {event.tokens_after:,} tokens. Nothing is deleted; "
        f"{prefix}tree and {prefix}export still show everything."
    )
