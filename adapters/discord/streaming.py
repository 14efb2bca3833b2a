"""Streaming a persona's output into Discord by editing its messages.

Discord rate-limits message edits, and a token stream arrives far faster than
anyone reads, so a message is edited at most once per ``min_interval`` and
the text in between is coalesced. Output longer than one message continues in
new messages (split by :func:`split_message`). ``close()`` always lands the
final text, waiting out the interval if it must: the last edit is never
dropped to respect the limit. The limit may come from the sink and drop
mid-stream (the bot speaking for a persona needs room for its name): the text
is then split again, the shown parts shortened and the rest sent anew.

The sink retries and repairs what Discord gets wrong; what it still cannot
deliver ends the stream with its :class:`~core.errors.DeliveryError` kept in
:attr:`StreamingMessage.failure` (the sink has logged it). ``close()`` never
raises: the caller's turn is over either way. A closed stream takes no more
text, but ``revise()`` may still change what it shows (a tool line's outcome).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from adapters.discord.pacing import Lane, lane, newest_text
from adapters.discord.text import MESSAGE_LIMIT, split_message
from core.clock import Clock, SystemClock
from core.errors import DeliveryError

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


class StreamingMessage:
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
        self._growing = growing
        self._sink = sink
        self._clock: Clock = clock or SystemClock()
        self._interval = timedelta(seconds=min_interval)
        self._limit: Callable[[], int] = limit if callable(limit) else (lambda: limit)
        self._part_limit = self._limit()
        self._text = ""
        self._ids: list[str] = []
        self._shown: list[str] = []
        self._last_edit: list[datetime] = []
        self._wake = asyncio.Event()
        self._synced = asyncio.Event()
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self.failure: DeliveryError | None = None
        """Why the stream stopped short, if it did."""

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
        stream._text = text
        stream._closed = True
        parts = stream._parts()[: len(message_ids)]
        stream._ids = list(message_ids[: len(parts)])
        stream._shown = parts
        stream._last_edit = [stream._clock.now() - stream._interval] * len(parts)
        return stream

    @property
    def message_ids(self) -> list[str]:
        return list(self._ids)

    @property
    def shown(self) -> bool:
        """Whether the messages show the whole text now (nothing is left to send)."""
        return self._in_sync()

    @property
    def part_limit(self) -> int:
        """The longest part the text is split into now (it only ever lowers)."""
        return self._part_limit

    @property
    def text(self) -> str:
        return self._text

    def append(self, delta: str) -> None:
        """Add streamed text; it shows up within one interval."""
        if self._closed:
            raise RuntimeError("the streamed message is closed")
        self._text += delta
        self._ensure_running()

    def replace(self, text: str) -> None:
        """Show ``text`` instead of what was there (a status line), with the same throttling."""
        if self._closed:
            raise RuntimeError("the streamed message is closed")
        self._text = text
        self._ensure_running()

    async def flush(self) -> None:
        """Wait until what is shown matches the current text (the message stays open)."""
        while not self._in_sync() and self._task is not None and not self._task.done():
            self._synced.clear()
            await self._synced.wait()

    async def close(self) -> list[str]:
        """Land the final text (waiting out the interval if needed); returns the message ids."""
        self._closed = True
        self._ensure_running()
        assert self._task is not None
        await self._task
        return self.message_ids

    async def revise(self, text: str) -> list[str]:
        """Show ``text`` in a closed stream's messages, edited in place; returns their ids.

        A closed stream takes no new words, but what it shows may still change: a
        tool call's line in it says how the call ended once it has. The edit keeps
        the throttling (it may wait out the interval) and, like ``close()``, never
        raises. Should the new text need more parts than were sent (a line grown past
        the message limit), the rest is sent as a new message.
        """
        if not self._closed:
            raise RuntimeError("revise() is for a closed stream; use replace()")
        self._text = text
        self._ensure_running()
        assert self._task is not None
        await self._task
        return self.message_ids

    def _ensure_running(self) -> None:
        """Wake the task that shows the text, starting it again if a failure ended it.

        A failure ends one round only: new text, and above all the final text
        at ``close()``, gets its own bounded round of retries.
        """
        self._wake.set()
        if self._task is None or (self._task.done() and not self._in_sync()):
            self.failure = None
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._sync()
            except DeliveryError as exc:
                self.failure = exc
                self._synced.set()
                return
            if self._in_sync():
                self._synced.set()
            if self._closed and self._in_sync():
                return

    def _parts(self) -> list[str]:
        """The text split for sending, at the lowest limit so far.

        A lower limit is adopted only while it leaves at least one part per
        message already sent: a message cannot be taken back, and a part too
        many would never be in sync.
        """
        wanted = self._limit()
        if wanted < self._part_limit:
            parts = self._split(wanted)
            if len(parts) >= len(self._ids):
                self._part_limit = wanted
                return parts
        return self._split(self._part_limit)

    def _split(self, limit: int) -> list[str]:
        return [part for part in split_message(self._text, limit) if part]

    async def _send_new(self, parts: list[str]) -> list[str]:
        """Send the parts no message shows yet, splitting again after each send (it may
        have lowered the limit); returns the parts as they are now."""
        while len(self._ids) < len(parts):
            part = parts[len(self._ids)]
            self._ids.append(await self._sink.send(part))
            self._shown.append(part)
            self._last_edit.append(self._clock.now())
            parts = self._parts()
        return parts

    def _in_sync(self) -> bool:
        return self._shown == self._parts()

    async def _edit(self, index: int, part: str) -> None:
        """Edit one part. The final text is a delivery, an edit while the text still grows a
        stream's (paced after deliveries); an edit that waited its turn sends the part's
        newest text, and what it sent is what the part shows."""
        sent = part

        def newest() -> str:
            nonlocal sent
            parts = self._parts()
            sent = parts[index] if index < len(parts) else part
            return sent

        with lane(Lane.DELIVERY if self._closed else self._growing), newest_text(newest):
            self._ids[index] = await self._sink.edit(self._ids[index], part)
        self._shown[index] = sent
        self._last_edit[index] = self._clock.now()

    async def _sync(self) -> None:
        """Bring every part up to date: new parts are sent, changed ones edited when allowed.

        Until the split stops changing: sending may lower the sink's limit.
        """
        parts = self._parts()
        while True:
            parts = await self._send_new(parts)
            waits = []
            for index, part in enumerate(parts[: len(self._ids)]):
                if part == self._shown[index]:
                    continue
                due = self._last_edit[index] + self._interval
                now = self._clock.now()
                if due <= now:
                    await self._edit(index, part)
                else:
                    waits.append((due - now).total_seconds())
            if waits:
                await self._clock.sleep(min(waits))
            elif self._parts() == parts:
                return  # nothing changed while sending: neither the text nor the limit
            parts = self._parts()
