"""Streaming a persona's output into Discord by editing its messages.

The rules of a live answer (edits at most once per ``min_interval``, the split at
the message limit, the final text always landing, the failure kept) are the
platforms' common ones, in :class:`core.live_message.LiveMessage`. Decided here is
only how a part reaches Discord: through a :class:`MessageSink` (a webhook for a
persona, the bot for a status line), its edits paced in a lane. An edit while the
text still grows goes in the stream's lane, behind deliveries; the final text is a
delivery; an edit that waited its turn sends the part's newest text (the pacer
reads it through :func:`~adapters.discord.pacing.newest_text`).

The sink retries and repairs what Discord gets wrong; what it still cannot
deliver ends the stream with its :class:`~core.errors.DeliveryError` kept in
:attr:`StreamingMessage.failure` (the sink has logged it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from adapters.discord.pacing import Lane, lane, newest_text
from adapters.discord.text import MESSAGE_LIMIT
from core.clock import Clock
from core.live_message import LiveMessage, PartEdit

__all__ = ["MessageSink", "StreamingMessage"]


class MessageSink(Protocol):
    """Where the parts go: creating a message, and editing one."""

    async def send(self, content: str) -> str:
        """Post a new message; returns its id."""
        ...

    async def edit(self, message_id: str, content: str) -> str:
        """Show ``content`` in the message; returns the id of the message that shows it
        (a new one when the old could no longer be edited)."""
        ...


class _PacedParts:
    """A :class:`~core.live_message.PartSink` over a :class:`MessageSink`, in lanes."""

    def __init__(self, sink: MessageSink, growing: Lane) -> None:
        self._sink = sink
        self._growing = growing

    async def post(self, index: int, text: str) -> str:
        return await self._sink.send(text)

    async def edit(self, index: int, message_id: str, edit: PartEdit) -> str:
        with lane(Lane.DELIVERY if edit.final else self._growing), newest_text(edit.newest):
            return await self._sink.edit(message_id, edit.text)


class StreamingMessage(LiveMessage):
    """One streamed answer: possibly several Discord messages, each edited sparingly."""

    def __init__(
        self,
        sink: MessageSink,
        *,
        clock: Clock | None = None,
        min_interval: float = 1.0,
        limit: int | Callable[[], int] = MESSAGE_LIMIT,
        growing: Lane = Lane.STREAM,
    ) -> None:
        """``limit``: the longest part, or a function giving it (read at every split);
        ``growing``: the lane of its edits before it is closed (a status line, which is
        never closed and which an announcement waits for, goes as a delivery)."""
        super().__init__(
            _PacedParts(sink, growing), limit=limit, clock=clock, min_interval=min_interval
        )

    @classmethod
    def resumed(
        cls,
        sink: MessageSink,
        message_ids: Sequence[str],
        text: str,
        *,
        clock: Clock | None = None,
        min_interval: float = 1.0,
        limit: int | Callable[[], int] = MESSAGE_LIMIT,
    ) -> StreamingMessage:
        """A closed stream whose messages (posted by an earlier process) show ``text``:
        only :meth:`revise` is left to do, and it may edit at once."""
        stream = cls(sink, clock=clock, min_interval=min_interval, limit=limit)
        stream.adopt(message_ids, text)
        return stream
