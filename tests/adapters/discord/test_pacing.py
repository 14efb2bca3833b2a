"""The bot token's pacer: a rate never exceeded, people first, streaming edits coalesced;
and the 429 watch that logs an incident once."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs

from adapters.discord.pacing import Lane, Pacer, lane, pace_session
from adapters.discord.rate_limits import RateLimitWatch, route_of


class Time:
    """Monotonic seconds that move only when the pacer sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.held = asyncio.Event()
        self.held.set()

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)  # what was started before the wait runs at the time it started
        await self.held.wait()  # a test may keep the pacer waiting while it queues more
        self.now += seconds


def pacer(rate: float = 10, burst: int = 1) -> tuple[Pacer, Time]:
    clock = Time()
    return Pacer(rate, burst=burst, clock=clock, sleep=clock.sleep), clock


async def test_requests_start_no_faster_than_the_rate() -> None:
    pace, clock = pacer(rate=10, burst=2)
    started: list[float] = []

    async def send() -> None:
        started.append(clock.now)

    await asyncio.gather(*(pace.run(send) for _ in range(12)))
    assert len(started) == 12
    for first in started:  # any window of one second holds at most rate + burst starts
        assert sum(1 for t in started if first <= t < first + 1) <= 12
    assert started[:2] == [0.0, 0.0]  # the burst
    assert started[-1] == pytest.approx(1.0)  # then one every 0.1 s


async def test_no_second_sees_more_than_the_rate_and_two_however_deep_the_burst() -> None:
    """The bug: 45 a second plus a burst of 5 let exactly Discord's 50 go in a second, and
    requests let go late in one second landed in the next: global 429s."""
    pace, clock = pacer(rate=10, burst=5)
    started: list[float] = []

    async def send() -> None:
        started.append(clock.now)

    await asyncio.gather(*(pace.run(send) for _ in range(40)))
    assert started[:5] == [0.0] * 5  # the burst still goes at once after a quiet spell
    for first in started:
        assert sum(1 for t in started if first <= t < first + 1 - 1e-9) <= 12  # 10 + 2


async def test_people_go_first_then_deliveries_then_streams() -> None:
    pace, _ = pacer(rate=10, burst=1)
    order: list[str] = []

    async def send(name: str) -> str:
        order.append(name)
        return name

    first = asyncio.ensure_future(pace.run(lambda: send("first")))  # takes the one token
    await asyncio.sleep(0)
    with lane(Lane.STREAM):
        stream = asyncio.ensure_future(pace.run(lambda: send("stream"), key="m1"))
    delivery = asyncio.ensure_future(pace.run(lambda: send("delivery")))
    with lane(Lane.PEOPLE):
        person = asyncio.ensure_future(pace.run(lambda: send("person")))
    await asyncio.gather(first, stream, delivery, person)
    assert order == ["first", "person", "delivery", "stream"]


async def test_a_waiting_streaming_edit_is_replaced_by_the_next_one() -> None:
    """Never queued twice: the newer edit takes the older one's place, both get its answer."""
    pace, clock = pacer(rate=10, burst=1)
    sent: list[str] = []

    async def edit(text: str) -> str:
        sent.append(text)
        return f"shown: {text}"

    clock.held.clear()  # the pacer waits for its next token until the edits are queued
    with lane(Lane.DELIVERY):
        blocker = asyncio.ensure_future(pace.run(lambda: edit("other")))
    await asyncio.sleep(0)
    with lane(Lane.STREAM):
        older = asyncio.ensure_future(pace.run(lambda: edit("Paris has"), key="PATCH m1"))
        await asyncio.sleep(0)
        newer = asyncio.ensure_future(pace.run(lambda: edit("Paris has three"), key="PATCH m1"))
        other = asyncio.ensure_future(pace.run(lambda: edit("Rome"), key="PATCH m2"))
    await asyncio.sleep(0)
    clock.held.set()
    results = await asyncio.gather(blocker, older, newer, other)
    assert sent == ["other", "Paris has three", "Rome"]
    assert results[1] == results[2] == "shown: Paris has three"
    assert pace.coalesced == 1


async def test_a_failure_reaches_its_caller() -> None:
    pace, _ = pacer()

    async def boom() -> None:
        raise RuntimeError("refused")

    with pytest.raises(RuntimeError, match="refused"):
        await pace.run(boom)
    assert pace.waiting == 0


async def test_the_session_s_requests_are_held_and_reactions_go_first() -> None:
    """Paced as they are sent (after discord.py's wait in a route's bucket, so a bucket's
    reset never lets many go at once); webhook-token requests are not held."""
    pace, clock = pacer(rate=10, burst=1)
    trace = aiohttp.TraceConfig()
    pace_session(trace, pace)
    (hold,) = trace.on_request_start
    sent: list[str] = []

    async def request(path: str) -> None:
        await hold(None, None, SimpleNamespace(url=SimpleNamespace(path=f"/api/v10{path}")))
        sent.append(path)

    clock.held.clear()
    first = asyncio.ensure_future(request("/channels/1/messages"))
    await asyncio.sleep(0)
    later = asyncio.ensure_future(request("/channels/2/messages"))
    reaction = asyncio.ensure_future(request("/channels/3/messages/4/reactions/%F0%9F%A7%AD/@me"))
    webhook = asyncio.ensure_future(request("/webhooks/123456789012345678/tok/messages/1"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert sorted(sent) == [  # the one token's, and the webhook's, not held at all
        "/channels/1/messages",
        "/webhooks/123456789012345678/tok/messages/1",
    ]
    clock.held.set()
    await asyncio.gather(first, later, reaction, webhook)
    assert sent[2:] == [
        "/channels/3/messages/4/reactions/%F0%9F%A7%AD/@me",
        "/channels/2/messages",
    ]


class TestRateLimitWatch:
    @staticmethod
    def answer(path: str, **headers: str) -> Any:
        response = SimpleNamespace(status=429, headers=headers)
        return SimpleNamespace(
            response=response, method="POST", url=SimpleNamespace(path=f"/api/v10{path}")
        )

    async def test_an_incident_is_logged_once_with_its_scope(self) -> None:
        clock = Time()
        watch = RateLimitWatch("default", clock=clock)
        path = "/webhooks/1234567890123456789/secret-token/messages/1234567890123456790"
        limited = self.answer(path, **{"X-RateLimit-Scope": "user", "Retry-After": "2"})
        with capture_logs() as logs:
            await watch._ended(None, None, limited)  # type: ignore[arg-type]
            clock.now += 1
            await watch._ended(None, None, limited)  # type: ignore[arg-type]  # same incident
            clock.now += 2
            await watch._ended(None, None, limited)  # type: ignore[arg-type]  # a new one
        events = [e for e in logs if e["event"] == "discord.rate_limited"]
        assert len(events) == 2
        assert (watch.limited, watch.incidents) == (3, 2)
        assert events[0]["scope"] == "user"
        assert events[0]["route"] == "/webhooks/{id}/{token}/messages/{id}"
        assert "secret-token" not in str(events)

    def test_a_route_names_no_id_and_no_token(self) -> None:
        assert route_of("/api/v10/channels/1234567890123456789/messages?x=1") == (
            "/channels/{id}/messages"
        )


async def test_a_streaming_edit_that_waited_sends_the_newest_words() -> None:
    """The edit is asked with the text of its time; while it waits its turn (the webhook
    busy with other threads) the stream grows; what goes is the newest text, and the
    stream counts that as shown (no second edit for words already there)."""
    from adapters.discord.pacing import text_source
    from adapters.discord.streaming import StreamingMessage
    from core.clock import FakeClock

    clock = FakeClock()
    turn = asyncio.Event()
    edits: list[str] = []

    class WaitingSink:
        async def send(self, content: str) -> str:
            return "m1"

        async def edit(self, message_id: str, content: str) -> str:
            text = text_source(content)  # read where the edit is asked, sent later
            await turn.wait()
            edits.append(text())
            return message_id

    stream = StreamingMessage(WaitingSink(), clock=clock)
    stream.append("Paris")
    for _ in range(5):
        await asyncio.sleep(0)
    stream.append(" has")
    await clock.advance(1)  # the edit is asked ("Paris has") and waits its turn
    stream.append(" three options")
    turn.set()
    await stream.close()
    assert edits == ["Paris has three options"]


async def test_a_cancelled_caller_takes_its_request_with_it() -> None:
    """As unpaced: a caller that gives up (a stop, a timeout) sends nothing, and its place
    goes to the next request."""
    pace, clock = pacer(rate=10, burst=1)
    sent: list[str] = []

    async def send(name: str) -> None:
        sent.append(name)

    clock.held.clear()
    first = asyncio.ensure_future(pace.run(lambda: send("first")))
    gone = asyncio.ensure_future(pace.run(lambda: send("gone")))
    kept = asyncio.ensure_future(pace.run(lambda: send("kept")))
    await asyncio.sleep(0)
    gone.cancel()
    clock.held.set()
    await asyncio.gather(first, kept)
    assert sent == ["first", "kept"]
    assert gone.cancelled()
    assert pace.waiting == 0


async def test_one_at_a_time_the_next_goes_when_the_one_before_returns() -> None:
    """A persona webhook's pacer: discord.py holds a request until the webhook's bucket
    has room (from Discord's headers), so the next one waits for that, not for a guess."""
    clock = Time()
    pace = Pacer(100, burst=5, one_at_a_time=True, clock=clock, sleep=clock.sleep)
    bucket_has_room = asyncio.Event()
    sent: list[str] = []

    async def send(name: str) -> None:
        sent.append(name)
        if name == "first":
            await bucket_has_room.wait()

    first = asyncio.ensure_future(pace.run(lambda: send("first")))
    with lane(Lane.STREAM):
        edit = asyncio.ensure_future(pace.run(lambda: send("edit"), key="m1"))
    final = asyncio.ensure_future(pace.run(lambda: send("final")))
    for _ in range(5):
        await asyncio.sleep(0)
    assert sent == ["first"]  # tokens to spare, but the first has not returned
    bucket_has_room.set()
    await asyncio.gather(first, edit, final)
    assert sent == ["first", "final", "edit"]  # and then by lane


async def test_one_at_a_time_a_caller_cancelled_after_its_turn_lets_the_next_go() -> None:
    clock = Time()
    pace = Pacer(100, burst=5, one_at_a_time=True, clock=clock, sleep=clock.sleep)
    sent: list[str] = []

    async def send(name: str) -> None:
        sent.append(name)

    gone = asyncio.ensure_future(pace.run(lambda: send("gone")))
    kept = asyncio.ensure_future(pace.run(lambda: send("kept")))
    await asyncio.sleep(0)  # the dispatcher grants "gone" its turn ...
    await asyncio.sleep(0)
    gone.cancel()  # ... which is cancelled before it sends
    await asyncio.wait_for(kept, 1)
    assert sent == ["kept"]
    assert gone.cancelled()


async def test_a_status_line_s_edits_go_as_deliveries() -> None:
    """An announcement waits for its thread's status line to show: that line's edits must
    never queue behind other threads' streams (a stream's growing edits do)."""
    from adapters.discord.pacing import current_lane
    from adapters.discord.streaming import StreamingMessage
    from core.clock import FakeClock

    clock = FakeClock()
    lanes: dict[str, list[Lane]] = {"status": [], "answer": []}

    class Sink:
        def __init__(self, name: str) -> None:
            self.name = name

        async def send(self, content: str) -> str:
            return "m1"

        async def edit(self, message_id: str, content: str) -> str:
            lanes[self.name].append(current_lane())
            return message_id

    status = StreamingMessage(Sink("status"), clock=clock, growing=Lane.DELIVERY)
    answer = StreamingMessage(Sink("answer"), clock=clock)
    for stream in (status, answer):
        stream.append("working")
    for _ in range(5):
        await asyncio.sleep(0)
    status.replace("idle")
    answer.append(" on it")
    await clock.advance(1)
    for _ in range(5):
        await asyncio.sleep(0)
    assert lanes == {"status": [Lane.DELIVERY], "answer": [Lane.STREAM]}
    await answer.close()
