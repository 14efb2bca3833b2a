"""What the inbox holds and what became of it: plain values, no I/O.

A message is described the way its channel gave it, before anything could
fail: its text, who wrote it, where, and its files as references (a name, a
size, where to fetch it), so a file that cannot be fetched later never costs
the words that came with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from core.attachments import Refused
from core.bindings.records import ConversationRef
from core.sessions.payloads import SteerOrFollowUp as Mode

__all__ = [
    "FileRef",
    "InboxMessage",
    "InboxPress",
    "Mode",
    "Outcome",
    "OutcomeKind",
    "Source",
]

Source = Literal["live", "catch_up", "command", "schedule"]
"""How a message reached the bot: as it was written, read back after a downtime,
or typed as a command (``/steer``), or put there by a scheduled job (its run)."""

OutcomeKind = Literal["delivered", "empty", "held", "busy", "failed", "dropped", "duplicate"]


@dataclass(frozen=True, slots=True)
class FileRef:
    """A file attached to a message, as the channel announced it (not downloaded yet)."""

    name: str
    url: str
    size: int
    content_type: str | None = None


@dataclass(frozen=True, slots=True)
class InboxMessage:
    """One message a person wrote in a bound conversation.

    ``item_id`` is the channel's own id for it (a Discord message id), the key
    that makes every handling of it idempotent; ``seq`` orders a conversation's
    messages (a snowflake grows with time). ``mode`` is what a command asked
    for; None lets the text say (a ``>>`` prefix) or the binding's default.
    """

    conversation: ConversationRef
    item_id: str
    seq: int
    text: str
    author_id: str | None = None
    author_name: str | None = None
    files: tuple[FileRef, ...] = ()
    mode: Mode | None = None
    source: Source = "live"
    received_at: datetime | None = None
    attempts: int = 0
    """Failed attempts to hand it over so far."""
    notified: bool = False
    """The author was already told that handling it failed."""


@dataclass(frozen=True, slots=True)
class InboxPress:
    """A button press that changes state (a brief asked for, an approval, a handoff), or
    a command typed as a message on a channel without commands of its own (Matrix's ``!``).

    Recorded before it acts, keyed by the channel's id for the press: the same
    press delivered twice acts once, and one a crash cut off is found at the
    next start and closed visibly (its button offered again, or its decision
    applied). ``target`` is what the button acts on (a binding, an approval
    request, a handoff); ``message_id`` the message that carries the button.
    """

    conversation: ConversationRef
    item_id: str
    seq: int
    action: str
    target: str
    message_id: str | None = None
    author_id: str | None = None
    author_name: str | None = None
    received_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one attempt to hand a message to its session came to.

    - ``delivered``: in the session's log (``mode`` says how; ``started``: it
      started a turn); ``refused`` lists files that did not reach the model.
    - ``empty``: nothing of it could reach the model (only refused files).
    - ``held``: recorded, waiting for the conversation's catch-up to finish
      (``recorded_before``: a previous process had recorded it already, so it is not
      news of the downtime).
    - ``busy``: another live bot process runs the session; it stays queued.
    - ``failed``: handing it over failed (``reason``); it stays queued.
      ``tell`` is set on the first failure only: the author is told once.
    - ``dropped``: nobody to give it to (the conversation is no longer bound).
    - ``duplicate``: recorded and handled before (a redelivered event).
    """

    kind: OutcomeKind
    mode: Mode | None = None
    started: bool = False
    reason: str | None = None
    tell: bool = False
    refused: tuple[Refused, ...] = field(default=())
    recorded_before: bool = False
