"""One streamed answer in a Matrix thread: posted once, then edited as it grows.

The first words post a message in the thread; later words edit it with ``m.replace``
relations (the new text in ``m.new_content``), at most once per ``min_interval`` as on
Discord, the text in between coalesced. An answer longer than :data:`PART_LIMIT`
continues in a new message (split where a reader would, :func:`core.text.split_message`).
:meth:`MatrixStream.close` always lands the final text whole, waiting out the interval
if it must.

Without an application service the bot's account speaks for every persona: each
message starts with the persona's name in bold and carries it in the per-message
profile field (MSC4144), so one persona never reads as another.

Each send has its own transaction id (the stream's key, the part, the edit's number),
which a retry reuses (:class:`~adapters.matrix.sending.MatrixSender`): nothing posts
twice. What the sender still cannot deliver ends the stream with the
:class:`~core.errors.DeliveryError` in :attr:`MatrixStream.failure`; ``close()``
never raises.
"""

from __future__ import annotations

import asyncio
import html
from datetime import datetime, timedelta
from typing import Any, Final

from adapters.matrix.replies import txn_id
from adapters.matrix.sending import MatrixSender
from core.clock import Clock, SystemClock
from core.errors import DeliveryError
from core.text import split_message

__all__ = ["PART_LIMIT", "MatrixStream", "edit_content", "message_content"]

PART_LIMIT: Final = 3_000
"""Characters of one message. A Matrix event may hold 65,536 bytes and an edit carries
the text three times (the fallback body, ``m.new_content``'s body and its HTML): even
at six bytes a character (a control character JSON-escaped) that stays below 60,000."""
PROFILE: Final = "com.beeper.per_message_profile"
"""The per-message profile field (MSC4144): who speaks, for clients that show it."""


def message_content(text: str, *, name: str | None = None) -> dict[str, Any]:
    """An ``m.text`` saying ``text``; under ``name`` (bold, first) when the bot speaks
    for a persona."""
    escaped = html.escape(text).replace("\n", "<br>")
    if name is None:
        return {
            "msgtype": "m.text",
            "body": text,
            "format": "org.matrix.custom.html",
            "formatted_body": escaped,
        }
    return {
        "msgtype": "m.text",
        "body": f"**{name}**\n{text}",
        "format": "org.matrix.custom.html",
        "formatted_body": f"<strong>{html.escape(name)}</strong><br>{escaped}",
        PROFILE: {"id": name, "displayname": name},
    }


def edit_content(event_id: str, new: dict[str, Any]) -> dict[str, Any]:
    """An edit of ``event_id`` to show ``new``: an ``m.replace`` whose own body is the
    fallback a client without edits shows (``* `` and the new text)."""
    return {
        "msgtype": new["msgtype"],
        "body": f"* {new['body']}",
        "m.new_content": new,
        "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
    }


class MatrixStream:
    """One streamed answer in a thread: one message per part, each edited sparingly."""

    def __init__(
        self,
        sender: MatrixSender,
        room_id: str,
        thread_root: str,
        /,
        *,
        key: str,
        name: str | None = None,
        clock: Clock | None = None,
        min_interval: float = 1.0,
        limit: int = PART_LIMIT,
    ) -> None:
        """``key``: unique to this answer, the root of its transaction ids."""
        self._sender = sender
        self._room_id = room_id
        self._root = thread_root
        self._key = key
        self._name = name
        self._clock: Clock = clock or SystemClock()
        self._interval = timedelta(seconds=min_interval)
        self._limit = limit
        self._text = ""
        self._ids: list[str] = []
        self._shown: list[str] = []
        self._last: list[datetime] = []
        self._edits = 0
        self._wake = asyncio.Event()
        self._synced = asyncio.Event()
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self.failure: DeliveryError | None = None
        """Why the stream stopped short, if it did."""

    @property
    def event_ids(self) -> list[str]:
        """The first event of each message, in order."""
        return list(self._ids)

    @property
    def text(self) -> str:
        return self._text

    def append(self, delta: str) -> None:
        """Add streamed text; it shows up within one interval."""
        if self._closed:
            raise RuntimeError("the streamed message is closed")
        self._text += delta
        self._start()

    async def flush(self) -> None:
        """Wait until the messages show the text so far (the stream stays open)."""
        while not self._in_sync() and self._task is not None and not self._task.done():
            self._synced.clear()
            await self._synced.wait()

    async def close(self) -> list[str]:
        """Land the final text whole (waiting out the interval if needed); returns the
        messages' event ids. Never raises: a failure is kept in :attr:`failure`."""
        self._closed = True
        self._start()
        assert self._task is not None
        await self._task
        return self.event_ids

    def _start(self) -> None:
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
        """The text's parts; a message already sent past them keeps what it shows (a
        message is never taken back)."""
        parts = [part for part in split_message(self._text, self._limit) if part]
        return parts + self._shown[len(parts) :]

    def _in_sync(self) -> bool:
        return self._shown == self._parts()

    async def _sync(self) -> None:
        """New parts are sent at once, changed ones edited when their interval allows;
        until what is shown is the text (which may grow meanwhile)."""
        while True:
            parts = self._parts()
            for index in range(len(self._ids), len(parts)):
                await self._post(index, parts[index])
            waits = []
            for index, part in enumerate(parts):
                if part == self._shown[index]:
                    continue
                due = self._last[index] + self._interval
                now = self._clock.now()
                if due <= now:
                    await self._edit(index, part)
                else:
                    waits.append((due - now).total_seconds())
            if waits:
                await self._clock.sleep(min(waits))
            elif self._in_sync():
                return

    async def _post(self, index: int, part: str) -> None:
        content = message_content(part, name=self._name)
        content["m.relates_to"] = {
            "rel_type": "m.thread",
            "event_id": self._root,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": self._root},
        }
        txn = txn_id("stream", self._key, str(index))
        self._ids.append(await self._sender.send(self._room_id, content, txn=txn))
        self._shown.append(part)
        self._last.append(self._clock.now())

    async def _edit(self, index: int, part: str) -> None:
        self._edits += 1
        content = edit_content(self._ids[index], message_content(part, name=self._name))
        txn = txn_id("edit", self._key, str(index), str(self._edits))
        await self._sender.send(self._room_id, content, txn=txn)
        self._shown[index] = part
        self._last[index] = self._clock.now()
