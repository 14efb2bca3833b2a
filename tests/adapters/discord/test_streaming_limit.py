"""A sink whose limit drops mid-stream (the bot speaking for a persona needs room for its name).

The stream splits its text again: the parts already shown are shortened by an
edit, what no longer fits goes into new messages, and close() still returns.
"""

from __future__ import annotations

import asyncio

from adapters.discord.streaming import StreamingMessage
from adapters.discord.text import split_message
from core.clock import FakeClock

WIDE, NARROW = 60, 40


class ShrinkingSink:
    """Records messages by id; after its first send, parts must fit ``NARROW``."""

    def __init__(self) -> None:
        self.shown: dict[str, str] = {}

    def limit(self) -> int:
        return NARROW if self.shown else WIDE

    async def send(self, content: str) -> str:
        assert len(content) <= self.limit()
        message_id = f"m{len(self.shown) + 1}"
        self.shown[message_id] = content
        return message_id

    async def edit(self, message_id: str, content: str) -> str:
        assert len(content) <= NARROW
        self.shown[message_id] = content
        return message_id


async def test_a_lower_limit_resplits_what_is_shown() -> None:
    """A first part sent at 60 is shortened to fit 40; the rest follows; nothing is lost."""
    clock = FakeClock()
    sink = ShrinkingSink()
    stream = StreamingMessage(sink, clock=clock, min_interval=0, limit=sink.limit)
    text = " ".join(f"word{i}" for i in range(30))
    stream.append(text[:55])  # one part at 60, two at 40
    stream.append(text[55:])
    async with asyncio.timeout(5):
        ids = await stream.close()
    assert [sink.shown[i] for i in ids] == split_message(text, NARROW)
    assert "".join(sink.shown[i] for i in ids).split() == text.split()
