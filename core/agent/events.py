"""What an agent tells its observers: a closed set of event types.

Observers (the Discord adapter streaming into a thread, a progress line, a
test) subscribe to these; the durable record is the session log, not these.
Each type is small and frozen, and ``AgentEvent`` is their union, so an
observer's ``match`` can be checked for exhaustiveness.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.providers.types import ToolCall
from core.sessions.events import DeliveryMode
from core.sessions.payloads import ApprovalOption

__all__ = [
    "AgentErrorEvent",
    "AgentEvent",
    "AgentNotice",
    "ApprovalRequested",
    "ApprovalResolved",
    "Compacted",
    "FileShown",
    "MessageQueued",
    "PlanShown",
    "SteeringInjected",
    "TextDelta",
    "ToolFinished",
    "ToolStarted",
    "ToolsSkipped",
    "TurnCancelled",
    "TurnEnded",
    "TurnInterrupted",
    "TurnStarted",
]


@dataclass(frozen=True, slots=True)
class TurnStarted:
    session_key: str
    turn_id: str
    trigger: DeliveryMode


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """A turn's end; ``reason`` ``rejected``: a person chose an external agent's reject
    option (``by_name`` who, ``option`` its label) and the agent stopped there."""

    session_key: str
    turn_id: str
    reason: str
    steps: int
    by_user_id: str | None = None
    by_name: str | None = None
    option: str | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    session_key: str
    turn_id: str
    step: int
    text: str


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A call starts; ``resumed``: it was started (and asked for approval) before a
    restart, so a line for it may already be in the thread."""

    session_key: str
    turn_id: str
    call: ToolCall
    resumed: bool = False


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A call's result; ``denied``: a person (or the approval timeout) refused it, and
    ``notice`` is a short line for the thread about a failure people should know of."""

    session_key: str
    turn_id: str
    call: ToolCall
    content: str
    is_error: bool
    denied: bool = False
    notice: str | None = None


@dataclass(frozen=True, slots=True)
class Compacted:
    """The older conversation was summarised (``reason``: threshold, overflow, command);
    token counts are estimates of the prompt before and after."""

    session_key: str
    turn_id: str | None
    tokens_before: int
    tokens_after: int
    reason: str


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    """A call waits for Allow / Deny; ``request_id`` (the request event's node id) is what a
    button carries, ``timeout_s`` how long it may still wait."""

    session_key: str
    turn_id: str
    call: ToolCall
    request_id: str
    timeout_s: float
    resumed: bool = False
    """Asked before a restart: its message may already be in the thread."""
    options: tuple[ApprovalOption, ...] = ()
    """An external agent's own answers, one button each (empty: Allow, Allow for the
    session, Deny)."""


@dataclass(frozen=True, slots=True)
class ApprovalResolved:
    """The request of ``call_id`` is over: decided by a person, timed out or withdrawn."""

    session_key: str
    call_id: str
    request_id: str
    decision: str
    by_name: str | None
    name: str = ""
    arguments: str = ""
    """The call, so a message asked before a restart can still be edited to say how it ended."""
    option: str | None = None
    """The label of the external agent's option chosen, in the agent's own words."""
    reason: str | None = None
    """Why it was withdrawn (``"restart"``: the agent's process did not survive one;
    ``"cancel"``: a ``/cancel``, by ``by_name``; ``"stopping"``, ``"timed_out"``: the
    bot cancelled the turn itself)."""


@dataclass(frozen=True, slots=True)
class ToolsSkipped:
    """Planned tool calls that a steering message superseded."""

    session_key: str
    turn_id: str
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True)
class SteeringInjected:
    """Steering reached the turn; ``cut``: it cut off what the agent was doing (an
    external agent cannot take a message mid-prompt, so its prompt was cancelled)."""

    session_key: str
    turn_id: str
    texts: tuple[str, ...]
    cut: bool = False


@dataclass(frozen=True, slots=True)
class MessageQueued:
    """A steer or follow-up arrived while a turn runs and waits for its safe point."""

    session_key: str
    item_id: str
    mode: str
    text: str


@dataclass(frozen=True, slots=True)
class TurnCancelled:
    """A cancel: by a person (``by_user_id``, ``by_name``: ``/cancel``), or by the bot
    itself (both None; ``reason`` says why, see :mod:`core.agent.endings`)."""

    session_key: str
    turn_id: str | None
    dropped: tuple[str, ...] = field(default=())
    by_user_id: str | None = None
    by_name: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class TurnInterrupted:
    """A turn was cut off by the bot stopping: ``stopping`` while it stops cleanly (its
    queued messages are kept), or found at the next start after the process died (the
    log marks the turn interrupted; its unanswered calls got a synthetic result)."""

    session_key: str
    turn_id: str | None
    stopping: bool


@dataclass(frozen=True, slots=True)
class PlanShown:
    """An external agent's plan as it stands now: ``(what, status)`` per entry."""

    session_key: str
    turn_id: str
    entries: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class FileShown:
    """Something the thread should get as a file (a diff too long to read in a message)."""

    session_key: str
    turn_id: str
    name: str
    data: bytes
    caption: str


@dataclass(frozen=True, slots=True)
class AgentNotice:
    """A line about the agent for the people in the thread (from the bot, not the agent)."""

    session_key: str
    text: str


@dataclass(frozen=True, slots=True)
class AgentErrorEvent:
    """A turn failed: the model (``internal`` False: its message may be shown to users),
    or the bot itself (``internal`` True: the message is for the logs only).
    ``external``: an external agent failed, and the message says which and how."""

    session_key: str
    turn_id: str | None
    message: str
    internal: bool = False
    external: bool = False


AgentEvent = (
    TurnStarted
    | TurnEnded
    | TextDelta
    | ToolStarted
    | ToolFinished
    | ApprovalRequested
    | ApprovalResolved
    | Compacted
    | ToolsSkipped
    | SteeringInjected
    | MessageQueued
    | TurnCancelled
    | TurnInterrupted
    | PlanShown
    | FileShown
    | AgentNotice
    | AgentErrorEvent
)
