"""One answer shown live in a chat platform: posted once, then edited as it grows.

Every platform the bot speaks on limits edits and the length of a message, and a
token stream arrives far faster than anyone reads. So the rules of showing it are
the same everywhere, and live here: a message is edited at most once per
``min_interval`` (on the injected :class:`~core.clock.Clock`) and the text in
between is coalesced; text longer than one message is split where a reader would
(:func:`core.text.split_message`) and continues in new messages below; a part
that filled up is left as it is while the next one grows. :meth:`LiveMessage.close`
always lands the final text whole, waiting out the interval if it must: the last
edit is never dropped to respect the limit.

The limit may come from the platform and drop mid-stream (a bot speaking for a
persona needs room for its name): the text is then split again, the shown parts
shortened and the rest sent anew. A message already sent is never taken back: one
past the text's parts (the text was replaced by a shorter one) keeps what it shows.

The platform is reached only through a :class:`PartSink`, which posts and edits
one part; it formats the part (a persona's name), retries and repairs what it can.
What it still cannot deliver ends the round with its
:class:`~core.errors.DeliveryError` kept in :attr:`LiveMessage.failure`; new text,
and the final text at ``close()``, gets a round of its own. ``close()`` never
raises: the caller's turn is over either way. A closed message takes no more text,
but :meth:`LiveMessage.revise` may still change what it shows (a tool line's
outcome).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from core.clock import Clock, SystemClock
from core.errors import DeliveryError
from core.text import split_message

__all__ = ["LiveMessage", "PartEdit", "PartSink"]


class PartEdit:
    """One part's edit on its way to the platform.

    ``text`` is what the edit was asked to show. A platform that makes the edit wait
    its turn may call :meth:`newest` when it goes and send that instead, so an edit
    that waited carries the newest words; whatever ``text`` holds once the edit
    returns is what the part counts as showing (no second edit for words already
    there).
    """

    __slots__ = ("_newest", "final", "text")

    def __init__(self, text: str, *, final: bool, newest: Callable[[], str]) -> None:
        self.text = text
        self.final = final
        """The message is closed: this is its final text (a delivery, not a growing edit)."""
        self._newest = newest

    def newest(self) -> str:
        """The part's text now; from here on it is what the edit shows."""
        self.text = self._newest()
        return self.text


class PartSink(Protocol):
    """The platform side: one message per part, posted then edited."""

    async def post(self, index: int, text: str) -> str:
        """Post part ``index`` (0 first) as a new message; returns its id."""
        ...

    async def edit(self, index: int, message_id: str, edit: PartEdit) -> str:
        """Show ``edit.text`` in the message; returns the id of the message that shows
        it (a new one when the old could no longer be edited)."""
        ...


class LiveMessage:
    """One live answer: possibly several messages, each edited sparingly."""

    def __init__(
        self,
        sink: PartSink,
        *,
        limit: int | Callable[[], int],
        clock: Clock | None = None,
        min_interval: float = 1.0,
    ) -> None:
        """``limit``: the longest part, or a function giving it (read at every split;
        only a lower value than before is adopted)."""
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
        """Why the message stopped short, if it did."""

    def adopt(self, message_ids: Sequence[str], text: str) -> None:
        """Take over messages that show ``text`` (posted by an earlier process), closed:
        only :meth:`revise` is left to do, and it may edit at once."""
        self._text = text
        self._closed = True
        parts = self._parts()[: len(message_ids)]
        self._ids = list(message_ids[: len(parts)])
        self._shown = parts
        self._last_edit = [self._clock.now() - self._interval] * len(parts)

    @property
    def message_ids(self) -> list[str]:
        """The message of each part, in order."""
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
        """Land the final text whole (waiting out the interval if needed); returns the
        message ids. Never raises: a failure is kept in :attr:`failure`."""
        self._closed = True
        self._ensure_running()
        assert self._task is not None
        await self._task
        return self.message_ids

    async def revise(self, text: str) -> list[str]:
        """Show ``text`` in a closed message's parts, edited in place; returns their ids.

        A closed message takes no new words, but what it shows may still change: a
        tool call's line in it says how the call ended once it has. The edit keeps
        the throttling (it may wait out the interval) and, like ``close()``, never
        raises. Should the new text need more parts than were sent (a line grown past
        the limit), the rest is sent as a new message.
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
        many would never be in sync. For the same reason a message past the
        text's parts keeps what it shows.
        """
        wanted = self._limit()
        if wanted < self._part_limit:
            parts = self._split(wanted)
            if len(parts) >= len(self._ids):
                self._part_limit = wanted
                return parts
        parts = self._split(self._part_limit)
        return parts + self._shown[len(parts) :]

    def _split(self, limit: int) -> list[str]:
        return [part for part in split_message(self._text, limit) if part]

    def _in_sync(self) -> bool:
        return self._shown == self._parts()

    async def _post_new(self, parts: list[str]) -> list[str]:
        """Post the parts no message shows yet, in order, splitting again after each post
        (it may have lowered the limit); returns the parts as they are now."""
        while len(self._ids) < len(parts):
            index = len(self._ids)
            part = parts[index]
            self._ids.append(await self._sink.post(index, part))
            self._shown.append(part)
            self._last_edit.append(self._clock.now())
            parts = self._parts()
        return parts

    async def _edit(self, index: int, part: str) -> None:
        """Edit one part; what the edit carried (maybe newer than ``part``) is shown."""

        def newest() -> str:
            parts = self._parts()
            return parts[index] if index < len(parts) else part

        edit = PartEdit(part, final=self._closed, newest=newest)
        self._ids[index] = await self._sink.edit(index, self._ids[index], edit)
        self._shown[index] = edit.text
        self._last_edit[index] = self._clock.now()

    async def _sync(self) -> None:
        """Bring every part up to date: new parts are posted, changed ones edited when
        their interval allows; until the split stops changing (the text may grow
        meanwhile, and posting may lower the limit)."""
        parts = self._parts()
        while True:
            parts = await self._post_new(parts)
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
                return  # nothing changed meanwhile: neither the text nor the limit
            parts = self._parts()
