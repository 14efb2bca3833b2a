"""The :class:`Transcript`: what each bound thread owes, recorded, shown, finished once.

The channel adapter that shows an agent records each message before posting
its final text (:meth:`Transcript.owe`) and says when the thread shows it
(:meth:`Transcript.shown`). Marks of shown messages are written in batches
(:meth:`Transcript.flush`, every few seconds and at close): a mark lost to a
crash only costs the next process a look at a message that turns out right.

Whatever is still owed is settled by the channel's :class:`TranscriptSink`,
which compares the message with what the thread shows and finishes it (an
edit, or the missing parts as new messages, never a second copy): at start-up
for what a previous process left, before an announcement is posted in a
thread (the answer first, then its header), and periodically for a final edit
the channel kept refusing while this process lived. A message a live
presenter is still landing is *held* and left alone.
"""

from __future__ import annotations

import contextlib
import inspect
from collections import Counter
from collections.abc import Awaitable, Callable, Collection
from typing import Protocol

from core.bindings.records import BindingEnded, SessionBindingRecord
from core.bindings.service import SessionBindingService
from core.logging import get_logger
from core.registry import PerAccount
from core.store import Database
from core.transcript import repository
from core.transcript.records import ThreadMessage

__all__ = ["Transcript", "TranscriptSink", "TranscriptSinks"]

_log = get_logger("core.transcript")


class TranscriptSink(Protocol):
    """One channel account's side: makes a thread show a recorded message."""

    @property
    def channel(self) -> str: ...

    @property
    def account_id(self) -> str: ...

    async def settle(
        self, binding: SessionBindingRecord, message: ThreadMessage
    ) -> ThreadMessage | None:
        """Make the thread show ``message``, comparing before changing anything; the
        message as it is now shown (``sent`` naming every message that shows a part),
        or None (or a raise) when the channel refuses for now."""
        ...


class TranscriptSinks(PerAccount[TranscriptSink]):
    def __init__(self) -> None:
        super().__init__("transcript sink")


class Transcript:
    """The ``thread_messages`` outbox of every bound thread, over one store."""

    def __init__(self, database: Database, bindings: SessionBindingService) -> None:
        self._db = database
        self._bindings = bindings
        self.sinks = TranscriptSinks()
        self._marks: dict[str, ThreadMessage] = {}
        """Shown, not yet written, by key: a row with open lines stays (as it shows now,
        where it is), any other goes."""
        self._held: Counter[str] = Counter()
        """Messages being landed or settled right now, by how many at once."""
        self._owed: dict[str, str] = {}
        """Messages this process knows are owed and not shown: key -> binding id."""
        self._ended: set[str] = set()
        """Bindings ended since the last flush: their rows go with it."""

    # -- what a presenter says -----------------------------------------------------

    async def owe(self, message: ThreadMessage) -> None:
        """Record ``message`` as owed, before its final text is posted."""
        self._marks.pop(message.key, None)
        self._owed[message.key] = message.binding_id
        await self._db.run(repository.save, message, self._bindings.clock.now())

    def shown(self, message: ThreadMessage) -> None:
        """The thread shows ``message`` now; written with the next :meth:`flush`."""
        self._marks[message.key] = message
        self._owed.pop(message.key, None)

    def may_owe(self, binding_id: str) -> bool:
        """Whether a message of this binding may still be owed (one a presenter could not
        land, or one found at start-up and not settled yet): cheap, memory only."""
        return binding_id in self._owed.values()

    def hold(self, key: str) -> None:
        """A presenter is landing this message itself: settling leaves it alone."""
        self._held[key] += 1

    def release(self, key: str) -> None:
        self._held[key] -= 1
        if self._held[key] <= 0:
            del self._held[key]

    def on_event(self, event: object) -> None:
        """What the domain says (subscribed once): an ended binding is owed nothing more."""
        if isinstance(event, BindingEnded):
            self.binding_ended(event.record.binding_id)

    def binding_ended(self, binding_id: str) -> None:
        """The binding ended: its thread is owed nothing more (forgotten at the next flush)."""
        self._ended.add(binding_id)
        self._owed = {k: b for k, b in self._owed.items() if b != binding_id}

    async def with_open_calls(self, binding_id: str) -> list[ThreadMessage]:
        """The binding's recorded messages with a tool line that may still change."""
        found: list[ThreadMessage] = await self._db.run(repository.with_open_calls, binding_id)
        return found

    # -- settling ------------------------------------------------------------------

    async def flush(self) -> int:
        """Write the shown marks; returns how many. A failure keeps them for next time."""
        marks, self._marks = self._marks, {}
        ended, self._ended = self._ended, set()
        if not marks and not ended:
            return 0
        now = self._bindings.clock.now()
        try:
            await self._db.run(repository.settle, list(marks.values()), ended, now)
        except BaseException:
            self._marks = {**marks, **self._marks}
            self._ended |= ended
            raise
        return len(marks)

    async def keep_flushing(self, interval_seconds: float) -> None:
        """Every ``interval_seconds``, :meth:`flush` (until cancelled)."""
        while True:
            await self._bindings.clock.sleep(interval_seconds)
            try:
                await self.flush()
            except Exception:
                _log.warning("transcript.flush_failed", exc_info=True)

    async def land(
        self,
        owed: ThreadMessage,
        landing: Awaitable[object],
        now_shown: Callable[[], ThreadMessage],
        *,
        failed: Callable[[], bool],
    ) -> None:
        """A presenter lands a message's final text itself: recorded first as ``owed``
        (a process killed before the thread shows it leaves the record, and the next one
        finishes the message from it), held so a settle meanwhile leaves it alone, then
        marked shown once ``landing`` has shown it; when it failed, the record is kept
        with wherever its parts are now (``now_shown``), for whoever finishes it.
        Trouble with the store never keeps the words from the thread: it is logged, and
        ``landing`` goes anyway."""
        self.hold(owed.key)
        try:
            try:
                await self.owe(owed)
            except Exception:
                _log.warning("transcript.owe_failed", binding_id=owed.binding_id, exc_info=True)
            except BaseException:  # cancelled before landing: the words are not sent here
                if inspect.iscoroutine(landing):
                    landing.close()
                raise
            await landing
            shown = now_shown()
            if not failed():
                self.shown(shown)
            elif shown.sent != owed.sent:
                with contextlib.suppress(Exception):
                    await self.owe(shown)
        finally:
            self.release(owed.key)

    async def settle_before_announcing(self, binding_id: str) -> None:
        """Before a completion is announced in a thread: what it still owes of an answer
        (a message a dead process left cut) is finished first, so the answer reads before
        its announcement. A failure is logged, never raised: the announcement goes anyway
        and the next pass finishes the message."""
        if not self.may_owe(binding_id):
            return
        try:
            await self.settle_owed([binding_id])
        except Exception:
            _log.warning("transcript.settle_failed", binding_id=binding_id, exc_info=True)

    async def settle_owed(self, binding_ids: Collection[str] | None = None) -> int:
        """Finish, in their threads, the owed messages of bindings this process answers
        for (of ``binding_ids`` only, if given); returns how many now show their text.

        Ended bindings' messages are forgotten: nothing can be shown there any more.
        """
        owed = await self._db.run(repository.owed, binding_ids)
        settled = 0
        ended: set[str] = set()
        for message in owed:
            if message.key in self._marks or message.key in self._held:
                continue
            if message.binding_id in ended:
                continue
            binding = self._bindings.get(message.binding_id)
            if binding is None:  # ended, or bound by a neighbour we have not heard of yet
                await self._bindings.reload_binding(message.binding_id)
                binding = self._bindings.get(message.binding_id)
            if binding is None:
                ended.add(message.binding_id)
                continue
            if not self._bindings.mine(binding):
                continue  # another process's guild: that process settles it
            conversation = binding.conversation
            sink = self.sinks.get(conversation.channel, conversation.account_id)
            if sink is None:
                continue
            self._owed[message.key] = message.binding_id  # until it is shown
            self.hold(message.key)
            try:
                done = await sink.settle(binding, message)
            except Exception:
                _log.warning(
                    "transcript.settle_failed",
                    binding_id=message.binding_id,
                    key=message.key,
                    exc_info=True,
                )
                continue
            finally:
                self.release(message.key)
            if done is not None:
                self.shown(done)
                settled += 1
        for binding_id in ended:
            self.binding_ended(binding_id)
        if settled:
            _log.info("transcript.settled", messages=settled)
        if settled or ended:
            await self.flush()
        return settled

    async def keep_settling(self, interval_seconds: float) -> None:
        """Every ``interval_seconds``, settle what is owed (a final edit the channel kept
        refusing, a message whose presenter gave up)."""
        while True:
            await self._bindings.clock.sleep(interval_seconds)
            try:
                await self.settle_owed()
            except Exception:
                _log.warning("transcript.settle_failed", exc_info=True)

    async def close(self) -> None:
        """Write the shown marks still pending (at shutdown, before the store closes)."""
        try:
            await self.flush()
        except Exception:  # costs the next start a look at messages that are right
            _log.warning("transcript.flush_failed", exc_info=True)
