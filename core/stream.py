"""One stream of what happened in the domain, for whoever shows it.

The services publish (an agent was started, a conversation was bound, let go
or changed, a subagent's task was seen through); each feature that reacts
subscribes once, where it is built, and decides what it does. Before this
there were five ways of being told (listener lists, setter-injected
callbacks, observer registrations, channel hooks called beside the events),
each wired separately; a forgotten one meant an agent answering into nowhere.

Subscribers are called synchronously, in the order they subscribed, right
where the thing happened (so a presenter is attached before the agent's first
words); one that raises is logged and the others are still told.

A subscriber with something to send (a thread's intro or farewell) returns it
as an awaitable instead of sending it in the background, and
:meth:`EventStream.publish` returns an awaitable that is done once every
reaction to the event is. A publisher that promises its callers the channel
has been told (a bind, an unbind: a clean shutdown waits for farewells)
awaits it at once, and the reactions then run in its own task, one after the
other, exactly as if it had called them itself; a publisher that does not
await leaves them to a task started on the loop's next turn. A reaction that
fails is logged like a subscriber that raises.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Generic, TypeVar

from core.logging import get_logger

__all__ = ["DONE", "EventStream", "Handler", "Publish", "ignore"]

_log = get_logger("core.stream")

E = TypeVar("E")
T = TypeVar("T", contravariant=True)

Publish = Callable[[T], Awaitable[None]]
"""How a service publishes its own events (the stream's ``publish``, or :func:`ignore`);
awaiting the result waits for the subscribers' reactions."""

Handler = Callable[[E], Awaitable[Any] | None]
"""A subscriber: it acts at once, and may return what it still has to do."""


class _Done:
    """An awaitable that is already done: the reactions of an event nobody reacts to."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # pragma: no cover - makes this a generator


DONE: Awaitable[None] = _Done()


def ignore(_event: object) -> Awaitable[None]:
    """Publishes nowhere: a service built without a stream (tests, tools)."""
    return DONE


class EventStream(Generic[E]):
    """Publish and subscribe, typed by the union of the events it carries."""

    def __init__(self) -> None:
        self._handlers: list[Handler[E]] = []
        self._reacting: set[asyncio.Future[None]] = set()

    def subscribe(self, handler: Handler[E]) -> Callable[[], None]:
        """Call ``handler`` with every event from now on; returns the unsubscribe."""
        self._handlers.append(handler)
        return lambda: self._handlers.remove(handler) if handler in self._handlers else None

    def publish(self, event: E) -> Awaitable[None]:
        """Tell every subscriber; the result is done once their reactions are."""
        reactions: list[Awaitable[Any]] | None = None
        for handler in list(self._handlers):
            try:
                reaction = handler(event)
            except Exception:
                _log.error("events.handler_failed", happened=type(event).__name__, exc_info=True)
                continue
            if reaction is not None:
                if reactions is None:
                    reactions = []
                reactions.append(reaction)
        if reactions is None:
            return DONE
        return _Reactions(type(event).__name__, reactions, self._reacting)


class _Reactions:
    """An event's reactions, not started yet: run in the publisher's task if it awaits
    them at once, else in a task of their own from the loop's next turn."""

    __slots__ = ("_happened", "_pending", "_running", "_started")

    def __init__(
        self,
        happened: str,
        reactions: list[Awaitable[Any]],
        running: set[asyncio.Future[None]],
    ) -> None:
        self._happened = happened
        self._pending: list[Awaitable[Any]] | None = reactions
        self._running = running
        self._started: asyncio.Future[None] | None = None
        asyncio.get_running_loop().call_soon(self._start)

    def _start(self) -> None:
        if self._pending is None:
            return  # the publisher awaited them
        reactions, self._pending = self._pending, None
        self._started = asyncio.ensure_future(_react(self._happened, reactions))
        self._running.add(self._started)  # kept until done: asyncio holds tasks weakly
        self._started.add_done_callback(self._running.discard)

    def __await__(self) -> Generator[Any, None, None]:
        if self._pending is not None:
            reactions, self._pending = self._pending, None
            return _react(self._happened, reactions).__await__()
        if self._started is not None:
            return self._started.__await__()
        return DONE.__await__()


async def _react(happened: str, reactions: list[Awaitable[Any]]) -> None:
    for reaction in reactions:
        try:
            await reaction
        except Exception:
            _log.error("events.handler_failed", happened=happened, exc_info=True)
