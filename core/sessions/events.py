"""The session event: one immutable node of a session's tree.

A session is an append-only sequence of events. Every event records the head
at the time it was appended as ``parent_id``; the events whose kind is in
:data:`ADVANCING_KINDS` are the conversation nodes and move the head to
themselves, so following ``parent_id`` from any conversation node walks back
through conversation nodes only. ``system`` events (turn bookkeeping, queues,
head moves, bookmarks) hang off the head without moving it.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict

__all__ = ["ADVANCING_KINDS", "DeliveryMode", "EventKind", "SessionEvent"]

EventKind = Literal["user", "assistant", "system", "tool_boundary"]
"""What an event is in the conversation; the type registry fixes it per event type."""

DeliveryMode = Literal["normal", "steer", "follow_up"]
"""How a user message reached the model: at once, into a running turn, or after it."""

ADVANCING_KINDS: Final = frozenset({"user", "assistant", "tool_boundary"})
"""Kinds whose events move the head to themselves; ``system`` events never do."""


class SessionEvent(BaseModel):
    """One stored event. Frozen: the log is append-only, nothing is rewritten.

    ``payload`` has been validated against the model registered for ``type``
    (:mod:`core.sessions.payloads`) and is kept as plain JSON data, so events
    of types registered later still load where that type is unknown.
    ``delivery_mode`` is set on ``user_message`` events only.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_key: str
    node_id: str
    parent_id: str | None
    seq: int
    kind: EventKind
    type: str
    payload: dict[str, Any]
    delivery_mode: DeliveryMode | None = None
    created_at: AwareDatetime

    @property
    def advances(self) -> bool:
        """True for conversation nodes, which move the head when appended."""
        return self.kind in ADVANCING_KINDS
