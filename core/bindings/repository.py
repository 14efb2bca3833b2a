"""Reads and writes of the ``bindings`` table, turning rows into frozen records.

Synchronous on purpose: :meth:`core.store.database.Database.run` executes
these inside one transaction, on the SQLite thread or through the async engine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import Connection, String, bindparam, func, or_, select, type_coerce, update

from core.bindings.records import SessionBindingRecord
from core.store.changes import announce
from core.store.tables import BindingRow, table_of
from core.store.types import UTCDateTime

__all__ = ["BindingRepository"]

_T = table_of(BindingRow)
_LIVE = _T.c.status != "ended"
_RAW_COLUMNS = ("bound_at", "expires_at", "last_activity_at", "metadata")
# Timestamps and metadata are read as the driver returns them and parsed below:
# SQLAlchemy's per-value processors cost more than the rest of a 100,000-row
# start-up together, while pydantic-core's parser and a "{}" shortcut are cheap.
_COLUMNS = tuple(
    type_coerce(column, String).label(column.name) if column.name in _RAW_COLUMNS else column
    for column in (
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
        _T.c.scope,
    )
)


# Statements are built once: building ``.values(...)`` per call costs more
# than the INSERT itself on SQLite.
_INSERT = _T.insert()
_END = (
    update(_T)
    .where(_T.c.binding_id == bindparam("b_id"), _LIVE)
    .values(
        status="ended",
        ended_at=bindparam("at"),
        end_reason=bindparam("reason"),
        last_activity_at=func.coalesce(
            bindparam("last", type_=UTCDateTime()), _T.c.last_activity_at
        ),
    )
)
_END_IF_IDLE = _END.where(
    or_(_T.c.last_activity_at.is_(None), _T.c.last_activity_at < bindparam("idle_before"))
)
_TOUCH = (
    update(_T)
    .where(_T.c.binding_id == bindparam("b_id"), _LIVE)
    .where(or_(_T.c.last_activity_at.is_(None), _T.c.last_activity_at < bindparam("at")))
    .values(last_activity_at=bindparam("at"))
)
_SET_LIFETIME = (
    update(_T)
    .where(_T.c.binding_id == bindparam("b_id"), _LIVE)
    .values(
        idle_timeout_ms=bindparam("idle"),
        max_age_ms=bindparam("max_age"),
        expires_at=bindparam("expires", type_=UTCDateTime()),
    )
)


_SET_METADATA = (
    update(_T).where(_T.c.binding_id == bindparam("b_id"), _LIVE).values(metadata=bindparam("m"))
)


def _timestamp(value: Any) -> Any:
    # SQLite keeps UTC as naive text; the "Z" lets pydantic-core parse it as
    # aware UTC. PostgreSQL's timestamptz arrives as an aware datetime already.
    return value + "Z" if isinstance(value, str) else value


def _metadata(value: Any) -> Any:
    if value is None or value == "{}":
        return {}
    return json.loads(value) if isinstance(value, str) else value


def _fields(row: Any) -> dict[str, Any]:
    return {
        "binding_id": row[0],
        "target_session_key": row[1],
        "target_kind": row[2],
        "conversation": {
            "channel": row[3],
            "account_id": row[4],
            "conversation_id": row[5],
            "parent_conversation_id": row[6],
        },
        "status": row[7],
        "bound_at": _timestamp(row[8]),
        "expires_at": _timestamp(row[9]),
        "metadata": _metadata(row[10]),
        "bound_by": row[11],
        "last_activity_at": _timestamp(row[12]),
        "idle_timeout_ms": row[13],
        "max_age_ms": row[14],
        "scope": row[15],
    }


def _record(row: Any) -> SessionBindingRecord:
    return SessionBindingRecord.model_validate(_fields(row))


# Validating the whole list in one pydantic-core call skips a Python-level
# __init__ per record: a third off a 100,000-binding start-up.
_RECORDS = TypeAdapter(list[SessionBindingRecord])


class BindingRepository:
    """Queries only; the unit of work around them decides when they commit."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def insert(self, record: SessionBindingRecord) -> None:
        conv = record.conversation
        self._conn.execute(
            _INSERT,
            {
                "binding_id": record.binding_id,
                "target_session_key": record.target_session_key,
                "target_kind": record.target_kind,
                "channel": conv.channel,
                "account_id": conv.account_id,
                "conversation_id": conv.conversation_id,
                "parent_conversation_id": conv.parent_conversation_id,
                "scope": record.scope,
                "status": record.status,
                "bound_at": record.bound_at,
                "expires_at": record.expires_at,
                "last_activity_at": record.last_activity_at,
                "idle_timeout_ms": record.idle_timeout_ms,
                "max_age_ms": record.max_age_ms,
                "bound_by": record.bound_by,
                "metadata": record.metadata,
            },
        )
        announce(self._conn, "binding", id=record.binding_id)

    def end(
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
        params = {"b_id": binding_id, "at": at, "reason": reason, "last": last_activity_at}
        if idle_before is None:
            result = self._conn.execute(_END, params)
        else:
            result = self._conn.execute(_END_IF_IDLE, params | {"idle_before": idle_before})
        return self._changed(binding_id, result.rowcount)

    def set_metadata(self, binding_id: str, metadata: dict[str, Any]) -> bool:
        """Replace a live binding's metadata; False if it was not live."""
        result = self._conn.execute(_SET_METADATA, {"b_id": binding_id, "m": metadata})
        return self._changed(binding_id, result.rowcount)

    def set_lifetime(
        self,
        binding_id: str,
        *,
        idle_timeout_ms: int,
        max_age_ms: int,
        expires_at: datetime | None,
    ) -> bool:
        """Write a live binding's idle and max-age windows; False if it was not live."""
        result = self._conn.execute(
            _SET_LIFETIME,
            {
                "b_id": binding_id,
                "idle": idle_timeout_ms,
                "max_age": max_age_ms,
                "expires": expires_at,
            },
        )
        return self._changed(binding_id, result.rowcount)

    def _changed(self, binding_id: str, rowcount: int) -> bool:
        """Tell the other processes (on commit) when a write changed the binding.
        Touches are not told: only the process that owns its guild sweeps it."""
        if rowcount:
            announce(self._conn, "binding", id=binding_id)
        return bool(rowcount)

    def touch_many(self, touches: Mapping[str, datetime]) -> None:
        """Write activity times, one statement for all; a time never moves backwards."""
        if not touches:
            return
        self._conn.execute(_TOUCH, [{"b_id": b, "at": at} for b, at in touches.items()])

    def load_live(self) -> list[SessionBindingRecord]:
        rows = self._conn.execute(select(*_COLUMNS).where(_LIVE)).all()
        return _RECORDS.validate_python([_fields(row) for row in rows])

    def get(self, binding_id: str) -> SessionBindingRecord | None:
        row = self._conn.execute(select(*_COLUMNS).where(_T.c.binding_id == binding_id)).first()
        return _record(row) if row else None
