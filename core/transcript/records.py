"""A message a bound thread owes: plain values, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

__all__ = ["SentPart", "ThreadMessage"]


@dataclass(frozen=True, slots=True)
class SentPart:
    """One channel message a part of the text went into, and how it was sent (on
    Discord ``webhook`` or ``bot``: an edit must take the same way)."""

    message_id: str
    path: str


@dataclass(frozen=True, slots=True)
class ThreadMessage:
    """One message of an agent's, as it must end up in its thread.

    ``content`` is the channel adapter's own description of it (the words and
    the tool-call lines in order), enough to render it again after a restart;
    the core stores it and never reads it. ``sent`` lists, in order, the channel
    messages known to show its parts (a long text takes several; a part whose
    post was under way when a process died is found by its text, not posted
    twice). ``open_calls`` names the tool calls whose line in it may still change.
    """

    key: str
    binding_id: str
    session_key: str
    turn_id: str | None
    content: Mapping[str, Any]
    sent: tuple[SentPart, ...] = ()
    open_calls: tuple[str, ...] = ()
    shown: bool = False
    updated_at: datetime | None = field(default=None, compare=False)

    def showing(self, sent: tuple[SentPart, ...]) -> ThreadMessage:
        """The same message, known to be in ``sent``."""
        return replace(self, sent=sent)
