"""HandoffService: offer, accept, reject and complete handoffs between agents.

Two records of every handoff, with different jobs:

- the session events ``handoff.offered``, ``handoff.accepted``,
  ``handoff.rejected`` and ``handoff.completed`` are the immutable history and
  the source of truth;
- the ``handoffs`` table holds each handoff's current state, so listing a
  session's handoffs (and applying the activation rule) needs no replay.

Every transition validates against the session's log, appends its event, and
only then writes the table row. That order is deliberate: the event append is
the commit point. If the process dies or the table write fails after the
event, the history is complete and the table merely lags behind it, which
:meth:`HandoffService.rebuild_from_events` repairs from the log. The other
order could leave a row whose status no event explains, and the history could
never be reconstructed. Row timestamps are the events' own ``created_at``, so
a rebuild reproduces the table exactly.

Transitions of one session run one at a time in this process (a per-session
lock around validate, append and write). A second process appending to the
same session first makes the append fail (:class:`SessionError`) instead of
recording a transition validated against a stale log.
"""

from __future__ import annotations

import asyncio
import builtins
import uuid
import weakref
from collections.abc import Iterable
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from core.clock import Clock, SystemClock
from core.errors import HandoffError
from core.handoffs import repository
from core.handoffs.activation import TRANSITIONS, HandoffRecord, HandoffStatus
from core.sessions.events import SessionEvent
from core.sessions.log import SessionLog
from core.sessions.payloads import register_event_type
from core.sessions.tree import SessionTree
from core.store.database import Database
from core.store.errors import store_errors

__all__ = ["EVENT_TYPES", "HandoffEventPayload", "HandoffService", "movable", "replay"]

EVENT_PREFIX: Final = "handoff."
EVENT_TYPES: Final[dict[HandoffStatus, str]] = {
    status: f"{EVENT_PREFIX}{status}" for status in TRANSITIONS
}
"""The session event type recording each status change."""
_STATUS_OF_TYPE: Final[dict[str, HandoffStatus]] = {t: s for s, t in EVENT_TYPES.items()}


class HandoffEventPayload(BaseModel):
    """The payload of every ``handoff.<status>`` event; ``actor`` is who made the change."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    handoff_id: str = Field(min_length=1, max_length=32)
    from_agent: str = Field(min_length=1, max_length=100)
    to_agent: str = Field(min_length=1, max_length=100)
    artifact_id: str | None = Field(default=None, min_length=1, max_length=64)
    actor: str = Field(min_length=1, max_length=100)


for _type in EVENT_TYPES.values():
    register_event_type(_type, "system", HandoffEventPayload)


def _order(records: Iterable[HandoffRecord]) -> list[HandoffRecord]:
    return sorted(records, key=lambda r: (r.created_at, r.id))


def replay(session_key: str, events: Iterable[SessionEvent]) -> list[HandoffRecord]:
    """Every handoff of a session as its ``handoff.*`` events leave it, oldest offer first.

    The log is trusted as written: the service only ever appends legal
    transitions, so each event simply sets its handoff's status.
    """
    by_id: dict[str, HandoffRecord] = {}
    for event in events:
        status = _STATUS_OF_TYPE.get(event.type)
        payload = event.data_as(HandoffEventPayload) if status is not None else None
        if status is None or payload is None:
            continue
        known = by_id.get(payload.handoff_id)
        if known is None:
            by_id[payload.handoff_id] = HandoffRecord(
                id=payload.handoff_id,
                session_key=session_key,
                from_agent=payload.from_agent,
                to_agent=payload.to_agent,
                artifact_id=payload.artifact_id,
                status=status,
                created_at=event.created_at,
                updated_at=event.created_at,
            )
        else:
            by_id[payload.handoff_id] = known.moved(status, event.created_at)
    return _order(by_id.values())


def movable(
    session_key: str, events: Iterable[SessionEvent], handoff_id: str, status: HandoffStatus
) -> HandoffRecord:
    """The handoff as the log leaves it, provided it may move to ``status`` now.

    Raises:
        HandoffError: the session has no such handoff, or ``status`` is not a legal next step.
    """
    current = next((r for r in replay(session_key, events) if r.id == handoff_id), None)
    if current is None:
        raise HandoffError(handoff_id, from_status=None, to_status=status)
    allowed = TRANSITIONS[current.status]
    if status not in allowed:
        raise HandoffError(
            handoff_id, from_status=current.status, to_status=status, allowed=allowed
        )
    return current


class HandoffService:
    """Handoffs of sessions: legal transitions, each one an event and a table row.

    Args:
        database: the store holding the ``handoffs`` table.
        log: the session log the ``handoff.*`` events are appended to.
        clock: accepted like the other services; event (and so row) times come
            from ``log``'s clock, so that a rebuild reproduces rows exactly.
    """

    def __init__(self, database: Database, log: SessionLog, *, clock: Clock | None = None):
        self._db = database
        self._log = log
        self._clock: Clock = clock or SystemClock()
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    # -- transitions --------------------------------------------------------------

    async def offer(
        self,
        tree: SessionTree,
        *,
        from_agent: str,
        to_agent: str,
        artifact_id: str | None = None,
        actor: str,
    ) -> HandoffRecord:
        """Offer a handoff from ``from_agent`` to ``to_agent`` in ``tree``'s session.

        Raises:
            SessionError: a field is empty or too long, or another writer appended first.
            StoreError: the event or the table row was not written (see the module doc).
        """
        handoff_id = uuid.uuid4().hex
        payload = {  # validated by the log against HandoffEventPayload before anything is written
            "handoff_id": handoff_id,
            "from_agent": from_agent,
            "to_agent": to_agent,
            "artifact_id": artifact_id,
            "actor": actor,
        }
        async with self._lock(tree.session_key):
            event = await self._log.append(tree, EVENT_TYPES["offered"], payload)
            record = HandoffRecord(
                id=handoff_id,
                session_key=tree.session_key,
                from_agent=from_agent,
                to_agent=to_agent,
                artifact_id=artifact_id,
                status="offered",
                created_at=event.created_at,
                updated_at=event.created_at,
            )
            await self._write(record, event)
        return record

    async def accept(self, tree: SessionTree, handoff_id: str, *, actor: str) -> HandoffRecord:
        """Accept an offered handoff; its target agent may now be activated."""
        return await self._move(tree, handoff_id, "accepted", actor)

    async def reject(self, tree: SessionTree, handoff_id: str, *, actor: str) -> HandoffRecord:
        """Reject an offered handoff; it is final."""
        return await self._move(tree, handoff_id, "rejected", actor)

    async def complete(self, tree: SessionTree, handoff_id: str, *, actor: str) -> HandoffRecord:
        """Complete an accepted handoff; it is final and activates nothing any more."""
        return await self._move(tree, handoff_id, "completed", actor)

    # -- reading and repair ---------------------------------------------------------

    async def accepted(self) -> builtins.list[HandoffRecord]:
        """Every session's accepted handoffs (not yet completed), oldest offer first."""
        with store_errors("could not list accepted handoffs"):
            return await self._db.run(repository.list_with_status, "accepted")

    async def list(self, session_key: str) -> list[HandoffRecord]:
        """The session's handoffs from the table, oldest offer first."""
        with store_errors(f"could not read the handoffs of session {session_key!r}"):
            return await self._db.run(repository.list_for_session, session_key)

    async def rebuild_from_events(self, tree: SessionTree) -> builtins.list[HandoffRecord]:
        """Rewrite the session's table rows from its ``handoff.*`` events; returns them.

        Repairs a table that lags behind the log (a row write that failed or
        never happened after its event was appended).
        """
        key = tree.session_key
        async with self._lock(key):
            records = replay(key, tree.events)
            with store_errors(
                f"could not rebuild the handoffs of session {key!r}",
                leaves="the table is unchanged, try again",
            ):
                await self._db.run(repository.replace_session, key, records)
        return records

    # -- internals ----------------------------------------------------------------

    def _lock(self, session_key: str) -> asyncio.Lock:
        lock = self._locks.get(session_key)
        if lock is None:
            lock = self._locks[session_key] = asyncio.Lock()
        return lock

    async def _move(
        self, tree: SessionTree, handoff_id: str, status: HandoffStatus, actor: str
    ) -> HandoffRecord:
        async with self._lock(tree.session_key):
            current = movable(tree.session_key, tree.events, handoff_id, status)
            payload = HandoffEventPayload(
                handoff_id=handoff_id,
                from_agent=current.from_agent,
                to_agent=current.to_agent,
                artifact_id=current.artifact_id,
                actor=actor,
            )
            event = await self._log.append(tree, EVENT_TYPES[status], payload)
            record = current.moved(status, event.created_at)
            await self._write(record, event)
        return record

    async def _write(self, record: HandoffRecord, event: SessionEvent) -> None:
        """Write the row after its event; on failure say that the history has it."""
        with store_errors(
            f"the {event.type} event of handoff {record.id!r} is recorded in session "
            f"{record.session_key!r}, but the handoffs table was not updated",
            leaves="HandoffService.rebuild_from_events repairs it",
        ):
            await self._db.run(repository.upsert, record)
