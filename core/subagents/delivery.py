"""Delivering completion announcements exactly once, through an outbox in the store.

A completion is first *recorded*: one row per completion id in
``completion_deliveries`` (the primary key is the idempotency record, so a
retry, a duplicate or a recovered completion cannot add a second). Posting
then *claims* the row (``pending`` → ``sending``, a compare-and-set only one
caller wins), resolves the destination with the router, renders, posts
through the channel's sink and marks the row ``delivered``. A failed post
puts the row back to ``pending`` and is retried on the clock; a restart
finds what was not delivered and posts it.

Every row not yet delivered is under its process's lease
(:mod:`core.leases`), renewed while that process lives: another process
never touches it. A process that died loses its leases when they expire,
and whichever process then runs :meth:`CompletionDelivery.recover` for
that guild takes the row over. A row the dead process left ``sending`` (the
channel may have accepted the post before the row said ``delivered``)
becomes ``uncertain``, and its delivery first asks the sink whether the same
announcement is already in the destination (posted since the completion
was recorded). Found, the row is marked delivered without a second post.

A reply (the spawn asked while threads are off) goes the same way, to the
requester's conversation as every fallback does; only its text differs (the
answer alone, no header) and a refused post is not retried.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol, runtime_checkable

from sqlalchemy import Connection

from core import log_events
from core.bindings.records import ConversationRef, SessionBindingRecord
from core.clock import Clock, SystemClock
from core.errors import DeliveryError
from core.leases import Leases
from core.log_events import DeliveryPath
from core.logging import get_logger
from core.registry import PerAccount
from core.routing import BoundDeliveryRouter, DeliveryResolution
from core.store.database import Database
from core.store.transaction import Transaction
from core.subagents import repository
from core.subagents.announce import render_completion, render_reply
from core.subagents.records import Outcome, SubagentRecord
from core.subagents.repository import PendingCompletion

__all__ = ["CompletionDelivery", "CompletionSink", "Posted", "SinkRegistry"]

_log = get_logger("core.subagents")

_REPLY: Final = DeliveryResolution(None, "fallback", "no-active-binding")
"""Where a reply goes, as the outbox records it: to the requester, never to a thread."""


@dataclass(frozen=True, slots=True)
class Posted:
    message_id: str
    path: DeliveryPath


@runtime_checkable
class CompletionSink(Protocol):
    """Posts announcements for one (channel, account)."""

    @property
    def channel(self) -> str: ...

    @property
    def account_id(self) -> str: ...

    async def post_bound(self, binding: SessionBindingRecord, content: str) -> Posted:
        """Post in the bound conversation, under the binding's persona; DeliveryError if not."""
        ...

    async def post_to(self, conversation: ConversationRef, content: str) -> Posted:
        """Post in a conversation as the bot itself; DeliveryError if not."""
        ...

    async def find_posted(
        self, conversation: ConversationRef, content: str, since: datetime
    ) -> Posted | None:
        """An announcement with exactly ``content`` posted there (by us) since ``since``."""
        ...


class SinkRegistry(PerAccount[CompletionSink]):
    """One completion sink per (channel, account); see :class:`core.registry.PerAccount`."""

    def __init__(self) -> None:
        super().__init__("completion sink")


NameOf = Callable[[SubagentRecord], str]


class Undeliverable(DeliveryError):
    """Nowhere to post, now or later (no binding and no requester): not retried."""


class CompletionDelivery:
    """Records completions and delivers each one once."""

    def __init__(
        self,
        database: Database,
        router: BoundDeliveryRouter,
        sinks: SinkRegistry,
        *,
        name_of: NameOf,
        clock: Clock | None = None,
        max_attempts: int = 5,
        retry_seconds: float = 5.0,
        leases: Leases | None = None,
    ) -> None:
        self._db = database
        self._router = router
        self.sinks = sinks
        self._name_of = name_of
        self.clock: Clock = clock or SystemClock()
        self._max_attempts = max_attempts
        self._retry_seconds = retry_seconds
        self.leases = leases or Leases(database, clock=self.clock)

    async def record(
        self, completion_id: str, session_key: str, outcome: Outcome, result: str
    ) -> bool:
        """Put a completion in the outbox, under our lease; False if this completion id
        is already there."""
        now = self.clock.now()
        return await self._db.run(
            lambda conn: repository.insert_completion(
                conn,
                completion_id=completion_id,
                session_key=session_key,
                outcome=outcome,
                result=result,
                at=now,
                owner=self.leases.owner,
                until=self.leases.until(),
            )
        )

    async def complete(
        self, subagent: SubagentRecord, completion_id: str, outcome: Outcome, result: str
    ) -> PendingCompletion | None:
        """Save ``subagent`` (moved to its outcome), record its completion and claim it
        for posting, in one transaction (three were one each); pass the claimed row to
        :meth:`deliver`. None when this completion id was recorded before: then
        :meth:`deliver` claims it as usual.

        Claimed at once, a crash before the post leaves the row ``sending`` under our
        lease, which the successor resolves by looking in the destination first: never
        a second post.
        """
        now = self.clock.now()
        return await self._db.run(
            lambda conn: repository.complete(
                conn,
                subagent,
                completion_id=completion_id,
                outcome=outcome,
                result=result,
                at=now,
                owner=self.leases.owner,
                until=now + self.leases.ttl,
            )
        )

    async def recover(self) -> list[PendingCompletion]:
        """The completions no live process is delivering: a previous or dead process's.

        Rows under a live lease, this process's own included, are left alone;
        a dead process's ``sending`` rows become ``uncertain``.
        """
        now = self.clock.now()
        return await self._db.run(
            lambda conn: repository.recover_pending(conn, owner=self.leases.owner, now=now)
        )

    async def deliver(
        self,
        completion_id: str,
        subagent: SubagentRecord,
        claimed: PendingCompletion | None = None,
        *,
        tx: Transaction | None = None,
    ) -> bool:
        """Post the completion unless someone else did or does; retries on the clock.

        ``claimed``: the row as :meth:`complete` claimed it for this call; without it
        the row is claimed here first. ``tx``: the caller's transaction, where the
        delivered mark goes with what comes next (a run-mode thread's end), one
        commit where there were two; posted, the mark lands even if ``tx`` does not
        commit (then on its own). Without ``tx`` the mark is committed before this
        returns. Returns True when this call posted it.
        """
        row = claimed
        while True:
            if row is None:
                row = await self._db.run(self._claim, completion_id, self.clock.now())
            if row is None:
                return False  # delivered, being delivered, or given up on
            try:
                await self._post(row, subagent, tx)
            except DeliveryError as exc:
                give_up = (
                    isinstance(exc, Undeliverable)
                    or row.attempts >= self._max_attempts
                    # a reply's one channel refused it by name (no permission, no such
                    # channel): waiting changes nothing; a rate limit or an outage
                    # (no code) is retried like any completion's
                    or (subagent.reply and exc.code is not None)
                )
                requester = subagent.requester
                log_events.emit(
                    log_events.DeliveryFailed(
                        completion_id=completion_id,
                        path="webhook" if exc.path == "webhook" else "bot",
                        destination=None,
                        binding_id=subagent.binding_id,
                        error=exc,
                        code=exc.code,
                        retryable=not give_up,
                        account=requester.account_id if requester else None,
                        guild=subagent.scope,
                    ),
                    _log,
                )
                await self._db.run(self._release, completion_id, give_up)
                if give_up:
                    return False
                await self.clock.sleep(self._retry_seconds * row.attempts)
                row = None
                continue
            return True

    def _claim(
        self, conn: Connection, completion_id: str, now: datetime
    ) -> PendingCompletion | None:
        until = now + self.leases.ttl
        return repository.claim(conn, completion_id, owner=self.leases.owner, now=now, until=until)

    def _release(self, conn: Connection, completion_id: str, give_up: bool) -> None:
        repository.release(conn, completion_id, give_up, owner=self.leases.owner)

    async def _post(
        self, row: PendingCompletion, subagent: SubagentRecord, tx: Transaction | None
    ) -> None:
        if subagent.reply:
            await self._post_reply(row, subagent, tx)
            return
        resolution = self._router.resolve_destination(
            target_session_key=subagent.session_key,
            requester=subagent.requester,
            scope=subagent.scope,
        )
        if resolution.binding is not None:
            try:
                await self._post_bound(row, subagent, resolution, tx)
                return
            except DeliveryError:
                resolution = self._router.resolve_destination(
                    target_session_key=subagent.session_key,
                    requester=subagent.requester,
                    scope=subagent.scope,
                )
                if resolution.binding is not None:
                    raise  # the thread is there: retry it, never reroute silently
        await self._post_fallback(row, subagent, resolution, tx)

    async def _post_bound(
        self,
        row: PendingCompletion,
        subagent: SubagentRecord,
        resolution: DeliveryResolution,
        tx: Transaction | None,
    ) -> None:
        binding = resolution.binding
        assert binding is not None
        content = self._render(row, subagent, resolution)
        await self._send(
            row,
            subagent,
            resolution,
            binding.conversation,
            content,
            lambda sink: sink.post_bound(binding, content),
            tx,
        )

    async def _post_fallback(
        self,
        row: PendingCompletion,
        subagent: SubagentRecord,
        resolution: DeliveryResolution,
        tx: Transaction | None,
    ) -> None:
        requester = subagent.requester
        log_events.emit(
            log_events.DeliveryFallback(
                completion_id=row.completion_id,
                reason=resolution.reason,
                target_session_key=subagent.session_key,
                channel=requester.channel if requester else None,
                account=requester.account_id if requester else None,
                requester_conversation_id=requester.conversation_id if requester else None,
                destination=requester.conversation_id if requester else None,
                guild=subagent.scope,
            ),
            _log,
        )
        if requester is None or not requester.conversation_id:
            raise Undeliverable(
                f"completion {row.completion_id} has no bound destination "
                f"({resolution.reason}) and no requester to fall back to"
            )
        content = self._render(row, subagent, resolution)
        await self._send(
            row,
            subagent,
            resolution,
            requester,
            content,
            lambda sink: sink.post_to(requester, content),
            tx,
        )

    async def _post_reply(
        self, row: PendingCompletion, subagent: SubagentRecord, tx: Transaction | None
    ) -> None:
        """A reply goes where it was asked, by design: there is no thread to route to,
        so nothing is resolved and nothing falls back (an operator's fallback counts
        stay about threads)."""
        requester = subagent.requester
        if requester is None or not requester.conversation_id:
            raise Undeliverable(f"reply {row.completion_id} has no channel to answer in")
        content = self._render(row, subagent, _REPLY)
        await self._send(
            row,
            subagent,
            _REPLY,
            requester,
            content,
            lambda sink: sink.post_to(requester, content),
            tx,
        )

    async def _send(
        self,
        row: PendingCompletion,
        subagent: SubagentRecord,
        resolution: DeliveryResolution,
        conversation: ConversationRef,
        content: str,
        post: Callable[[CompletionSink], Awaitable[Posted]],
        tx: Transaction | None,
    ) -> None:
        """Post (unless a dead process already did), record it delivered, log it."""
        sink = self._sink(conversation)
        posted = await self._already_posted(sink, row, conversation, content)
        if posted is None:
            posted = await post(sink)
        await self._mark(row, resolution, conversation.conversation_id, posted, tx)
        log_events.emit(
            log_events.DeliverySent(
                completion_id=row.completion_id,
                path=posted.path,
                mode=resolution.mode,
                binding_id=resolution.binding.binding_id if resolution.binding else None,
                target_session_key=subagent.session_key,
                channel=conversation.channel,
                account=conversation.account_id,
                destination=conversation.conversation_id,
                guild=subagent.scope,
            ),
            _log,
        )

    async def _already_posted(
        self,
        sink: CompletionSink,
        row: PendingCompletion,
        conversation: ConversationRef,
        content: str,
    ) -> Posted | None:
        """For a post a dead process may have made: is it there already?"""
        if not row.uncertain:
            return None
        found = await sink.find_posted(conversation, content, row.created_at)
        _log.info(
            "delivery.recovered_check",
            completion_id=row.completion_id,
            found=found is not None,
        )
        return found

    def _sink(self, conversation: ConversationRef) -> CompletionSink:
        sink = self.sinks.get(conversation.channel, conversation.account_id)
        if sink is None:
            raise DeliveryError(
                f"no completion sink for {conversation.channel}/{conversation.account_id}; "
                "is that account connected?"
            )
        return sink

    def _render(
        self, row: PendingCompletion, subagent: SubagentRecord, resolution: DeliveryResolution
    ) -> str:
        """The text for where the router sent it, and what it says of the session's binding;
        a reply's is the answer alone, when there is one (any other ending is named)."""
        if subagent.reply and row.outcome == "completed":
            return render_reply(row.result)
        return render_completion(
            name=self._name_of(subagent),
            outcome=row.outcome,
            result=row.result,
            mode=subagent.mode,
            bound=resolution.binding is not None,
            reason=subagent.outcome_reason,
            session_bound=resolution.session_bound,
        )

    async def _mark(
        self,
        row: PendingCompletion,
        resolution: DeliveryResolution,
        destination: str,
        posted: Posted,
        tx: Transaction | None,
    ) -> None:
        at = self.clock.now()
        args = (
            row.completion_id,
            resolution.mode,
            resolution.reason,
            destination,
            posted.message_id,
            at,
            self.leases.owner,
        )
        if tx is None:
            await self._db.run(repository.mark_delivered, *args)
            return
        tx.add(repository.mark_delivered, *args)

        async def alone() -> None:
            # Posted, so the mark must land even when what came with it does not
            # (marking twice changes nothing); the caller hears of its own failure.
            await self._db.run(repository.mark_delivered, *args)

        tx.after_rollback(alone)
