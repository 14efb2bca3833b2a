"""The inbox: every message people write in a bound conversation, recorded before anything
can fail, then handed to its session in order, exactly once.

Why record first: between a message arriving and its session's log holding
it lie a download, an agent start, a lease another process may hold, a
store write and a crash. Recorded first, keyed by the channel's own id for
the message, none of those can lose it: whatever fails leaves it ``pending``,
and the next attempt (the next message in the conversation, the periodic
retry, a restart) takes it again, oldest first. Its author is told once when
handing it over failed, and the channel shows what became of it.

Exactly once: the session's log records the message's id with it
(``inbound_id``), so a message that reached the log just before a crash, but
was not yet marked done, is recognised and never handed over twice. A message
delivered twice by the channel (a replayed gateway event, a catch-up that
reads it again) finds its row and stops there.

A conversation can be *held*: its messages are recorded but wait, while a
catch-up reads what was written there during a downtime, so that what was
written first is handed over first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Protocol

from core.attachments import AttachmentStore
from core.bindings.records import ConversationKey, ConversationRef
from core.bindings.service import SessionBindingService
from core.clock import Clock, SystemClock
from core.errors import ThreadboundError
from core.inbound import InboundRouter
from core.inbox import repository
from core.inbox.files import FileUnavailable, read_files, unreadable_note
from core.inbox.records import FileRef, InboxMessage, InboxPress, Outcome
from core.logging import get_logger, redact_text
from core.registry import PerAccount
from core.runtime import SessionBusy
from core.store.database import Database

__all__ = ["Inbox", "InboxChannel"]

_log = get_logger("core.inbox")

INTERNAL = "something went wrong inside the bot (the details are in its logs)"


class InboxChannel(Protocol):
    """What the inbox needs from the channel a message came from (one per account)."""

    @property
    def channel(self) -> str: ...

    @property
    def account_id(self) -> str: ...

    async def fetch_file(self, file: FileRef, /) -> bytes:
        """The file's bytes; raises :class:`~core.inbox.files.FileUnavailable` with a reason."""
        ...

    async def acknowledge(self, message: InboxMessage, outcome: Outcome, /) -> None:
        """Show the author what became of the message (a reaction, a reply)."""
        ...


class Inbox:
    """Records messages, hands them to their sessions, and keeps the read cursors."""

    def __init__(
        self,
        database: Database,
        router: InboundRouter,
        bindings: SessionBindingService,
        *,
        attachments: AttachmentStore,
        text_max_bytes: int,
        clock: Clock | None = None,
        fetch_timeout_seconds: float = 30.0,
        resident: Callable[[str], bool] = lambda _key: False,
    ) -> None:
        self._db = database
        self._resident = resident
        self._router = router
        self._bindings = bindings
        self._attachments = attachments
        self._text_max = text_max_bytes
        self.clock: Clock = clock or SystemClock()
        self._fetch_timeout = fetch_timeout_seconds
        self.channels: PerAccount[InboxChannel] = PerAccount("inbox channel")
        self._locks: dict[ConversationKey, tuple[asyncio.Lock, list[int]]] = {}
        """One hand-over at a time per conversation: its lock and how many use it."""
        self._held: dict[ConversationKey, bool] = {}
        """Conversations being caught up, and whether a message arrived meanwhile."""
        self._waiting: dict[str, asyncio.Future[Outcome]] = {}
        self._seen: dict[tuple[str, str], dict[str, int]] = {}
        """Newest message seen per conversation since the last flush, by (channel, account)."""

    # -- receiving ---------------------------------------------------------------

    async def receive(self, message: InboxMessage) -> Outcome:
        """Record ``message`` durably, then hand over its conversation's queue, it included.

        Returns what became of it: ``held`` while its conversation is caught up
        (it is handed over when that ends). Raises only when the message could
        not even be recorded (the store failed): the caller must say so.
        """
        held = message.conversation.key in self._held
        if held:
            self._held[message.conversation.key] = True  # hand it over at the release
        known = await self._db.run(
            partial(repository.record_message, advance=not held), message, self.clock.now()
        )
        if known is not None and known != "pending":
            return Outcome("duplicate")
        waiting: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(message.item_id, waiting)
        try:
            await self.deliver(message.conversation)
        except Exception as exc:  # recorded: it stays pending, and its author is told
            _log.warning("inbox.deliver_failed", item_id=message.item_id, exc_info=True)
            outcome = Outcome("failed", reason=_reason(exc), tell=True)
            await self._note_failure(message, outcome.reason or INTERNAL)
            await self._acknowledge(message, outcome)
            return outcome
        finally:
            if self._waiting.get(message.item_id) is waiting:
                del self._waiting[message.item_id]
        if waiting.done():
            return waiting.result()
        return Outcome("held", recorded_before=known == "pending")

    async def record(self, messages: Sequence[InboxMessage]) -> list[InboxMessage]:
        """Record without handing over (a catch-up's reading), in one write; returns the
        ones that were new (a message known already is left out)."""
        fresh: list[InboxMessage] = await self._db.run(
            repository.record_messages, list(messages), self.clock.now()
        )
        return fresh

    # -- button presses --------------------------------------------------------------

    async def record_press(self, press: InboxPress) -> bool:
        """Record a press before it acts; False when this very press was recorded before
        (a repeat: it must not act twice)."""
        fresh: bool = await self._db.run(repository.record_press, press, self.clock.now())
        return fresh

    async def finish_press(self, press: InboxPress, status: str = "done") -> None:
        """The press has acted (``done``), failed and said so (``failed``), or was closed
        after a restart (``interrupted``)."""
        await self._db.run(
            repository.mark, press.conversation, press.item_id, status, self.clock.now()
        )

    async def pending_presses(self, channel: str, account_id: str) -> list[InboxPress]:
        """Presses a process died acting on, oldest first."""
        found: list[InboxPress] = await self._db.run(
            repository.pending_presses, channel, account_id
        )
        return found

    # -- holding while a conversation is caught up -----------------------------------

    def hold(self, conversations: Iterable[ConversationRef]) -> None:
        """Keep these conversations' messages recorded but waiting (see :meth:`release`).

        While held, a conversation's read cursor stands still: a message that
        arrives now says nothing about what was written before it, during the
        downtime that the catch-up is about to read.
        """
        for ref in conversations:
            self._held.setdefault(ref.key, False)

    def held(self, conversation: ConversationRef) -> bool:
        return conversation.key in self._held

    async def release(
        self, conversation: ConversationRef, *, pending: bool = True
    ) -> dict[str, Outcome]:
        """Stop holding the conversation and hand over what waits there, in order.

        ``pending=False``: the caller knows nothing waited there before the hold,
        which spares a query (a catch-up releases thousands of quiet threads).
        """
        arrived = self._held.pop(conversation.key, False)
        if not pending and not arrived:
            return {}
        return await self.deliver(conversation)

    # -- handing over --------------------------------------------------------------

    async def deliver(self, conversation: ConversationRef) -> dict[str, Outcome]:
        """Hand the conversation's pending messages to its session, oldest first.

        One hand-over per conversation at a time. The first message that cannot
        be handed over stops the rest (they wait behind it, in order) and the
        same outcome is shown for them.
        """
        key = conversation.key
        if key in self._held:
            return {}
        lock, users = self._locks.setdefault(key, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                if key in self._held:
                    return {}
                return await self._deliver_pending(conversation)
        finally:
            users[0] -= 1
            if not users[0]:
                del self._locks[key]

    async def _deliver_pending(self, conversation: ConversationRef) -> dict[str, Outcome]:
        outcomes: dict[str, Outcome] = {}
        closed: dict[str, str] = {}
        try:
            await self._deliver_each(conversation, outcomes, closed)
        finally:
            # One write for the lot: until it lands a message only looks pending, and
            # the session's log (which holds its id) keeps it from being given twice.
            if closed:
                await self._db.run(repository.mark_many, conversation, closed, self.clock.now())
        return outcomes

    async def _deliver_each(
        self, conversation: ConversationRef, outcomes: dict[str, Outcome], closed: dict[str, str]
    ) -> None:
        blocked: Outcome | None = None
        for message in await self._db.run(repository.pending, conversation):
            if blocked is None:
                outcome = await self._hand_over(message, closed)
                if outcome.kind in ("busy", "failed"):
                    blocked = outcome
            else:  # waits behind an earlier message: the same story, told once
                outcome = blocked
                if blocked.kind == "failed":
                    outcome = Outcome("failed", reason=blocked.reason, tell=not message.notified)
                    await self._note_failure(message, blocked.reason or INTERNAL)
            outcomes[message.item_id] = outcome
            self._settle(message, outcome)
            await self._acknowledge(message, outcome)

    async def _hand_over(self, message: InboxMessage, closed: dict[str, str]) -> Outcome:
        """One attempt to put ``message`` in its session's log."""
        try:
            route = await self._router.route(message.conversation)
            if route is None:  # unbound since: nobody to give it to
                closed[message.item_id] = "dropped"
                return Outcome("dropped")
            agent = route.agent
            if agent.tree.holds_inbound(message.item_id):  # in the log before a crash
                closed[message.item_id] = "done"
                return Outcome("duplicate")
            channel = self._channel_of(message)
            files = await read_files(
                message.files,
                channel.fetch_file if channel is not None else _no_fetch,
                text_max_bytes=self._text_max,
                vision=agent.model_info.vision,
                store=self._attachments,
                clock=self.clock,
                timeout_seconds=self._fetch_timeout,
            )
            text = message.text
            if files.unreadable:
                text = f"{text}\n\n{unreadable_note(files.unreadable)}".strip()
            refused = tuple(files.refused)
            if not text.strip() and not files.accepted:
                closed[message.item_id] = "done"
                return Outcome("empty", refused=refused)
            result = await self._router.submit(
                route,
                text,
                author_id=message.author_id,
                author_name=message.author_name,
                mode=message.mode,
                attachments=files.accepted,
                inbound_id=message.item_id,
            )
            await result.submission.wait_recorded()
            closed[message.item_id] = "done"
        except SessionBusy as exc:
            _log.info(
                "inbox.busy_elsewhere",
                conversation=message.conversation.describe(),
                item_id=message.item_id,
                holder=exc.holder,
            )
            return Outcome("busy", reason=exc.holder)
        except Exception as exc:
            reason = _reason(exc)
            _log.warning(
                "inbox.handover_failed",
                conversation=message.conversation.describe(),
                item_id=message.item_id,
                error=reason,
                exc_info=not isinstance(exc, ThreadboundError),
            )
            await self._note_failure(message, reason)
            return Outcome("failed", reason=reason, tell=not message.notified)
        return Outcome(
            "delivered", mode=result.mode, started=not result.submission.queued, refused=refused
        )

    async def _note_failure(self, message: InboxMessage, reason: str) -> None:
        try:
            await self._db.run(
                repository.note_failure,
                message.conversation,
                message.item_id,
                reason,
                self.clock.now(),
            )
        except Exception:  # the store is away: the message is still pending there
            _log.warning("inbox.failure_not_recorded", item_id=message.item_id, exc_info=True)

    def _settle(self, message: InboxMessage, outcome: Outcome) -> None:
        waiting = self._waiting.pop(message.item_id, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(outcome)

    async def _acknowledge(self, message: InboxMessage, outcome: Outcome) -> None:
        """Show the outcome in the channel; a failure to show it loses nothing."""
        channel = self._channel_of(message)
        if channel is None:
            return
        try:
            await channel.acknowledge(message, outcome)
        except Exception:
            _log.warning("inbox.acknowledge_failed", item_id=message.item_id, exc_info=True)

    def _channel_of(self, message: InboxMessage) -> InboxChannel | None:
        ref = message.conversation
        return self.channels.get(ref.channel, ref.account_id)

    # -- retrying ------------------------------------------------------------------

    async def pending_conversations(self, channel: str, account_id: str) -> list[ConversationRef]:
        """Conversations of the account with a message still to hand over."""
        found: list[ConversationRef] = await self._db.run(
            repository.pending_conversations, channel, account_id
        )
        return found

    async def retry(self) -> int:
        """Hand over whatever waits in this process's conversations; returns how many were.

        This process's: the binding's guild is on its shards, or its session
        runs here. A conversation bound nowhere any more has its messages dropped.
        """
        handed = 0
        for channel in list(self.channels):
            for ref in await self.pending_conversations(channel.channel, channel.account_id):
                if not self._ours(ref):
                    continue
                outcomes = await self.deliver(ref)
                handed += sum(1 for o in outcomes.values() if o.kind == "delivered")
        return handed

    def _ours(self, ref: ConversationRef) -> bool:
        binding = self._bindings.active_for_conversation(ref)
        if binding is None:
            return self._bindings.resolve_by_conversation(ref) is None  # gone: drop its rows
        return self._bindings.mine(binding) or self._resident(binding.target_session_key)

    async def keep_retrying(self, interval_seconds: float) -> None:
        """:meth:`retry` every ``interval_seconds`` until cancelled: a message queued behind
        another process's session, or behind a failure, is not left waiting for the next one."""
        while True:
            await self.clock.sleep(interval_seconds)
            try:
                handed = await self.retry()
            except Exception:
                _log.warning("inbox.retry_failed", exc_info=True)
                continue
            if handed:
                _log.info("inbox.retried", delivered=handed)

    # -- cursors: how far each conversation was read ---------------------------------

    def seen(self, conversation: ConversationRef, seq: int) -> None:
        """Note a message seen in the conversation (anyone's, the bot's own included)."""
        if conversation.key in self._held:
            return  # not without a gap: the catch-up moves it
        by_account = self._seen.setdefault((conversation.channel, conversation.account_id), {})
        if seq > by_account.get(conversation.conversation_id, -1):
            by_account[conversation.conversation_id] = seq

    async def cursors(
        self, channel: str, account_id: str, conversation_ids: Iterable[str]
    ) -> dict[str, int | None]:
        """How far each conversation was read (see :func:`repository.cursors`), with what
        was seen since the last flush."""
        wanted = list(conversation_ids)
        found: dict[str, int | None] = await self._db.run(
            repository.cursors, channel, account_id, wanted
        )
        seen = self._seen.get((channel, account_id), {})
        for conversation_id in wanted:
            seq = seen.get(conversation_id)
            if seq is not None:
                known = found.get(conversation_id)
                found[conversation_id] = seq if known is None else max(known, seq)
        return found

    async def advance(self, conversation: ConversationRef, seq: int) -> None:
        """Record, now, that the conversation was read up to ``seq``."""
        self.seen(conversation, seq)
        await self._db.run(
            repository.advance_cursors,
            conversation.channel,
            conversation.account_id,
            {conversation.conversation_id: seq},
            self.clock.now(),
        )

    async def flush_cursors(self) -> None:
        """Write the cursors seen since the last flush (a crash loses only a re-read)."""
        seen, self._seen = self._seen, {}
        try:
            for (channel, account_id), by_conversation in seen.items():
                await self._db.run(
                    repository.advance_cursors,
                    channel,
                    account_id,
                    by_conversation,
                    self.clock.now(),
                )
        except BaseException:
            for (channel, account_id), by_conversation in seen.items():  # keep for next time
                for conversation_id, seq in by_conversation.items():
                    ref = ConversationRef(
                        channel=channel, account_id=account_id, conversation_id=conversation_id
                    )
                    self.seen(ref, seq)
            raise

    async def keep_flushing(self, interval_seconds: float) -> None:
        """Flush the cursors every ``interval_seconds`` until cancelled."""
        while True:
            await self.clock.sleep(interval_seconds)
            try:
                await self.flush_cursors()
            except Exception:
                _log.warning("inbox.cursor_flush_failed", exc_info=True)

    # -- positions: how far an account's event stream was read ---------------------

    async def position(self, channel: str, account_id: str) -> str | None:
        """The token the account's event stream resumes from; None before its first save."""
        found: str | None = await self._db.run(repository.position, channel, account_id)
        return found

    async def save_position(self, channel: str, account_id: str, token: str) -> None:
        """Keep ``token`` as where the stream resumes: call it only once every message
        the stream gave before it is recorded (:meth:`receive` has returned for each)."""
        await self._db.run(repository.save_position, channel, account_id, token, self.clock.now())


async def _no_fetch(file: FileRef) -> bytes:
    raise FileUnavailable(file.name, "the channel it came from is not connected")


def _reason(exc: BaseException) -> str:
    """What failed, in words fit for the message's author (no internals, no secrets)."""
    if isinstance(exc, ThreadboundError):
        return " ".join(redact_text(str(exc)).split())[:300]
    return INTERNAL
