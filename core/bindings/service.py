"""SessionBindingService: which session is bound to which conversation.

Guarantees, in the order callers rely on them:

- Reads (``list_by_session``, ``resolve_by_conversation``, ``get``) are dict
  lookups on in-memory indexes, rebuilt from the store by :meth:`start`.
- ``bind`` and ``unbind`` return only after the change is committed, and the
  stream's reactions to it (the channel's hello or goodbye) are done; given the
  caller's transaction (``tx``) they write in it instead, and the same follows
  its commit. A conversation has at most one live binding: in one process the
  reservation set refuses the second caller at once; across processes the
  store's partial unique index does.
- Metadata changes are typed (:class:`BindingMetadata`, only the keys set) and
  published once committed (:class:`BindingUpdated`).
- ``touch`` is synchronous and cheap: it updates memory and queues the time;
  :meth:`flush_touches` writes every queued binding once, however many touches
  it had, and :meth:`close` flushes, so a clean shutdown loses no activity.
- Ended bindings leave the indexes but stay in the store as history.
- A binding is ``active`` until an end starts, ``ending`` while its end is
  being written (still indexed, so a second end is refused, but no longer
  used): callers that act on a binding ask :meth:`active`,
  :meth:`active_for_session` or :meth:`active_for_conversation`, never
  compare the status themselves.

When a binding expires is the record's business
(:meth:`SessionBindingRecord.expiry_reason`); the background task that enforces
it lives in :mod:`core.bindings.lifecycle`, which imports this module, never
the other way round.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol, cast, get_args

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from core import log_events
from core._gc import bulk_allocation
from core.bindings._index import BindingIndex
from core.bindings.adapter import AdapterRegistry
from core.bindings.records import (
    BindingEnded,
    BindingMetadata,
    BindingStarted,
    BindingTargetKind,
    BindingUpdated,
    ConversationKey,
    ConversationRef,
    ExpiryReason,
    SessionBindingRecord,
)
from core.bindings.repository import BindingRepository
from core.clock import Clock, SystemClock
from core.errors import BindingError, ConversationAlreadyBound
from core.logging import get_logger
from core.sharding import EVERY_SHARD, ShardSet
from core.store.database import Database
from core.store.errors import store_errors
from core.store.transaction import Returned, Transaction
from core.stream import Publish, ignore

__all__ = ["NO_EXPIRY", "BindingWindows", "SessionBindingService"]


class BindingWindows(Protocol):
    """Where a new binding's idle timeout and maximum age come from: the resolved flags
    (the file's values with the scope's runtime overrides applied)."""

    def binding_windows(self, scope: str | None, account_id: str, channel: str) -> tuple[int, int]:
        """``(idle_timeout_ms, max_age_ms)`` for a binding there; 0 = never."""
        ...


class _NoExpiry:
    def binding_windows(self, scope: str | None, account_id: str, channel: str) -> tuple[int, int]:
        return (0, 0)


NO_EXPIRY: BindingWindows = _NoExpiry()
"""Bindings that never expire unless asked (tests, tools)."""

_log = get_logger("core.bindings")


def _not_live(binding_id: str) -> BindingError:
    return BindingError(f"binding {binding_id} is not live; bind the conversation again")


class SessionBindingService:
    """Owns binding records, their indexes and their persistence."""

    def __init__(
        self,
        database: Database,
        *,
        adapters: AdapterRegistry | None = None,
        clock: Clock | None = None,
        windows: BindingWindows = NO_EXPIRY,
        shards: ShardSet = EVERY_SHARD,
        publish: Publish[BindingStarted | BindingEnded | BindingUpdated] = ignore,
    ) -> None:
        self._publish = publish
        self._db = database
        self.shards = shards
        self.adapters = adapters if adapters is not None else AdapterRegistry()
        self.clock: Clock = clock or SystemClock()
        self._windows = windows
        self._index = BindingIndex()
        self._reserved: set[ConversationKey] = set()
        self._pending_touches: dict[str, datetime] = {}
        # Metadata changes are read-merge-write across an await: one at a time,
        # or a concurrent change (a thread's mode and its status line, say) is lost.
        self._metadata_lock = asyncio.Lock()
        # Ends under way (their farewell being posted): shutdown waits for them while
        # the chat clients can still post.
        self._ending: set[asyncio.Future[None]] = set()

    # -- start-up and shutdown -------------------------------------------------

    def ending(self) -> list[asyncio.Future[None]]:
        """Binding ends in progress, each done once its farewell was posted or failed."""
        return list(self._ending)

    async def start(self) -> int:
        """Rebuild the indexes from the store; returns how many live bindings were loaded."""
        with bulk_allocation(freeze=True):  # once, at start-up
            records = await self._db.run(lambda conn: BindingRepository(conn).load_live())
            self._index.rebuild(records)
        return len(records)

    async def close(self) -> None:
        """Write pending touches. Call on shutdown, before the database closes."""
        await self.flush_touches()

    # -- other processes' changes ------------------------------------------------

    async def reload(self) -> int:
        """Rebuild the indexes from the store: this process may have missed changes."""
        records = await self._db.run(lambda conn: BindingRepository(conn).load_live())
        self._index.rebuild(records)
        return len(records)

    async def reload_binding(self, binding_id: str, /) -> None:
        """Another process bound, ended or changed ``binding_id``: index it as stored."""
        stored = await self._db.run(lambda conn: BindingRepository(conn).get(binding_id))
        indexed = self._index.get(binding_id)
        if stored is None or stored.status == "ended":
            if indexed is not None:
                self._index.remove(indexed)
            return
        if indexed is not None:
            self._index.replace(stored)
            return
        holder = self._index.by_conversation_key(stored.conversation.key)
        if holder is not None:  # ended elsewhere; its own notice may still be on its way
            self._index.remove(holder)
        self._index.add(stored)

    def mine(self, record: SessionBindingRecord, /) -> bool:
        """Whether this process answers for the binding's guild (sweeps it, for one)."""
        return self.shards.owns_scope(record.scope)

    # -- reads: memory only ----------------------------------------------------

    def list_by_session(self, target_session_key: str, /) -> tuple[SessionBindingRecord, ...]:
        """Live (active or ending) bindings of a session, oldest first."""
        # Hot path (router): one dict lookup on the index, no extra call.
        return self._index.by_session.get(target_session_key, ())

    def resolve_by_conversation(self, ref: ConversationRef, /) -> SessionBindingRecord | None:
        """The live binding of this exact conversation, if any."""
        return self._index.by_conversation_key(ref.key)

    def get(self, binding_id: str, /) -> SessionBindingRecord | None:
        return self._index.get(binding_id)

    def active(self, binding_id: str, /) -> SessionBindingRecord | None:
        """The binding if it is active; None when unknown, ended or being ended.

        An ``ending`` binding is still indexed (so a second end is refused) but
        its farewell is on its way: nothing may act on it any more.
        """
        record = self._index.get(binding_id)
        return record if record is not None and record.status == "active" else None

    def active_for_session(self, target_session_key: str, /) -> tuple[SessionBindingRecord, ...]:
        """The session's active bindings, oldest first: list_by_session without ending ones."""
        return tuple(r for r in self.list_by_session(target_session_key) if r.status == "active")

    def active_for_conversation(self, ref: ConversationRef, /) -> SessionBindingRecord | None:
        """This conversation's binding if it is active: what a command typed there acts on."""
        record = self._index.by_conversation_key(ref.key)
        return record if record is not None and record.status == "active" else None

    def live(self) -> Iterable[SessionBindingRecord]:
        """Every live binding (a snapshot, safe to iterate while binding)."""
        return tuple(self._index.by_id.values())

    def __len__(self) -> int:
        return len(self._index)

    # -- bind ------------------------------------------------------------------

    async def bind(
        self,
        target_session_key: str,
        target_kind: BindingTargetKind,
        conversation: ConversationRef,
        metadata: BindingMetadata | Mapping[str, Any] | None = None,
        ttl_ms: int | None = None,
        bound_by: str | None = None,
        *,
        scope: str | None = None,
        idle_timeout_ms: int | None = None,
        max_age_ms: int | None = None,
        tx: Transaction | None = None,
    ) -> SessionBindingRecord:
        """Bind a session to a conversation, creating the conversation when its id is empty.

        ``tx``: the caller's transaction (a spawn's, which holds its subagent row
        too). The binding is written in it and returned at once, reserved but not
        yet live: once ``tx`` commits it is indexed and :class:`BindingStarted` is
        published; if ``tx`` does not, the conversation is free again. Without
        ``tx`` the binding has a transaction of its own and is live on return.
        Either way the conversation (a thread) is created first, outside any
        transaction.

        ``metadata``: typed (only the keys it sets are stored), or as a mapping.

        ``scope`` is where the conversation is (a Discord guild id): its flags set the
        binding's windows, and the process on its shard answers for it.

        ``ttl_ms`` is a hard lifetime for this binding and takes the place of the
        configured max age; idle timeout and max age default to the resolved flags.

        Raises:
            BindingError: bad arguments, or no adapter can create the conversation.
            ConversationAlreadyBound: the conversation already has a live binding
                (with ``tx``, from its commit when another process bound it first).
            StoreError: the store did not commit; nothing was bound.
        """
        if not target_session_key.strip():
            raise BindingError("bind needs a non-empty target session key")
        if target_kind not in get_args(BindingTargetKind):
            kinds = ", ".join(repr(k) for k in get_args(BindingTargetKind))
            raise BindingError(f"target kind must be one of {kinds}, not {target_kind!r}")
        if ttl_ms is not None and ttl_ms <= 0:
            raise BindingError(f"ttl_ms must be positive, not {ttl_ms}")
        stored = (
            metadata.changes() if isinstance(metadata, BindingMetadata) else dict(metadata or {})
        )
        if not conversation.conversation_id:
            conversation = await self._create_conversation(conversation, target_session_key, stored)

        key = conversation.key
        if key in self._index.by_conversation or key in self._reserved:
            owner = self.resolve_by_conversation(conversation)
            raise ConversationAlreadyBound(
                conversation.describe(), owner.target_session_key if owner else None
            )
        record = self._new_record(
            target_session_key,
            target_kind,
            conversation,
            stored,
            bound_by,
            scope=scope,
            ttl_ms=ttl_ms,
            idle_timeout_ms=idle_timeout_ms,
            max_age_ms=max_age_ms,
        )
        if tx is not None:
            self._bind_in(tx, record)
            return record
        with store_errors(
            f"could not record the binding of {record.conversation.describe()}",
            leaves="nothing was bound",
        ):
            async with self._db.transaction() as own:
                self._bind_in(own, record)
        return record

    def _bind_in(self, tx: Transaction, record: SessionBindingRecord) -> None:
        """Reserve the conversation and write the binding in ``tx``; once committed,
        index it and tell the stream (the channel's hello is awaited there)."""
        key = record.conversation.key
        self._reserved.add(key)
        tx.add(_insert_row, record)

        async def bound() -> None:
            self._reserved.discard(key)
            self._index.add(record)
            log_events.emit(
                log_events.BindingBound(
                    **record.log_fields(),
                    parent_conversation_id=record.conversation.parent_conversation_id,
                    target_kind=record.target_kind,
                    bound_by=record.bound_by,
                    expires_at=record.expires_at,
                ),
                _log,
            )
            await self._publish(BindingStarted(record))

        tx.after_commit(bound)
        tx.after_rollback(lambda: self._reserved.discard(key))

    async def _create_conversation(
        self,
        requested: ConversationRef,
        target_session_key: str,
        metadata: dict[str, Any],
    ) -> ConversationRef:
        adapter = self.adapters.get(requested.channel, requested.account_id)
        if adapter is None:
            raise BindingError(
                f"no adapter is registered for {requested.channel}/{requested.account_id}, "
                "so a new conversation cannot be created; pass an existing conversation id"
            )
        created = await adapter.create_conversation(
            requested, target_session_key=target_session_key, metadata=metadata
        )
        if not created.conversation_id:
            raise BindingError(
                f"the {requested.channel} adapter created a conversation without an id"
            )
        return created

    def _new_record(
        self,
        target_session_key: str,
        target_kind: BindingTargetKind,
        conversation: ConversationRef,
        metadata: dict[str, Any],
        bound_by: str | None,
        *,
        scope: str | None,
        ttl_ms: int | None,
        idle_timeout_ms: int | None,
        max_age_ms: int | None,
    ) -> SessionBindingRecord:
        default_idle, default_max_age = self._windows.binding_windows(
            scope, conversation.account_id, conversation.channel
        )
        idle = default_idle if idle_timeout_ms is None else idle_timeout_ms
        if ttl_ms is not None:
            max_age = ttl_ms
        elif max_age_ms is not None:
            max_age = max_age_ms
        else:
            max_age = default_max_age
        now = self.clock.now()
        return SessionBindingRecord(
            binding_id=uuid.uuid4().hex,
            target_session_key=target_session_key,
            target_kind=target_kind,
            conversation=conversation,
            status="active",
            bound_at=now,
            expires_at=now + timedelta(milliseconds=max_age) if max_age else None,
            metadata=metadata,
            bound_by=bound_by,
            scope=scope,
            last_activity_at=now,
            idle_timeout_ms=idle,
            max_age_ms=max_age,
        )

    # -- unbind ----------------------------------------------------------------

    async def unbind(
        self,
        binding_id: str | None = None,
        target_session_key: str | None = None,
        *,
        reason: str,
        tx: Transaction | None = None,
    ) -> list[SessionBindingRecord]:
        """End one binding (by id) or every binding of a session; returns what ended.

        Nothing live to end is not an error: the result is empty, which makes
        a retried unbind, or one racing the sweeper, harmless.

        ``tx``: the caller's transaction (a delivered announcement's mark goes with
        its run-mode thread's end). The ends are written in it and the bindings
        returned as they will be once it commits (meanwhile ``ending``: nothing acts
        on them); after the commit they leave the indexes and :class:`BindingEnded`
        is published, and if it does not commit they are active again. Without
        ``tx``, each end has a transaction of its own and is done on return.
        """
        if binding_id is None and target_session_key is None:
            raise BindingError("unbind needs a binding_id or a target_session_key")
        if not reason:
            raise BindingError("unbind needs a reason; it is shown in the farewell and the logs")
        targets: Iterable[SessionBindingRecord]
        if binding_id is not None:
            record = self.active(binding_id)
            targets = [record] if record is not None else []
            if target_session_key is not None:
                targets = [r for r in targets if r.target_session_key == target_session_key]
        else:
            assert target_session_key is not None
            targets = self.active_for_session(target_session_key)
        if tx is not None:
            ending = list(targets)
            for record in ending:
                self._end_in(tx, record, reason)
            return [record.model_copy(update={"status": "ended"}) for record in ending]
        ended: list[SessionBindingRecord] = []
        for record in targets:
            result = await self._end(record, reason)
            if result is not None:
                ended.append(result)
        return ended

    async def _end(
        self,
        record: SessionBindingRecord,
        reason: str,
        *,
        idle_before: datetime | None = None,
        expired: bool = False,
    ) -> SessionBindingRecord | None:
        """End one live binding in a transaction of its own: the ended record, or None
        when the store had it end already or (``idle_before``) saw activity since."""
        with store_errors(
            f"could not record the end of binding {record.binding_id}",
            leaves="it is still bound",
        ):
            async with self._db.transaction() as tx:
                done = self._end_in(tx, record, reason, idle_before=idle_before, expired=expired)
        return record.model_copy(update={"status": "ended"}) if done.value else None

    def _end_in(
        self,
        tx: Transaction,
        record: SessionBindingRecord,
        reason: str,
        *,
        idle_before: datetime | None = None,
        expired: bool = False,
    ) -> Returned[bool]:
        """Write the end of one live binding in ``tx``; it is ``ending`` until then.

        While the write is in flight the record is ``ending``, so the router
        no longer resolves it. With ``idle_before`` the write is conditional on
        no activity since then (the sweeper's re-check against other processes);
        when that condition fails the binding stays, as the store has it.
        The end counts among :meth:`ending` until its farewell was said.
        """
        self._index.replace(record.model_copy(update={"status": "ending"}))
        pending = self._pending_touches.pop(record.binding_id, None)
        done = tx.add(
            _end_row,
            record.binding_id,
            self.clock.now(),
            reason,
            pending or record.last_activity_at,
            idle_before,
        )
        settled: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._ending.add(settled)
        settled.add_done_callback(self._ending.discard)

        async def committed() -> None:
            try:
                if done.value:
                    await self._ended(record, reason, expired=expired)
                else:
                    await self._refresh_from_store(record)
            finally:
                settled.set_result(None)

        def rolled_back() -> None:
            # Not ended after all: back to active, with its queued activity.
            self._index.replace(record)
            if pending is not None:
                self._pending_touches.setdefault(record.binding_id, pending)
            settled.set_result(None)

        tx.after_commit(committed)
        tx.after_rollback(rolled_back)
        return done

    async def _ended(self, record: SessionBindingRecord, reason: str, *, expired: bool) -> None:
        """The end is committed: out of the indexes, logged, and told (the farewell)."""
        self._unindex(record)
        ended = record.model_copy(update={"status": "ended"})
        if expired:
            expiry = cast(ExpiryReason, reason)  # ``expired`` says it is one of the two
            log_events.emit(log_events.BindingExpired(**ended.log_fields(), reason=expiry), _log)
        else:
            log_events.emit(
                log_events.BindingUnbound(
                    **ended.log_fields(),
                    parent_conversation_id=ended.conversation.parent_conversation_id,
                    reason=reason,
                ),
                _log,
            )
        await self._publish(BindingEnded(ended, reason))

    async def _refresh_from_store(self, record: SessionBindingRecord) -> None:
        """Another process touched or ended this binding: adopt the store's view."""
        fresh = await self._db.run(lambda conn: BindingRepository(conn).get(record.binding_id))
        if fresh is None or fresh.status == "ended":
            self._unindex(record)
        else:
            self._index.replace(fresh)

    # -- settings: windows and metadata ----------------------------------------
    #
    # Both changes are committed before they return and then replace the
    # in-memory record, re-read first, because a touch may have replaced it
    # while the write was in flight.

    def _live_record(self, binding_id: str) -> SessionBindingRecord:
        record = self.active(binding_id)
        if record is None:
            raise _not_live(binding_id)
        return record

    async def update_metadata(
        self, binding_id: str, change: BindingMetadata, /
    ) -> SessionBindingRecord:
        """Merge ``change`` into a live binding's metadata: the keys it sets replace the
        stored ones, the others stay (``BindingMetadata(default_mode="follow_up")``).
        Once committed, :class:`BindingUpdated` is published.

        Raises:
            BindingError: the binding is not live.
            StoreError: the store did not commit; the metadata is unchanged.
        """
        changes = change.changes()
        async with self._metadata_lock:
            updated = await self._update_metadata(binding_id, changes)
        await self._publish(BindingUpdated(updated, frozenset(changes)))
        return updated

    async def _update_metadata(
        self, binding_id: str, changes: dict[str, Any]
    ) -> SessionBindingRecord:
        record = self._live_record(binding_id)
        metadata = {**record.metadata, **changes}
        with store_errors(f"could not record the settings of binding {binding_id}"):
            done = await self._db.run(
                lambda conn: BindingRepository(conn).set_metadata(binding_id, metadata)
            )
        if not done:
            await self._refresh_from_store(record)
            raise _not_live(binding_id)
        current = self._index.by_id.get(binding_id, record)
        updated = current.model_copy(update={"metadata": metadata})
        self._index.replace(updated)
        return updated

    async def set_lifetime(
        self,
        binding_id: str,
        /,
        *,
        idle_timeout_ms: int | None = None,
        max_age_ms: int | None = None,
        actor: str | None = None,
    ) -> SessionBindingRecord:
        """Change a live binding's idle and/or max-age window (0 = never); None keeps one.

        ``actor`` (who asked) goes into the ``binding.lifetime_changed`` audit line.

        The hard deadline is recomputed from ``bound_at``, so a max age shorter
        than the binding's age makes it expire at the sweeper's next pass.
        Returns only after the store committed the change.

        Raises:
            BindingError: a negative window, or the binding is not live.
            StoreError: the store did not commit; the windows are unchanged.
        """
        for name, value in (("idle_timeout_ms", idle_timeout_ms), ("max_age_ms", max_age_ms)):
            if value is not None and value < 0:
                raise BindingError(f"{name} must be 0 (never) or positive, not {value}")
        record = self._live_record(binding_id)
        idle = record.idle_timeout_ms if idle_timeout_ms is None else idle_timeout_ms
        max_age = record.max_age_ms if max_age_ms is None else max_age_ms
        expires_at = record.bound_at + timedelta(milliseconds=max_age) if max_age else None
        with store_errors(
            f"could not record the new windows of binding {binding_id}",
            leaves="they are unchanged",
        ):
            done = await self._db.run(
                lambda conn: BindingRepository(conn).set_lifetime(
                    binding_id, idle_timeout_ms=idle, max_age_ms=max_age, expires_at=expires_at
                )
            )
        if not done:
            await self._refresh_from_store(record)
            raise _not_live(binding_id)
        # Re-read: a touch may have replaced the record while the write was in flight.
        current = self._index.by_id.get(binding_id, record)
        updated = current.model_copy(
            update={"idle_timeout_ms": idle, "max_age_ms": max_age, "expires_at": expires_at}
        )
        self._index.replace(updated)
        log_events.emit(
            log_events.BindingLifetimeChanged(
                **updated.log_fields(),
                idle_timeout_ms=idle,
                max_age_ms=max_age,
                expires_at=expires_at,
                actor=actor,
            ),
            _log,
        )
        return updated

    # -- activity --------------------------------------------------------------

    def touch(self, binding_id: str, /, at: datetime | None = None) -> bool:
        """Record activity now (or at ``at``); False when the binding is not live.

        Never moves ``last_activity_at`` backwards. The write is deferred to
        :meth:`flush_touches`, which coalesces every touch of a binding into one.
        """
        record = self.active(binding_id)
        if record is None:
            return False
        at = at or self.clock.now()
        if record.last_activity_at is not None and at <= record.last_activity_at:
            return True
        self._index.replace(record.model_copy(update={"last_activity_at": at}))
        self._pending_touches[binding_id] = at
        return True

    @property
    def pending_touches(self) -> int:
        return len(self._pending_touches)

    async def flush_touches(self) -> int:
        """Write queued activity times, one row update per binding; returns how many."""
        if not self._pending_touches:
            return 0
        batch, self._pending_touches = self._pending_touches, {}
        try:
            await self._db.run(lambda conn: BindingRepository(conn).touch_many(batch))
        except SQLAlchemyError:
            for binding_id, at in batch.items():
                newer = self._pending_touches.get(binding_id)
                self._pending_touches[binding_id] = max(at, newer) if newer else at
            _log.warning("binding.touch_flush_failed", bindings=len(batch), exc_info=True)
            return 0
        return len(batch)

    # -- expiry ----------------------------------------------------------------

    async def expire(self, binding_id: str, /) -> SessionBindingRecord | None:
        """End a binding if, re-read right now, it is past its idle or max-age deadline.

        The record is read from memory at call time, not taken from the caller,
        because a touch may have landed since the caller chose it. An idle
        expiry is also conditional in the store, so activity written by another
        process keeps the binding too. Returns the ended record, or None.
        """
        record = self.active(binding_id)
        if record is None:
            return None
        now = self.clock.now()
        reason = record.expiry_reason(now)
        if reason is None:
            return None
        idle_before = None
        if reason == "idle-expired":
            idle_before = now - timedelta(milliseconds=record.idle_timeout_ms)
        return await self._end(record, reason, idle_before=idle_before, expired=True)

    # -- index upkeep ----------------------------------------------------------

    def _unindex(self, record: SessionBindingRecord) -> None:
        """Drop an ended binding from the indexes, with any activity still queued for it."""
        self._index.remove(record)
        self._pending_touches.pop(record.binding_id, None)


def _insert_row(conn: Connection, record: SessionBindingRecord) -> None:
    try:
        BindingRepository(conn).insert(record)
    except IntegrityError as exc:
        # Another process bound the same conversation first.
        raise ConversationAlreadyBound(record.conversation.describe(), None) from exc


def _end_row(
    conn: Connection,
    binding_id: str,
    at: datetime,
    reason: str,
    last_activity_at: datetime | None,
    idle_before: datetime | None,
) -> bool:
    return BindingRepository(conn).end(
        binding_id,
        at=at,
        reason=reason,
        last_activity_at=last_activity_at,
        idle_before=idle_before,
    )
