"""The live message's rules, on a fake platform and a fake clock: throttled edits, the
split at the limit, parts in order, the final text landing whole, a failure kept."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest

from core.clock import FakeClock
from core.errors import DeliveryError
from core.live_message import LiveMessage, PartEdit
from core.text import split_message


@dataclass(frozen=True)
class Call:
    kind: str  # "post" or "edit"
    index: int
    message_id: str
    text: str
    final: bool
    at: datetime


class Platform:
    """A :class:`~core.live_message.PartSink` that records every call, in order."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.calls: list[Call] = []
        self.failing: DeliveryError | None = None
        self.hold: asyncio.Event | None = None
        self.reposted: dict[str, str] = {}
        self._changed = asyncio.Event()

    @property
    def posts(self) -> list[Call]:
        return [c for c in self.calls if c.kind == "post"]

    @property
    def edits(self) -> list[Call]:
        return [c for c in self.calls if c.kind == "edit"]

    async def post(self, index: int, text: str) -> str:
        message_id = f"m{len(self.posts) + 1}"
        self._record(Call("post", index, message_id, text, False, self.clock.now()))
        return message_id

    async def edit(self, index: int, message_id: str, edit: PartEdit) -> str:
        if self.hold is not None:
            await self.hold.wait()  # the edit waits its turn, then goes with the newest words
            edit.newest()
        if self.failing is not None:
            raise self.failing
        self._record(Call("edit", index, message_id, edit.text, edit.final, self.clock.now()))
        return self.reposted.get(message_id, message_id)

    def _record(self, call: Call) -> None:
        self.calls.append(call)
        self._changed.set()

    async def until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            self._changed.clear()
            await self._changed.wait()


def live(platform: Platform, clock: FakeClock, limit: int | Callable[[], int] = 100) -> LiveMessage:
    return LiveMessage(platform, limit=limit, clock=clock, min_interval=1.0)


def words(count: int, start: int = 0) -> str:
    return " ".join(f"word{i}" for i in range(start, start + count))


class TestThrottle:
    async def test_edits_wait_out_the_interval_and_carry_the_text_in_between(
        self, clock: FakeClock
    ) -> None:
        """The first words post at once; more inside the interval are one edit after it,
        a growing one (not final)."""
        platform = Platform(clock)
        stream = live(platform, clock)
        start = clock.now()
        stream.append("Hel")
        await platform.until(lambda: len(platform.posts) == 1)
        for piece in "lo, wor":
            stream.append(piece)
        await clock.wait_for_sleepers()
        await clock.advance(0.5)
        assert platform.edits == []
        await clock.advance(0.5)
        await platform.until(lambda: len(platform.edits) == 1)
        edit = platform.edits[0]
        assert (edit.text, edit.final) == ("Hello, wor", False)
        assert edit.at == start + timedelta(seconds=1)

    async def test_no_two_edits_of_a_message_inside_the_interval(self, clock: FakeClock) -> None:
        platform = Platform(clock)
        stream = live(platform, clock)
        stream.append("a")
        await platform.until(lambda: len(platform.posts) == 1)
        for step in range(8):
            stream.append(f" {step}")
            await clock.wait_for_sleepers()
            await clock.advance(0.5)
        await stream.flush()
        times = [c.at for c in platform.calls]
        assert len(times) > 2
        assert all(b - a >= timedelta(seconds=1) for a, b in itertools.pairwise(times))


class TestSplit:
    async def test_a_long_text_is_posted_in_parts_each_within_the_limit(
        self, clock: FakeClock
    ) -> None:
        platform = Platform(clock)
        stream = live(platform, clock, limit=100)
        text = words(60)
        stream.append(text)
        ids = await stream.close()
        assert [c.index for c in platform.posts] == list(range(len(split_message(text, 100))))
        assert ids == [c.message_id for c in platform.posts]
        assert all(len(c.text) <= 100 for c in platform.posts)
        assert " ".join(c.text for c in platform.posts).split() == text.split()
        assert platform.edits == []  # each part was whole when posted

    async def test_a_part_that_fills_up_is_finished_and_the_next_posted_below(
        self, clock: FakeClock
    ) -> None:
        """Crossing the limit posts the next part at once; the full part gets its last
        edit when its interval allows, and is not edited again as the text grows on."""
        platform = Platform(clock)
        stream = live(platform, clock, limit=100)
        stream.append(words(5))
        await platform.until(lambda: len(platform.posts) == 1)
        stream.append(" " + words(15, start=5))
        await platform.until(lambda: len(platform.posts) == 2)
        assert platform.edits == []  # the first part waits out its interval
        await clock.wait_for_sleepers()
        await clock.advance(1)
        await platform.until(lambda: len(platform.edits) == 1)
        stream.append(" " + words(3, start=20))  # the second part's interval has passed
        ids = await stream.close()
        parts = split_message(stream.text, 100)
        assert [(c.kind, c.index) for c in platform.calls] == [
            ("post", 0),
            ("post", 1),
            ("edit", 0),
            ("edit", 1),
        ]
        assert [c.text for c in platform.edits] == parts
        assert ids == ["m1", "m2"]

    async def test_a_lowered_limit_shortens_the_shown_part_and_sends_the_rest(
        self, clock: FakeClock
    ) -> None:
        limit = [100]
        platform = Platform(clock)
        stream = live(platform, clock, limit=lambda: limit[0])
        stream.append(words(12))
        await platform.until(lambda: len(platform.posts) == 1)
        limit[0] = 50
        stream.append(" more")
        closing = asyncio.create_task(stream.close())
        await platform.until(lambda: len(platform.posts) > 1)
        await clock.wait_for_sleepers()
        await clock.advance(1)
        await closing
        assert stream.part_limit == 50
        shown = [platform.edits[-1].text] + [c.text for c in platform.posts[1:]]
        assert shown == split_message(stream.text, 50)

    async def test_a_shorter_text_leaves_later_messages_as_they_are(self, clock: FakeClock) -> None:
        """A message is never taken back: replaced by a shorter text, the first message
        shows it and the others keep theirs; close() returns rather than waiting forever."""
        platform = Platform(clock)
        stream = live(platform, clock, limit=50)
        stream.replace(words(20))
        await platform.until(lambda: len(platform.posts) > 2)
        tail = [c.text for c in platform.posts[1:]]
        stream.replace("short")
        closing = asyncio.create_task(stream.close())
        await clock.wait_for_sleepers()
        await clock.advance(1)
        assert await closing == [c.message_id for c in platform.posts]
        assert [(c.index, c.text) for c in platform.edits] == [(0, "short")]
        assert stream.shown
        assert tail == [c.text for c in platform.posts[1:]]


class TestClose:
    async def test_close_waits_out_the_interval_and_lands_the_final_text_whole(
        self, clock: FakeClock
    ) -> None:
        platform = Platform(clock)
        stream = live(platform, clock)
        stream.append("first")
        await platform.until(lambda: len(platform.posts) == 1)
        stream.append(" and last")
        closing = asyncio.create_task(stream.close())
        await clock.wait_for_sleepers()
        assert not closing.done()
        await clock.advance(1)
        assert await closing == ["m1"]
        assert [(c.text, c.final) for c in platform.edits] == [("first and last", True)]
        assert stream.shown

    async def test_an_empty_message_closes_without_posting(self, clock: FakeClock) -> None:
        platform = Platform(clock)
        assert await live(platform, clock).close() == []
        assert platform.calls == []

    async def test_a_closed_message_takes_no_words_but_may_be_revised(
        self, clock: FakeClock
    ) -> None:
        platform = Platform(clock)
        stream = live(platform, clock)
        stream.append("checking ⏸️")
        await stream.close()
        with pytest.raises(RuntimeError, match="closed"):
            stream.append("more")
        revising = asyncio.create_task(stream.revise("checking ✅"))
        await clock.wait_for_sleepers()
        await clock.advance(1)
        assert await revising == ["m1"]
        assert [(c.message_id, c.text, c.final) for c in platform.edits] == [
            ("m1", "checking ✅", True)
        ]

    async def test_adopted_messages_are_revised_at_once(self, clock: FakeClock) -> None:
        """Messages an earlier process posted: the next revise edits them without waiting,
        and a message the platform had to post anew is followed by its new id."""
        platform = Platform(clock)
        platform.reposted["m7"] = "m9"
        stream = live(platform, clock)
        stream.adopt(["m7"], "old words")
        assert stream.shown
        assert await stream.revise("new words") == ["m9"]
        assert [(c.message_id, c.text) for c in platform.edits] == [("m7", "new words")]
        assert platform.posts == []


class TestFailure:
    async def test_a_failed_edit_is_kept_and_the_final_text_gets_its_own_round(
        self, clock: FakeClock
    ) -> None:
        platform = Platform(clock)
        stream = live(platform, clock)
        stream.append("one")
        await platform.until(lambda: len(platform.posts) == 1)
        refused = DeliveryError("the message is gone", path="webhook")
        platform.failing = refused
        stream.append(" two")
        await clock.wait_for_sleepers()
        await clock.advance(1)
        await stream.flush()
        assert stream.failure is refused
        assert not stream.shown
        platform.failing = None
        stream.append(" three")
        assert await stream.close() == ["m1"]
        assert stream.failure is None
        assert [c.text for c in platform.edits] == ["one two three"]

    async def test_close_never_raises_a_failure_it_keeps_it(self, clock: FakeClock) -> None:
        platform = Platform(clock)
        stream = live(platform, clock)
        stream.append("one")
        await platform.until(lambda: len(platform.posts) == 1)
        refused = DeliveryError("no permission", code=50013)
        platform.failing = refused
        stream.append(" two")
        closing = asyncio.create_task(stream.close())
        await clock.wait_for_sleepers()
        await clock.advance(1)
        assert await closing == ["m1"]
        assert stream.failure is refused
        assert platform.edits == []


class TestNewest:
    async def test_an_edit_that_waited_its_turn_carries_the_newest_words(
        self, clock: FakeClock
    ) -> None:
        """What the edit sent is what the part shows: no second edit for words it carried."""
        platform = Platform(clock)
        stream = live(platform, clock)
        stream.append("Paris")
        await platform.until(lambda: len(platform.posts) == 1)
        platform.hold = asyncio.Event()
        stream.append(" has")
        await clock.wait_for_sleepers()
        await clock.advance(1)  # the edit is asked with "Paris has" and waits
        stream.append(" three options")
        closing = asyncio.create_task(stream.close())
        platform.hold.set()
        assert await closing == ["m1"]
        assert [c.text for c in platform.edits] == ["Paris has three options"]
        assert stream.shown
