"""The ``subagents`` and ``completion_deliveries`` tables: units of work for ``Database.run``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite

from core import leases
from core.store.tables import CompletionDeliveryRow, SubagentRow, table_of
from core.subagents.records import Outcome, SubagentRecord

__all__ = [
    "PendingCompletion",
    "claim",
    "complete",
    "delete_subagent",
    "delivery_statuses",
    "get_subagent",
    "insert_completion",
    "list_subagents",
    "mark_delivered",
    "recover_pending",
    "release",
    "states_of",
    "upsert_subagent",
]

_S = table_of(SubagentRow)
_D = table_of(CompletionDeliveryRow)


@dataclass(frozen=True, slots=True)
class PendingCompletion:
    """An outbox row not delivered yet, as read (or just claimed)."""

    completion_id: str
    session_key: str
    outcome: Outcome
    result: str
    status: str
    attempts: int
    created_at: datetime
    uncertain: bool = False
    """Claimed from a process that died mid-post: look before posting again."""

    @classmethod
    def of(cls, row: Any, **changes: Any) -> PendingCompletion:
        data = {name: getattr(row, name) for name in _PENDING_FIELDS}
        return cls(**{**data, **changes})


_PENDING_FIELDS = (
    "completion_id",
    "session_key",
    "outcome",
    "result",
    "status",
    "attempts",
    "created_at",
)


# Statements a subagent's life runs are built once, at import: building one per call
# (SQLAlchemy's coercions) cost more Python than SQLite spends running it.


def _upsert_statement(insert: Any) -> Any:
    """The whole row, inserted or overwritten in place: one statement per state change."""
    statement = insert(_S)
    return statement.on_conflict_do_update(
        index_elements=[_S.c.session_key],
        set_={c.name: statement.excluded[c.name] for c in _S.c if c.name != "session_key"},
    )


def _insert_completion_statement(insert: Any) -> Any:
    """A new outbox row, or nothing (and no row back) when the id was recorded before."""
    return (
        insert(_D)
        .on_conflict_do_nothing(index_elements=[_D.c.completion_id])
        .returning(_D.c.completion_id)
    )


_UPSERT = {
    "sqlite": _upsert_statement(sqlite.insert),
    "postgresql": _upsert_statement(postgresql.insert),
}
_INSERT_COMPLETION = {
    "sqlite": _insert_completion_statement(sqlite.insert),
    "postgresql": _insert_completion_statement(postgresql.insert),
}
_DELETE = delete(_S).where(_S.c.session_key == bindparam("key"))
_GET = select(_S).where(_S.c.session_key == bindparam("key"))
_PENDING = select(_D).where(_D.c.completion_id == bindparam("cid"))
_MOVE_TO_SENDING = (
    update(_D)
    .where(_D.c.completion_id == bindparam("cid"), _D.c.status == bindparam("from_status"))
    .values(status="sending", attempts=_D.c.attempts + 1)
)
_MARK_DELIVERED = (
    update(_D)
    .where(_D.c.completion_id == bindparam("cid"))
    .values(
        status="delivered",
        mode=bindparam("mode"),
        reason=bindparam("reason"),
        destination=bindparam("destination"),
        message_id=bindparam("message_id"),
        delivered_at=bindparam("at", type_=_D.c.delivered_at.type),
    )
)
_SET_STATUS = (
    update(_D).where(_D.c.completion_id == bindparam("cid")).values(status=bindparam("status"))
)


def _row_values(record: SubagentRecord) -> dict[str, Any]:
    values = record.model_dump(mode="python")
    values["requester"] = record.requester.model_dump() if record.requester else None
    return values


def upsert_subagent(conn: Connection, record: SubagentRecord) -> None:
    """Write ``record``'s row as it is now: inserted at the spawn, updated in place at
    each state change (not deleted and inserted again)."""
    conn.execute(_UPSERT[conn.dialect.name], _row_values(record))


def delete_subagent(conn: Connection, session_key: str) -> None:
    conn.execute(_DELETE, {"key": session_key})


def _record(row: Any) -> SubagentRecord:
    return SubagentRecord.model_validate(dict(row._mapping))


def get_subagent(conn: Connection, session_key: str) -> SubagentRecord | None:
    row = conn.execute(_GET, {"key": session_key}).first()
    return _record(row) if row is not None else None


def states_of(conn: Connection, session_keys: list[str]) -> dict[str, str]:
    """The state of each of ``session_keys`` that has a row, in one query."""
    rows = conn.execute(
        select(_S.c.session_key, _S.c.state).where(_S.c.session_key.in_(session_keys))
    )
    return {str(key): str(state) for key, state in rows}


def list_subagents(
    conn: Connection, states: tuple[str, ...] = (), *, replies: bool = False
) -> list[SubagentRecord]:
    """The subagents (in ``states``, if any), oldest first; with ``replies``, the replies
    too (the spawns while threads are off, which no listing shows)."""
    query = select(_S).order_by(_S.c.created_at, _S.c.session_key)
    if states:
        query = query.where(_S.c.state.in_(states))
    if not replies:
        query = query.where(_S.c.reply.is_(False))
    return [_record(row) for row in conn.execute(query)]


def insert_completion(
    conn: Connection,
    *,
    completion_id: str,
    session_key: str,
    outcome: str,
    result: str,
    at: datetime,
    owner: str,
    until: datetime,
) -> bool:
    """Record a completion to deliver, under ``owner``'s lease; False when this
    completion id was recorded before."""
    return _insert_completion(
        conn, completion_id, session_key, outcome, result, "pending", at, owner, until
    )


def _insert_completion(
    conn: Connection,
    completion_id: str,
    session_key: str,
    outcome: str,
    result: str,
    status: str,
    at: datetime,
    owner: str,
    until: datetime,
) -> bool:
    row = {
        "completion_id": completion_id,
        "session_key": session_key,
        "outcome": outcome,
        "result": result,
        "status": status,
        "attempts": 1 if status == "sending" else 0,
        "created_at": at,
    }
    if conn.execute(_INSERT_COMPLETION[conn.dialect.name], row).first() is None:
        return False
    leases.take(conn, "completion", completion_id, owner=owner, now=at, until=until)
    return True


def complete(
    conn: Connection,
    record: SubagentRecord,
    *,
    completion_id: str,
    outcome: Outcome,
    result: str,
    at: datetime,
    owner: str,
    until: datetime,
) -> PendingCompletion | None:
    """A task's end in one transaction: ``record`` (moved to its outcome) saved, and its
    completion recorded and claimed for posting under ``owner``'s lease. Returns the
    claimed row; None when the completion was recorded before (a watcher resumed after
    a restart): then the row is claimed as any other, by :func:`claim`.

    Recorded already ``sending``, the completion is exactly as safe as one recorded and
    then claimed: a crash before the post is marked leaves a ``sending`` row under a
    lease that lapses, which the successor makes ``uncertain`` and looks for in the
    destination before posting (see :func:`recover_pending`).
    """
    upsert_subagent(conn, record)
    fresh = _insert_completion(
        conn, completion_id, record.session_key, outcome, result, "sending", at, owner, until
    )
    if not fresh:
        return None
    return PendingCompletion(completion_id, record.session_key, outcome, result, "sending", 1, at)


def claim(
    conn: Connection, completion_id: str, *, owner: str, now: datetime, until: datetime
) -> PendingCompletion | None:
    """Move a ``pending`` or ``uncertain`` completion to ``sending`` under ``owner``'s
    lease; only the caller that wins gets its row, with ``uncertain`` telling whether it
    may be posted already. Another process's live lease means it is theirs: None."""
    row = conn.execute(_PENDING, {"cid": completion_id}).first()
    if row is None or row.status not in ("pending", "uncertain"):
        return None
    if leases.take(conn, "completion", completion_id, owner=owner, now=now, until=until):
        return None
    moved = conn.execute(_MOVE_TO_SENDING, {"cid": completion_id, "from_status": row.status})
    if moved.rowcount != 1:
        return None
    return PendingCompletion.of(
        row, uncertain=row.status == "uncertain", attempts=row.attempts + 1, status="sending"
    )


def mark_delivered(
    conn: Connection,
    completion_id: str,
    mode: str,
    reason: str,
    destination: str,
    message_id: str | None,
    at: datetime,
    owner: str,
) -> None:
    leases.release(conn, "completion", completion_id, owner=owner)
    conn.execute(
        _MARK_DELIVERED,
        {
            "cid": completion_id,
            "mode": mode,
            "reason": reason,
            "destination": destination,
            "message_id": message_id,
            "at": at,
        },
    )


def release(conn: Connection, completion_id: str, give_up: bool, *, owner: str) -> None:
    """A failed attempt: back to ``pending`` for a retry (still under our lease: the
    retry is ours), or ``failed`` for good."""
    if give_up:
        leases.release(conn, "completion", completion_id, owner=owner)
    conn.execute(_SET_STATUS, {"cid": completion_id, "status": "failed" if give_up else "pending"})


def recover_pending(conn: Connection, *, owner: str, now: datetime) -> list[PendingCompletion]:
    """Completions no live process is delivering: at start-up, and when leases expire.

    A row no process holds a live lease on was left by a process that died
    (or stopped). Left ``sending``, its post may have reached the channel: it
    becomes ``uncertain``, and whoever claims it looks in the destination
    before posting. Rows under a live lease (ours, or a running neighbour's)
    are left as they are.
    """
    orphaned = leases.abandoned("completion", _D.c.completion_id, owner=owner, now=now)
    conn.execute(update(_D).where(_D.c.status == "sending", orphaned).values(status="uncertain"))
    rows = conn.execute(
        select(_D)
        .where(_D.c.status.in_(("pending", "uncertain")), orphaned)
        .order_by(_D.c.created_at, _D.c.completion_id)
    )
    return [PendingCompletion.of(row) for row in rows]


def delivery_statuses(conn: Connection) -> dict[str, str]:
    """Every completion id and its status (a read for reports and tests)."""
    return {row[0]: row[1] for row in conn.execute(select(_D.c.completion_id, _D.c.status))}
