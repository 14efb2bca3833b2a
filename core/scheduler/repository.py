"""The ``scheduled_jobs`` and ``scheduled_runs`` tables: units of work for ``Database.run``.

The claim is the heart: in one transaction, the jobs that are due (and this
process's) are read, locked on PostgreSQL (``FOR UPDATE SKIP LOCKED``: a
neighbour claiming at the same moment takes the others), each gets its run row
(keyed by job and due time, so a second insert finds it and does nothing) and
its next due time, and the run's lease is taken. Nothing is posted before
that commits, and a run is dispatched only by whoever inserted its row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    Integer,
    and_,
    cast,
    func,
    literal,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from core import leases
from core.bindings.records import ConversationRef
from core.errors import ThreadboundError
from core.scheduler.records import Job, Run, RunStatus, run_key
from core.sharding import ShardSet
from core.store.tables import ScheduledJobRow, ScheduledRunRow, table_of

__all__ = [
    "Claim",
    "JobLimit",
    "Planned",
    "abandoned_runs",
    "claim_due",
    "count_live_jobs",
    "finish_run",
    "get_job",
    "insert_job",
    "last_run",
    "list_jobs",
    "runs_of",
    "save_job",
    "working_runs",
]

_J = table_of(ScheduledJobRow)
_R = table_of(ScheduledRunRow)
_INSERTS: dict[str, Any] = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}
LIVE_STATES = ("active", "paused")


class JobLimit(ThreadboundError):
    """The owner has as many live jobs in this server as ``[scheduler] max_jobs_per_user``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"you already have {limit} scheduled jobs in this server, the most one person may "
            "have ([scheduler] max_jobs_per_user); remove one with /schedule remove first"
        )


# -- jobs ------------------------------------------------------------------------------


def _job_row(job: Job) -> dict[str, Any]:
    ref = job.conversation
    return {
        "job_id": job.job_id,
        "kind": job.kind,
        "scope": job.scope,
        "channel": ref.channel,
        "account_id": ref.account_id,
        "conversation_id": ref.conversation_id,
        "parent_conversation_id": ref.parent_conversation_id,
        "session_key": job.session_key,
        "owner_id": job.owner_id,
        "owner_name": (job.owner_name or "")[:200] or None,
        "name": job.name[:100],
        "spec": job.spec[:200],
        "timezone": job.timezone,
        "task": job.task,
        "agent": job.agent,
        "state": job.state,
        "paused_reason": job.paused_reason,
        "anchor_at": job.anchor_at,
        "next_run_at": job.next_run_at,
        "last_result": (job.last_result or "")[:300] or None,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
    }


def _job(row: Any) -> Job:
    return Job(
        job_id=row.job_id,
        kind=row.kind,
        scope=row.scope,
        conversation=ConversationRef(
            channel=row.channel,
            account_id=row.account_id,
            conversation_id=row.conversation_id,
            parent_conversation_id=row.parent_conversation_id,
        ),
        session_key=row.session_key,
        owner_id=row.owner_id,
        owner_name=row.owner_name,
        name=row.name,
        spec=row.spec,
        timezone=row.timezone,
        task=row.task,
        agent=row.agent,
        state=row.state,
        paused_reason=row.paused_reason,
        anchor_at=row.anchor_at,
        next_run_at=row.next_run_at,
        last_result=row.last_result,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def count_live_jobs(conn: Connection, scope: str | None, owner_id: str) -> int:
    """The owner's jobs in ``scope`` that still count against the limit (active, paused)."""
    query = select(func.count()).where(
        _scope_is(scope), _J.c.owner_id == owner_id, _J.c.state.in_(LIVE_STATES)
    )
    return int(conn.execute(query).scalar() or 0)


def insert_job(conn: Connection, job: Job, limit: int) -> None:
    """Save a new job unless its owner is at ``limit`` (counted in the same transaction,
    so two commands at once cannot both pass).

    Raises:
        JobLimit: nothing was saved.
    """
    if conn.dialect.name == "postgresql":  # two adds of one owner at once count one by one
        key = f"threadbound.schedule.{job.scope}.{job.owner_id}"
        conn.execute(select(func.pg_advisory_xact_lock(func.hashtext(key))))
    if count_live_jobs(conn, job.scope, job.owner_id) >= limit:
        raise JobLimit(limit)
    conn.execute(_J.insert().values(**_job_row(job)))


def save_job(conn: Connection, job: Job) -> None:
    """Write the job's whole row (its state, next run, last result)."""
    values = _job_row(job)
    del values["job_id"]
    conn.execute(update(_J).where(_J.c.job_id == job.job_id).values(**values))


def get_job(conn: Connection, job_id: str) -> Job | None:
    row = conn.execute(select(_J).where(_J.c.job_id == job_id)).first()
    return _job(row) if row is not None else None


def list_jobs(
    conn: Connection, scope: str | None, owner_id: str | None, *, account_id: str | None = None
) -> list[Job]:
    """Live jobs (active, paused) in ``scope``, oldest first: one owner's, or everyone's."""
    query = select(_J).where(_scope_is(scope), _J.c.state.in_(LIVE_STATES))
    if owner_id is not None:
        query = query.where(_J.c.owner_id == owner_id)
    if account_id is not None:
        query = query.where(_J.c.account_id == account_id)
    return [_job(row) for row in conn.execute(query.order_by(_J.c.created_at, _J.c.job_id))]


def _scope_is(scope: str | None) -> ColumnElement[bool]:
    return _J.c.scope.is_(None) if scope is None else _J.c.scope == scope


# -- runs ------------------------------------------------------------------------------


def _run(row: Any) -> Run:
    return Run(
        job_id=row.job_id,
        due_at=row.due_at,
        run_key=row.run_key,
        status=row.status,
        claimed_at=row.claimed_at,
        updated_at=row.updated_at,
        due_count=int(row.due_count),
        late=bool(row.late),
        session_key=row.session_key,
        detail=row.detail,
    )


def _run_row(run: Run) -> dict[str, Any]:
    return {
        "job_id": run.job_id,
        "due_at": run.due_at,
        "run_key": run.run_key,
        "status": run.status,
        "due_count": run.due_count,
        "late": run.late,
        "session_key": run.session_key,
        "detail": run.detail,
        "claimed_at": run.claimed_at,
        "updated_at": run.updated_at,
    }


def last_run(conn: Connection, job_id: str, *, before: datetime | None = None) -> Run | None:
    """The job's latest run (before ``before``, if given) that was started or claimed."""
    query = select(_R).where(
        _R.c.job_id == job_id, _R.c.status.in_(("claimed", "working", "finished", "failed"))
    )
    if before is not None:
        query = query.where(_R.c.due_at < before)
    row = conn.execute(query.order_by(_R.c.due_at.desc()).limit(1)).first()
    return _run(row) if row is not None else None


def runs_of(conn: Connection, job_id: str) -> list[Run]:
    """Every run row of the job, oldest first (tests, the canary's counts)."""
    rows = conn.execute(select(_R).where(_R.c.job_id == job_id).order_by(_R.c.due_at))
    return [_run(row) for row in rows]


def working_runs(conn: Connection) -> list[Run]:
    """Runs started (their turn or subagent may still work), oldest first."""
    rows = conn.execute(select(_R).where(_R.c.status == "working").order_by(_R.c.due_at))
    return [_run(row) for row in rows]


def abandoned_runs(conn: Connection, owner: str, now: datetime) -> list[Run]:
    """Runs claimed by a process that is gone (no live lease on them, and not ours):
    claimed, never dispatched to the end. Their successor finishes them once."""
    gone = leases.abandoned("schedule", _R.c.run_key, owner=owner, now=now)
    rows = conn.execute(select(_R).where(_R.c.status == "claimed", gone).order_by(_R.c.due_at))
    return [_run(row) for row in rows]


def finish_run(
    conn: Connection,
    run: Run,
    status: RunStatus,
    now: datetime,
    *,
    owner: str,
    detail: str | None = None,
    session_key: str | None = None,
    result: str | None = None,
) -> None:
    """Move the run on (and the job's last result with it); its claim's lease is given back."""
    values: dict[str, Any] = {"status": status, "updated_at": now}
    if detail is not None:
        values["detail"] = detail
    if session_key is not None:
        values["session_key"] = session_key
    conn.execute(
        update(_R).where(_R.c.job_id == run.job_id, _R.c.due_at == run.due_at).values(**values)
    )
    if result is not None:
        conn.execute(
            update(_J)
            .where(_J.c.job_id == run.job_id)
            .values(last_result=result[:300], updated_at=now)
        )
    if status != "claimed":
        leases.release(conn, "schedule", run.run_key, owner)


# -- the claim -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Planned:
    """What the caller decided for one due job: the run to record (its due time, how many
    due times it folds, ``missed`` when past the grace) and the job's next due time."""

    due_at: datetime
    due_count: int
    missed: bool
    late: bool
    next_run_at: datetime | None
    skip: str | None = None
    """Recorded as skipped with this reason (the scheduler is off there)."""


@dataclass(frozen=True, slots=True)
class Claim:
    """A run this process inserted, and the job as it was when claimed."""

    job: Job
    run: Run


def _shard_filter(shards: ShardSet) -> ColumnElement[bool]:
    """This process's jobs, by their guild (Discord's shard formula, in SQL)."""
    if shards.everything:
        return true()
    ids = sorted(shards.ids)
    guild = cast(_J.c.scope, BigInteger)
    ours = ((guild.op(">>")(literal(22, Integer))) % shards.count).in_(ids)
    if 0 in ids:  # a job in no guild is shard 0's
        return or_(_J.c.scope.is_(None), and_(_J.c.scope.is_not(None), ours))
    return and_(_J.c.scope.is_not(None), ours)


def claim_due(
    conn: Connection,
    now: datetime,
    plan: Callable[[Job], Planned],
    *,
    owner: str,
    lease_until: datetime,
    shards: ShardSet,
    limit: int = 100,
) -> list[Claim]:
    """Claim up to ``limit`` due jobs' runs, in this one transaction.

    ``plan`` says, per job, which run to record and when it is due next. A run
    is claimed (``claimed``, under a lease of ``owner``), recorded ``missed``
    or ``skipped``; only claimed runs come back, for the caller to dispatch.
    A run whose row exists already (another process was first) is left alone,
    and so is its job.
    """
    query = (
        select(_J)
        .where(_J.c.state == "active", _J.c.next_run_at <= now, _shard_filter(shards))
        .order_by(_J.c.next_run_at)
        .limit(limit)
    )
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    claimed: list[Claim] = []
    insert = _INSERTS[conn.dialect.name]
    for row in conn.execute(query).all():
        job = _job(row)
        planned = plan(job)
        status: RunStatus = "claimed"
        detail = None
        if planned.missed:
            status, detail = "missed", "the bot was offline past the grace period"
        elif planned.skip is not None:
            status, detail = "skipped", planned.skip
        run = Run(
            job_id=job.job_id,
            due_at=planned.due_at,
            run_key=run_key(job.job_id, planned.due_at),
            status=status,
            claimed_at=now,
            updated_at=now,
            due_count=planned.due_count,
            late=planned.late,
            detail=detail,
        )
        inserted = conn.execute(
            insert(_R).values(**_run_row(run)).on_conflict_do_nothing()
        ).rowcount
        state = job.state if planned.next_run_at is not None else "done"
        values: dict[str, Any] = {
            "next_run_at": planned.next_run_at,
            "state": state,
            "updated_at": now,
        }
        if status != "claimed":
            values["last_result"] = f"{status}: {detail}"[:300]
        conn.execute(update(_J).where(_J.c.job_id == job.job_id).values(**values))
        if inserted != 1:
            continue
        if status == "claimed":
            holder = leases.take(
                conn, "schedule", run.run_key, owner=owner, now=now, until=lease_until
            )
            if holder is not None:  # cannot be: the row is new; never start without it
                continue
        claimed.append(Claim(job.moved(state, now, next_run_at=planned.next_run_at), run))
    return claimed
