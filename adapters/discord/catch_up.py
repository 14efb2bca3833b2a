"""What people wrote in bound threads while the bot was not connected, read back once.

Discord does not replay gateway events to a bot that was offline, or whose
gateway session could not be resumed: a ``READY`` (rather than ``RESUMED``)
means events were lost. So at every ``READY`` each bound thread of the
connection's shards is *held* (its new messages are recorded but wait), and
then caught up:

- The threads Discord sends with the guild (its active threads) carry their
  ``last_message_id``; a thread with nothing newer than its read cursor needs
  no request at all, so ten thousand quiet threads cost nothing.
- A thread with something newer is read past its cursor, oldest first, a
  hundred messages a request. People's messages go into the inbox (one that is
  there already is skipped: a second restart answers nothing twice); the bot's
  own and its webhooks' only move the cursor.
- At most ``[discord] catch_up_max_messages`` people's messages are taken per
  thread; when more were written, the thread says where reading stopped.
- The thread gets one notice naming what was received while the bot was
  offline; then it is released, and everything waiting there is handed to the
  session in the order it was written, live messages that arrived meanwhile
  included.

A thread that cannot be read (Discord refuses) is said so in the thread, and
released all the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import discord

from adapters.discord.delivery import ThreadDelivery, persona_of
from adapters.discord.errors import discord_said
from adapters.discord.ids import CHANNEL
from adapters.discord.inbox import inbox_message
from core.bindings.records import SessionBindingRecord
from core.bindings.service import SessionBindingService
from core.errors import ThreadboundError
from core.inbox import Inbox
from core.inbox.shown import offline_text, unreadable_text
from core.logging import get_logger
from core.sharding import shard_of

__all__ = ["CatchUp", "CatchUpReport", "offline_notice", "unreadable_notice"]

_log = get_logger("adapters.discord.catch_up")

READERS = 4
"""Threads read at once: discord.py queues requests on Discord's rate limits anyway."""


@dataclass(slots=True)
class CatchUpReport:
    """What one catch-up did (logged, and read by tests and the benchmark)."""

    threads: int = 0
    """Bound threads looked at."""
    read: int = 0
    """Threads whose history was read."""
    messages: int = 0
    """Messages read back, anyone's."""
    recorded: int = 0
    """People's messages taken into the inbox."""
    cut: int = 0
    """Threads where the limit stopped the reading."""
    failed: int = 0
    """Threads that could not be read."""
    done: asyncio.Event = field(default_factory=asyncio.Event)


class CatchUp:
    """One account's catch-ups: per guild as it arrives after a ``READY``, then the rest."""

    def __init__(
        self,
        account_id: str,
        client: discord.Client,
        inbox: Inbox,
        bindings: SessionBindingService,
        delivery: ThreadDelivery,
        *,
        limit: int,
        is_person: Callable[[discord.Message], bool],
    ) -> None:
        self.account_id = account_id
        self._client = client
        self._inbox = inbox
        self._bindings = bindings
        self._delivery = delivery
        self._limit = limit
        self._is_person = is_person
        self.reports: list[CatchUpReport] = []
        """Every catch-up of this process, oldest first."""
        self._finished = asyncio.Condition()
        self._running: set[asyncio.Future[CatchUpReport]] = set()
        self._reading: set[str] = set()
        """Bindings a catch-up is working on now (not taken by a second one)."""

    # -- when ----------------------------------------------------------------------

    def hold(self, shard_id: int | None = None) -> None:
        """At a ``READY``: hold every bound thread of the shard (None: every shard).

        Call it as the ``READY`` is handled, before any message that follows it
        (an event handler's first step runs before those of later events).
        """
        self._inbox.hold(b.conversation for b in self._bound(shard_id=shard_id))

    def start(
        self, *, guild_id: int | None = None, shard_id: int | None = None, held_only: bool = False
    ) -> asyncio.Future[CatchUpReport]:
        """Catch up the bound threads of a guild (or of a shard, or all) in the background.

        Called as a guild arrives (at a ``READY``, or back from an outage); and
        once every guild is in, with ``held_only``, for whatever is still held
        (a guild that never arrived). The threads are held now, before returning.
        """
        bound = [
            b
            for b in self._bound(guild_id=guild_id, shard_id=shard_id)
            if b.binding_id not in self._reading
            and (not held_only or self._inbox.held(b.conversation))
        ]
        self._inbox.hold(b.conversation for b in bound)
        self._reading.update(b.binding_id for b in bound)
        running = asyncio.ensure_future(self.run(bound))
        self._running.add(running)
        running.add_done_callback(self._running.discard)
        return running

    async def wait(self) -> None:
        """Until the catch-ups under way have finished (shutdown)."""
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    async def wait_finished(self, count: int = 1) -> list[CatchUpReport]:
        """Until ``count`` catch-ups of this process have finished (tests, the benchmark)."""
        async with self._finished:
            await self._finished.wait_for(
                lambda: sum(report.done.is_set() for report in self.reports) >= count
            )
        return self.reports

    async def run(self, bound: list[SessionBindingRecord]) -> CatchUpReport:
        """Read back what these held threads missed, then release them; never raises."""
        report = CatchUpReport(threads=len(bound))
        self.reports.append(report)
        try:
            await self._catch_up(bound, report)
        except Exception:  # never leave a thread held: its messages would wait forever
            _log.error("catch_up.failed", account=self.account_id, exc_info=True)
            for binding in bound:
                await self._release(binding, pending=True)
        finally:
            self._reading.difference_update(b.binding_id for b in bound)
        report.done.set()
        async with self._finished:
            self._finished.notify_all()
        if bound:
            _log.info(
                "catch_up.done",
                account=self.account_id,
                threads=report.threads,
                read=report.read,
                messages=report.messages,
                recorded=report.recorded,
                cut=report.cut,
                failed=report.failed,
            )
        return report

    async def _catch_up(self, bound: list[SessionBindingRecord], report: CatchUpReport) -> None:
        ids = [b.conversation.conversation_id for b in bound]
        cursors = await self._inbox.cursors(CHANNEL, self.account_id, ids)
        waiting = {
            ref.conversation_id
            for ref in await self._inbox.pending_conversations(CHANNEL, self.account_id)
        }
        to_read: list[tuple[SessionBindingRecord, discord.abc.Messageable, int]] = []
        for binding in bound:
            conversation_id = binding.conversation.conversation_id
            channel = self._client.get_channel(int(conversation_id))
            newest = getattr(channel, "last_message_id", None)
            if conversation_id in cursors and cursors[conversation_id] is None:
                # bound before the inbox existed: note where it stands, replay nothing
                if newest is not None:
                    await self._inbox.advance(binding.conversation, newest)
                await self._release(binding, pending=conversation_id in waiting)
                continue
            cursor = cursors.get(conversation_id) or _bound_from(binding)
            if self._limit == 0 or newest is None or newest <= cursor or channel is None:
                await self._release(binding, pending=conversation_id in waiting)
                continue
            assert isinstance(channel, discord.abc.Messageable)
            to_read.append((binding, channel, cursor))
        readers = asyncio.Semaphore(READERS)

        async def read(binding: SessionBindingRecord, channel: object, cursor: int) -> None:
            async with readers:
                await self._read_thread(binding, channel, cursor, report)

        async with asyncio.TaskGroup() as group:
            for binding, readable, cursor in to_read:
                group.create_task(read(binding, readable, cursor))

    async def _read_thread(
        self, binding: SessionBindingRecord, channel: object, cursor: int, report: CatchUpReport
    ) -> None:
        """Read one thread past ``cursor``, record people's messages, say so, release it."""
        assert isinstance(channel, discord.Thread | discord.TextChannel)
        report.read += 1
        people: list[discord.Message] = []
        cut: discord.Message | None = None
        newest = cursor
        try:
            async for message in channel.history(
                limit=None, after=discord.Object(cursor), oldest_first=True
            ):
                report.messages += 1
                newest = max(newest, message.id)
                if not self._is_person(message):
                    continue
                if len(people) >= self._limit:
                    cut = message
                    break
                people.append(message)
        except (discord.HTTPException, ThreadboundError) as exc:
            report.failed += 1
            said = discord_said(exc) if isinstance(exc, discord.HTTPException) else str(exc)
            _log.warning("catch_up.read_failed", binding_id=binding.binding_id, error=said)
            await self._say(binding, unreadable_notice(said))
            await self._release(binding, pending=True)
            return
        recorded = await self._record(binding, people)
        report.recorded += len(recorded)
        if cut is not None:
            report.cut += 1
            newest = max(newest, getattr(channel, "last_message_id", None) or newest)
        if recorded or cut is not None:
            name = persona_of(binding).name
            await self._say(binding, offline_notice(name, recorded, cut, self._limit))
        await self._inbox.advance(binding.conversation, newest)
        await self._release(binding, pending=True)

    async def _record(
        self, binding: SessionBindingRecord, people: Sequence[discord.Message]
    ) -> list[discord.Message]:
        """Take people's messages into the inbox; those it knew already are left out."""
        items = {str(m.id): inbox_message(self.account_id, m, source="catch_up") for m in people}
        fresh = {item.item_id for item in await self._inbox.record(list(items.values()))}
        recorded = [m for m in people if str(m.id) in fresh]
        if recorded:
            _log.info("catch_up.recorded", binding_id=binding.binding_id, messages=len(recorded))
        return recorded

    async def _release(self, binding: SessionBindingRecord, *, pending: bool) -> None:
        try:
            await self._inbox.release(binding.conversation, pending=pending)
        except Exception:
            _log.warning("catch_up.release_failed", binding_id=binding.binding_id, exc_info=True)

    async def _say(self, binding: SessionBindingRecord, text: str) -> None:
        record = self._bindings.active(binding.binding_id)
        if record is None:
            return
        try:
            await self._delivery.bot_send(record, text)
        except ThreadboundError:
            _log.warning("catch_up.notice_failed", binding_id=binding.binding_id)

    # -- which threads ---------------------------------------------------------------

    def _bound(
        self, *, guild_id: int | None = None, shard_id: int | None = None
    ) -> list[SessionBindingRecord]:
        """This account's live bound conversations in ``guild_id`` or on ``shard_id``
        (neither: all of this process's)."""
        count = self._client.shard_count or 1
        found = []
        for binding in self._bindings.live():
            ref = binding.conversation
            if ref.channel != CHANNEL or ref.account_id != self.account_id:
                continue
            if binding.status != "active" or not self._bindings.mine(binding):
                continue
            if guild_id is not None and _guild(binding) != guild_id:
                continue
            if shard_id is not None and shard_of(_guild(binding) or 0, count) != shard_id:
                continue
            found.append(binding)
        return found


def _guild(binding: SessionBindingRecord) -> int | None:
    try:
        return int(binding.scope) if binding.scope is not None else None
    except ValueError:
        return None


def _bound_from(binding: SessionBindingRecord) -> int:
    """Where a thread never read since it was bound starts: at the command that bound it
    (``read_after``), or at the thread itself, whose id is older than any message in it."""
    after = binding.meta.read_after
    start = int(binding.conversation.conversation_id)
    return max(start, int(after)) if after is not None else start


def offline_notice(
    name: str, received: Sequence[discord.Message], cut: discord.Message | None, limit: int
) -> str:
    """The thread's one notice about what was written there while the bot was offline
    (worded in :func:`core.inbox.shown.offline_text`, alike on every channel)."""
    first = received[0].jump_url if received else ""
    last = received[-1].jump_url if received else ""
    cut_at = cut.jump_url if cut is not None else None
    return offline_text(name, len(received), first, last, cut_at=cut_at, limit=limit)


def unreadable_notice(said: str) -> str:
    return unreadable_text(said)
