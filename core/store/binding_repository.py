"""Reads and writes of the ``bindings`` table, turning rows into frozen records."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from core.bindings.records import ConversationRef, SessionBindingRecord
from core.store.tables import BindingRow

__all__ = ["BindingRepository"]

_T = BindingRow.__table__  # type: ignore[attr-defined]
_LIVE = _T.c.status != "ended"
_COLUMNS = (
    _T.c.binding_id,
    _T.c.target_session_key,
    _T.c.target_kind,
    _T.c.channel,
    _T.c.account_id,
    _T.c.conversation_id,
    _T.c.parent_conversation_id,
    _T.c.status,
    _T.c.bound_at,
    _T.c.expires_at,
    _T.c.metadata,
    _T.c.bound_by,
    _T.c.last_activity_at,
    _T.c.idle_timeout_ms,
    _T.c.max_age_ms,
)


def _record(row: Any) -> SessionBindingRecord:
    # Rows come from our own validated writes; model_construct skips a second
    # validation, which is what keeps a 100,000-binding start-up under a second.
    conversation = ConversationRef.model_construct(
        channel=row[3],
        account_id=row[4],
        conversation_id=row[5],
        parent_conversation_id=row[6],
    )
    return SessionBindingRecord.model_construct(
        binding_id=row[0],
        target_session_key=row[1],
        target_kind=row[2],
        conversation=conversation,
        status=row[7],
        bound_at=row[8],
        expires_at=row[9],
        metadata=row[10] or {},
        bound_by=row[11],
        last_activity_at=row[12],
        idle_timeout_ms=row[13],
        max_age_ms=row[14],
    )


def _guild_id(metadata: Mapping[str, Any]) -> int | None:
    value = metadata.get("guild_id")
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


class BindingRepository:
    """Queries only; the caller's transaction decides when they commit."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def insert(self, record: SessionBindingRecord) -> None:
        conv = record.conversation
        await self._session.execute(
            _T.insert().values(
                binding_id=record.binding_id,
                target_session_key=record.target_session_key,
                target_kind=record.target_kind,
                channel=conv.channel,
                account_id=conv.account_id,
                conversation_id=conv.conversation_id,
                parent_conversation_id=conv.parent_conversation_id,
                guild_id=_guild_id(record.metadata),
                status=record.status,
                bound_at=record.bound_at,
                expires_at=record.expires_at,
                last_activity_at=record.last_activity_at,
                idle_timeout_ms=record.idle_timeout_ms,
                max_age_ms=record.max_age_ms,
                bound_by=record.bound_by,
                metadata=record.metadata,
            )
        )

    async def end(
        self,
        binding_id: str,
        *,
        at: datetime,
        reason: str,
        last_activity_at: datetime | None,
        idle_before: datetime | None = None,
    ) -> bool:
        """Mark a live binding ended; False if it was not live (or, with
        ``idle_before``, if it saw activity at or after that instant)."""
        condition = and_(_T.c.binding_id == binding_id, _LIVE)
        if idle_before is not None:
            condition = and_(
                condition,
                or_(_T.c.last_activity_at.is_(None), _T.c.last_activity_at < idle_before),
            )
        values: dict[str, Any] = {"status": "ended", "ended_at": at, "end_reason": reason}
        if last_activity_at is not None:
            values["last_activity_at"] = last_activity_at
        result = await self._session.execute(update(_T).where(condition).values(**values))
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def touch_many(self, touches: Mapping[str, datetime]) -> None:
        """Write activity times; a time never moves backwards."""
        if not touches:
            return
        stmt = (
            update(_T)
            .where(_T.c.binding_id == bindparam("b_id"), _LIVE)
            .where(or_(_T.c.last_activity_at.is_(None), _T.c.last_activity_at < bindparam("at")))
            .values(last_activity_at=bindparam("at"))
        )
        params = [{"b_id": b, "at": at} for b, at in touches.items()]
        await self._session.execute(stmt, params)

    async def load_live(self) -> list[SessionBindingRecord]:
        result = await self._session.execute(select(*_COLUMNS).where(_LIVE))
        return [_record(row) for row in result.all()]

    async def get(self, binding_id: str) -> SessionBindingRecord | None:
        result = await self._session.execute(select(*_COLUMNS).where(_T.c.binding_id == binding_id))
        row = result.first()
        return _record(row) if row else None

    async def history(
        self, target_session_key: str
    ) -> list[tuple[SessionBindingRecord, str | None]]:
        """Every binding the session ever had, oldest first, with its end reason."""
        result = await self._session.execute(
            select(*_COLUMNS, _T.c.end_reason)
            .where(_T.c.target_session_key == target_session_key)
            .order_by(_T.c.bound_at)
        )
        return [(_record(row), row[-1]) for row in result.all()]
