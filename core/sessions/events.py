"""The session event: one immutable node of a session's tree.

A session is an append-only sequence of events. Every event records the head
at the time it was appended as ``parent_id``; the events whose kind is in
:data:`ADVANCING_KINDS` are the conversation nodes and move the head to
themselves, so following ``parent_id`` from any conversation node walks back
through conversation nodes only. ``system`` events (turn bookkeeping, queues,
head moves, bookmarks) hang off the head without moving it.
"""

from __future__ import annotations

import builtins
from typing import Any, Final, TypeVar

from pydantic import AwareDatetime, BaseModel, ConfigDict

from core.sessions.payloads import DeliveryMode, EventKind, known_model, read_payload

__all__ = ["ADVANCING_KINDS", "DeliveryMode", "EventKind", "SessionEvent"]

ADVANCING_KINDS: Final = frozenset({"user", "assistant", "tool_boundary"})
"""Kinds whose events move the head to themselves; ``system`` events never do."""

_M = TypeVar("_M", bound=BaseModel)

_CACHE: Final = "_typed_payload"
"""Where :attr:`SessionEvent.data` keeps its model, in the instance's ``__dict__``."""


class SessionEvent(BaseModel):
    """One stored event. Frozen: the log is append-only, nothing is rewritten.

    ``payload`` has been validated against the model registered for ``type``
    (:mod:`core.sessions.payloads`) and is kept as plain JSON data, so events
    of types registered later still load where that type is unknown. Read it
    through :attr:`data` (or :meth:`data_as`), the payload's model, so the
    type checker sees every field a reader uses.
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

    @property
    def data(self) -> BaseModel:
        """The payload as the model registered for ``type``; match on it::

            match event.data:
                case TurnEndedPayload(reason="completed"): ...

        Parsed on first access and kept with the event: a load builds no models (a
        session of 10,000 events loads as fast as before), a reader pays once per event.
        A payload no model reads is an :class:`~core.sessions.payloads.UnknownPayload`
        (never an error): see :func:`~core.sessions.payloads.read_payload`.
        """
        # Not functools.cached_property: model_copy() copies __dict__, so a copy with
        # another payload would keep the old model. Kept beside the payload it was read
        # from, a copy's stale entry is simply not used.
        cached = self.__dict__.get(_CACHE)
        if cached is not None and cached[0] is self.payload:
            data: BaseModel = cached[1]
            return data
        data = read_payload(self.type, self.payload)
        self.__dict__[_CACHE] = (self.payload, data)
        return data

    def data_as(self, model: builtins.type[_M]) -> _M | None:
        """:attr:`data` if it is a ``model`` (a subclass counts), else None.

        The registry is asked first, so an event of another type is passed by without
        parsing its payload: cheap in a scan over a whole log, where ``match`` on
        :attr:`data` would parse every event it meets. (An unreadable payload is None
        here too; to tell one apart, look for an ``UnknownPayload`` in :attr:`data`.)
        """
        registered = known_model(self.type)
        if registered is None or not issubclass(registered, model):
            return None
        data = self.data
        return data if isinstance(data, model) else None
