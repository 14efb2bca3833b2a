"""One stream of what happened in the domain, for whoever shows it.

The services publish (an agent was started, a conversation was bound or let
go, a subagent's task was seen through); each chat account subscribes once
and decides what it shows. Before this there were five ways of being told
(listener lists, setter-injected callbacks, observer registrations), each
wired separately; a forgotten one meant an agent answering into nowhere.

Subscribers are called synchronously, in the order they subscribed, right
where the thing happened (so a presenter is attached before the agent's first
words); one that raises is logged and the others are still told.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from core.logging import get_logger

__all__ = ["EventStream", "Publish", "ignore"]

_log = get_logger("core.stream")

E = TypeVar("E")
T = TypeVar("T", contravariant=True)

Publish = Callable[[T], None]
"""How a service publishes its own events (the stream's ``publish``, or :func:`ignore`)."""


def ignore(_event: object) -> None:
    """Publishes nowhere: a service built without a stream (tests, tools)."""


class EventStream(Generic[E]):
    """Publish and subscribe, typed by the union of the events it carries."""

    def __init__(self) -> None:
        self._handlers: list[Callable[[E], None]] = []

    def subscribe(self, handler: Callable[[E], None]) -> Callable[[], None]:
        """Call ``handler`` with every event from now on; returns the unsubscribe."""
        self._handlers.append(handler)
        return lambda: self._handlers.remove(handler) if handler in self._handlers else None

    def publish(self, event: E) -> None:
        for handler in list(self._handlers):
            try:
                handler(event)
            except Exception:
                _log.error("events.handler_failed", happened=type(event).__name__, exc_info=True)
