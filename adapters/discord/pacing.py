"""Pacing the bot token's requests under Discord's global limit, people first.

Discord allows a bot token 50 requests a second in all (interaction answers and
webhook-token requests aside) and tells a bot it went over only with a 429;
discord.py learns the global limit that way, and a bot that keeps hitting it is
banned for an hour. So every request the bot makes with its token passes
through one :class:`Pacer` per token (per account), which starts at most
``[discord] requests_per_second`` of them a second (45 by default: headroom
for what discord.py itself sends), never more than that within any second.

What waits is served by lane, highest first (:class:`Lane`): acknowledging
people (a 🧭 / 📥 / ⚠️ reaction, a reply to a command, an approval prompt),
then deliveries (announcements, final text, intros, notices), then streaming
edits. On a persona webhook (:mod:`adapters.discord.webhooks`), a streaming
edit of a message whose previous edit still waits takes that one's place in the
queue (both callers get the one answer): a stream is never queued twice, so with
a thousand streams each still moves, in turn. The bot token's requests are held
as they are sent (:func:`pace_session`), by lane only.

The lane is the caller's to say, with :func:`lane` around the call (a
reaction is recognised by its route); what says nothing is a delivery. The
per-route buckets stay discord.py's, which reads Discord's headers.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, TypeVar

import aiohttp

__all__ = ["Lane", "Pacer", "lane", "newest_text", "pace_session", "text_source"]

T = TypeVar("T")

BURST = 5
"""Requests that may start at once after a quiet spell: a spawn's thread, intro and
status line go together instead of one every 1/``rate`` s."""
HEADROOM = 2
"""Starts within any one second stay at most ``int(rate) + HEADROOM`` (47 at the default
45), whatever the burst: a request reaches Discord a little after it is let go, and those
let go late in one second can land in the next; with ``rate + BURST`` = 50 let go in a
second against Discord's 50, that drift made global 429s (bench_popular: 2 in a run)."""


class Lane(IntEnum):
    """What a request is for, most urgent first."""

    PEOPLE = 0
    """Acknowledging a person: a reaction on their message, a reply, an approval prompt."""
    DELIVERY = 1
    """An announcement, a final text, an intro or a notice (what says nothing)."""
    STREAM = 2
    """A streaming edit: superseded by the next one of the same message."""


_LANE: ContextVar[Lane] = ContextVar("threadbound_discord_lane", default=Lane.DELIVERY)


@contextlib.contextmanager
def lane(value: Lane) -> Iterator[None]:
    """Requests made inside go in ``value``'s lane (tasks started inside inherit it)."""
    token = _LANE.set(value)
    try:
        yield
    finally:
        _LANE.reset(token)


def current_lane() -> Lane:
    return _LANE.get()


_NEWEST: ContextVar[Callable[[], str] | None] = ContextVar("threadbound_newest", default=None)


@contextlib.contextmanager
def newest_text(provider: Callable[[], str]) -> Iterator[None]:
    """An edit made inside sends what ``provider()`` says when its turn comes, not the text
    it was asked with: a streaming edit that waited carries the stream's newest words."""
    token = _NEWEST.set(provider)
    try:
        yield
    finally:
        _NEWEST.reset(token)


def text_source(content: str) -> Callable[[], str]:
    """What an edit sends, read when it is sent; call it where the edit is asked (the
    caller's context says whether a newer text may replace ``content``)."""
    provider = _NEWEST.get()
    return provider if provider is not None else lambda: content


@dataclass(slots=True, eq=False)
class _Ticket:
    """One request's place in the queue. ``granted`` says when it may go: None, send now;
    a newer ticket, it was superseded (its ``answer`` follows that one's)."""

    lane: Lane
    key: str | None
    granted: asyncio.Future[_Ticket | None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    answer: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Pacer:
    """Lets requests go at most ``rate`` a second, by lane; coalesces streaming edits.

    A request is sent by its own caller, in its own task, once its turn comes: a caller
    cancelled (a stop, a timeout) takes its request with it, as it would unpaced.
    ``clock`` is monotonic seconds and ``sleep`` waits some (real time: Discord's limits
    are); a test gives its own. The dispatcher runs only while something waits.
    """

    def __init__(
        self,
        rate: float,
        *,
        burst: int = BURST,
        one_at_a_time: bool = False,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """``one_at_a_time``: the next request goes only once the one before it has
        returned, however long its ``send`` took (discord.py holds a webhook's request
        until the webhook's bucket, read from Discord's headers, has room again)."""
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = rate
        self._burst = max(1, burst)
        self._one_at_a_time = one_at_a_time
        self._idle = asyncio.Event()
        self._idle.set()
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(self._burst)
        self._stamp = clock()
        self._ceiling = max(1, int(rate) + HEADROOM)
        self._recent: deque[float] = deque()
        """When the requests of the last second started (at most ``_ceiling``)."""
        self._lanes: dict[Lane, deque[_Ticket]] = {lane_: deque() for lane_ in Lane}
        self._streams: dict[str, _Ticket] = {}
        self._dispatcher: asyncio.Task[None] | None = None
        self.started = 0
        """Requests let go so far."""
        self.coalesced = 0
        """Streaming edits that took the place of an earlier one still waiting."""

    async def run(self, send: Callable[[], Awaitable[T]], *, key: str | None = None) -> T:
        """``await send()`` once this request's turn comes; its lane is the context's.

        ``key`` names what a streaming edit changes (the message): a later edit of the
        same key while this one waits takes its place, and this caller gets its answer.
        """
        which = current_lane()
        ticket = _Ticket(which, key if which is Lane.STREAM else None)
        earlier = self._streams.get(ticket.key) if ticket.key is not None else None
        queue = self._lanes[which]
        if earlier is not None and not earlier.granted.done():
            queue[queue.index(earlier)] = ticket  # the newest text, where the first one stood
            _follow(earlier, ticket)
            earlier.granted.set_result(ticket)
            self.coalesced += 1
        else:
            queue.append(ticket)
        if ticket.key is not None:
            self._streams[ticket.key] = ticket
        if self._dispatcher is None or self._dispatcher.done():
            self._dispatcher = asyncio.create_task(self._dispatch())
        try:
            newer = await ticket.granted
        except asyncio.CancelledError:
            self._leave(ticket)
            granted = ticket.granted
            if granted.done() and not granted.cancelled() and granted.result() is None:
                self._idle.set()  # let go, but its caller is gone: the next one may go
            raise
        if newer is not None:  # superseded: the newer edit's answer is this one's too
            result: T = await ticket.answer
            return result
        try:
            sent = await send()
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                ticket.answer.cancel()
            else:
                ticket.answer.set_exception(exc)
                ticket.answer.exception()  # retrieved: nobody may be following it
            raise
        finally:
            self._idle.set()
        ticket.answer.set_result(sent)
        return sent

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._lanes.values())

    def _leave(self, ticket: _Ticket) -> None:
        """A caller that gave up waiting: its request leaves the queue unsent."""
        with contextlib.suppress(ValueError):
            self._lanes[ticket.lane].remove(ticket)
        if ticket.key is not None and self._streams.get(ticket.key) is ticket:
            del self._streams[ticket.key]
        ticket.answer.cancel()

    async def _dispatch(self) -> None:
        """Take a token, then let the most urgent request waiting at that moment go (one
        that arrived during the wait may go first); stop when none waits."""
        while True:
            await self._idle.wait()
            await self._token()
            ticket = self._next()
            if ticket is None:
                self._tokens = min(self._burst, self._tokens + 1)  # not spent
                self._recent.pop()
                return
            if ticket.key is not None and self._streams.get(ticket.key) is ticket:
                del self._streams[ticket.key]
            self.started += 1
            if self._one_at_a_time:
                self._idle.clear()  # set again when this one's send returns
            ticket.granted.set_result(None)

    def _next(self) -> _Ticket | None:
        for queue in self._lanes.values():  # in lane order: people first
            while queue:
                ticket = queue.popleft()
                if not ticket.granted.done():  # (a cancelled caller's is done)
                    return ticket
        return None

    async def _token(self) -> None:
        """Wait for a token of the bucket (``burst`` deep, ``rate`` a second) and for room
        in the last second (at most ``_ceiling`` starts)."""
        while True:
            now = self._clock()
            while self._recent and now - self._recent[0] >= 1.0:
                self._recent.popleft()
            if len(self._recent) >= self._ceiling:
                await self._sleep(1.0 - (now - self._recent[0]))
                continue
            self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            if self._tokens >= 1 - 1e-9:  # (a float short of 1 would never fill up)
                self._tokens = max(0.0, self._tokens - 1)
                self._recent.append(now)
                return
            await self._sleep((1 - self._tokens) / self.rate)


def _follow(older: _Ticket, newer: _Ticket) -> None:
    """``older``'s answer is ``newer``'s, whatever it turns out to be."""

    def copy(done: asyncio.Future[Any]) -> None:
        if older.answer.done():
            return
        if done.cancelled():
            older.answer.cancel()
        elif done.exception() is not None:
            older.answer.set_exception(done.exception())  # type: ignore[arg-type]
        else:
            older.answer.set_result(done.result())

    newer.answer.add_done_callback(copy)


_REACTIONS = "/reactions/"


_EXEMPT = re.compile(r"/webhooks/\d+/[^/?]+|/interactions/")
"""Outside the bot token's global limit (Discord's own rule): webhook-token requests and
interaction callbacks (a webhook's own bucket paces the former: :mod:`webhooks`)."""


def pace_session(trace: aiohttp.TraceConfig, pacer: Pacer) -> None:
    """Hold every request of the client's session until ``pacer`` lets it go.

    On the session, not around discord.py's ``HTTPClient.request``: a request that
    waits in its route's bucket there (a channel's five messages in five seconds)
    would otherwise have been counted already, and a bucket's reset would let many go
    at once, over the global limit. Here a request is counted as it is sent. A
    reaction goes in the people's lane; webhook-token requests and interaction
    callbacks are not held.
    """

    async def hold(_session: aiohttp.ClientSession, _context: Any, params: Any) -> None:
        path = params.url.path
        if _EXEMPT.search(path):
            return
        if _REACTIONS in path:
            with lane(Lane.PEOPLE):
                await pacer.run(_go)
            return
        await pacer.run(_go)

    trace.on_request_start.append(hold)


async def _go() -> None:
    """What a held request does once let go: nothing; the session sends it."""
