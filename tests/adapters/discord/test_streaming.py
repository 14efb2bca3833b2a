"""Streamed persona messages: at most one edit per second per message, final text lands."""

from __future__ import annotations

import asyncio
import itertools
from datetime import datetime

import pytest

from adapters.discord.streaming import StreamingMessage
from core.clock import FakeClock


class RecordingSink:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.sent: list[tuple[str, str]] = []
        self.edits: list[tuple[str, str, datetime]] = []

    async def send(self, content: str) -> str:
        message_id = f"m{len(self.sent) + 1}"
        self.sent.append((message_id, content))
        return message_id

    async def edit(self, message_id: str, content: str) -> str:
        self.edits.append((message_id, content, self.clock.now()))
        return message_id


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


class TestStreamingMessage:
    async def test_edits_are_throttled_and_coalesced(self) -> None:
        """Many deltas inside one second become a single edit after the interval."""
        clock = FakeClock()
        sink = RecordingSink(clock)
        stream = StreamingMessage(sink, clock=clock)
        stream.append("Hel")
        await settle()
        assert sink.sent == [("m1", "Hel")]
        for piece in "lo, wor":
            stream.append(piece)
            await settle()
        assert sink.edits == []  # still inside the first second
        await clock.advance(1)
        await settle()
        assert [e[1] for e in sink.edits] == ["Hello, wor"]

    async def test_no_two_edits_within_a_second(self) -> None:
        """Across a long stream, edits of one message are at least a second apart."""
        clock = FakeClock()
        sink = RecordingSink(clock)
        stream = StreamingMessage(sink, clock=clock)
        for i in range(50):
            stream.append(f"{i} ")
            await settle()
            await clock.advance(0.25)
        closing = asyncio.create_task(stream.close())
        await settle()
        await clock.advance(1)
        await closing
        times = [t for _, _, t in sink.edits]
        assert all((b - a).total_seconds() >= 1 for a, b in itertools.pairwise(times))
        assert sink.edits[-1][1] == stream.text

    async def test_final_text_always_lands(self) -> None:
        """close() waits out the interval rather than dropping the last edit."""
        clock = FakeClock()
        sink = RecordingSink(clock)
        stream = StreamingMessage(sink, clock=clock)
        stream.append("first")
        await settle()
        stream.append(" and last")
        closing = asyncio.create_task(stream.close())
        await settle()
        assert not closing.done()
        await clock.advance(1)
        assert await closing == ["m1"]
        assert sink.edits[-1][:2] == ("m1", "first and last")

    async def test_long_output_continues_in_new_messages(self) -> None:
        """Past 2,000 characters the stream opens another message."""
        clock = FakeClock()
        sink = RecordingSink(clock)
        stream = StreamingMessage(sink, clock=clock)
        stream.append("a " * 1500)
        closing = asyncio.create_task(stream.close())
        await settle()
        await clock.advance(1)
        ids = await closing
        assert ids == ["m1", "m2"]
        assert all(len(content) <= 2000 for _, content in sink.sent)

    async def test_empty_stream_closes_without_sending(self) -> None:
        """Closing a stream that never got text sends nothing and returns."""
        clock = FakeClock()
        sink = RecordingSink(clock)
        assert await StreamingMessage(sink, clock=clock).close() == []
        assert sink.sent == []

    async def test_replace_shows_the_latest_text_throttled(self) -> None:
        """A status line replaced many times shows the newest text, edited at most once a second."""
        clock = FakeClock()
        sink = RecordingSink(clock)
        status = StreamingMessage(sink, clock=clock)
        status.replace("running")
        await settle()
        for text in ("1 queued", "2 queued", "idle"):
            status.replace(text)
            await settle()
        assert sink.edits == []
        await clock.advance(1)
        await settle()
        assert [(e[0], e[1]) for e in sink.edits] == [("m1", "idle")]
        await status.flush()

    async def test_a_closed_message_is_revised_in_place(self) -> None:
        """After close, revise edits the same message (throttled), sends nothing new."""
        clock = FakeClock()
        sink = RecordingSink(clock)
        stream = StreamingMessage(sink, clock=clock)
        stream.append("Let me check.\n-# 🔧 `a__b` · ⏸️ waiting for approval")
        assert await stream.close() == ["m1"]
        with pytest.raises(RuntimeError):
            stream.append("more words")
        revising = asyncio.create_task(stream.revise("Let me check.\n-# 🔧 `a__b` · ✅ ok"))
        await settle()
        assert not revising.done()  # the interval since the message was sent
        await clock.advance(1)
        assert await revising == ["m1"]
        assert [(e[0], e[1]) for e in sink.edits] == [("m1", "Let me check.\n-# 🔧 `a__b` · ✅ ok")]
        assert len(sink.sent) == 1

    async def test_revise_is_only_for_a_closed_stream(self) -> None:
        stream = StreamingMessage(RecordingSink(FakeClock()), clock=FakeClock())
        with pytest.raises(RuntimeError, match="closed stream"):
            await stream.revise("text")
