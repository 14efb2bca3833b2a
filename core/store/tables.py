"""SQLModel tables. The only module that knows the database's shape.

No ``from __future__ import annotations`` here: sqlmodel reads the annotations
at class creation (fastapi/sqlmodel#196).

Tables are created by the versioned migrations in ``migrations.py``, never by
``metadata.create_all`` on start-up, so the schema version always says what
the database holds.
"""

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlmodel import Field, SQLModel

from core.store.types import UTCDateTime

__all__ = [
    "AcpProcessRow",
    "BindingRow",
    "CompletionDeliveryRow",
    "ConfigOverrideRow",
    "HandoffRow",
    "InboxCursorRow",
    "InboxRow",
    "LeaseRow",
    "ScheduledJobRow",
    "ScheduledRunRow",
    "SchemaVersionRow",
    "SessionBranchRow",
    "SessionEventRow",
    "SessionHeadRow",
    "SubagentRow",
    "ThreadMessageRow",
    "metadata",
]

metadata: MetaData = SQLModel.metadata
metadata.naming_convention = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class SchemaVersionRow(SQLModel, table=True):
    """One row per applied migration; the highest version is the schema's version."""

    __tablename__ = "schema_version"

    version: int = Field(primary_key=True)
    description: str = Field(sa_column=Column(String(200), nullable=False))
    applied_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class BindingRow(SQLModel, table=True):
    """A session binding, live or ended. Ended rows are kept as history.

    The partial unique index is what makes "one live binding per conversation"
    true across processes: two binders racing on PostgreSQL cannot both commit.
    """

    __tablename__ = "bindings"
    __table_args__ = (
        Index(
            "uq_bindings_live_conversation",
            "channel",
            "account_id",
            "conversation_id",
            unique=True,
            sqlite_where=text("status != 'ended'"),
            postgresql_where=text("status != 'ended'"),
        ),
        Index("ix_bindings_live_session", "target_session_key", "status"),
    )

    binding_id: str = Field(sa_column=Column(String(64), primary_key=True))
    target_session_key: str = Field(sa_column=Column(String(300), nullable=False))
    target_kind: str = Field(sa_column=Column(String(16), nullable=False))
    channel: str = Field(sa_column=Column(String(32), nullable=False))
    account_id: str = Field(sa_column=Column(String(64), nullable=False))
    conversation_id: str = Field(sa_column=Column(String(64), nullable=False))
    parent_conversation_id: str | None = Field(
        default=None, sa_column=Column(String(64), nullable=True)
    )
    scope: str | None = Field(default=None, sa_column=Column(String(64), nullable=True))
    """Where the conversation is, for the flags and the shards: a Discord guild id, as text."""
    status: str = Field(sa_column=Column(String(8), nullable=False))
    bound_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    expires_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime()))
    last_activity_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime()))
    idle_timeout_ms: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    max_age_ms: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    bound_by: str | None = Field(default=None, sa_column=Column(String(64), nullable=True))
    metadata_: dict[str, Any] = Field(
        default_factory=dict, sa_column=Column("metadata", JSON, nullable=False)
    )
    ended_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime()))
    end_reason: str | None = Field(default=None, sa_column=Column(String(64), nullable=True))


class SessionEventRow(SQLModel, table=True):
    """One event of a session's append-only log; never updated, never deleted.

    The primary key (session_key, seq) is what makes a lost race visible: two
    writers that both think they append seq N cannot both commit.
    """

    __tablename__ = "session_events"
    __table_args__ = (UniqueConstraint("node_id"),)

    session_key: str = Field(sa_column=Column(String(300), primary_key=True))
    seq: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    node_id: str = Field(sa_column=Column(String(32), nullable=False))
    parent_id: str | None = Field(default=None, sa_column=Column(String(32), nullable=True))
    kind: str = Field(sa_column=Column(String(16), nullable=False))
    type: str = Field(sa_column=Column(String(100), nullable=False))
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    delivery_mode: str | None = Field(default=None, sa_column=Column(String(16), nullable=True))
    created_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    envelope: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    """The event as JSON text up to its payload (``{"session_key":...,"payload":``),
    written with the row: a load reads ``envelope || payload || '}'`` instead of
    building every event's JSON in the query, which was most of a long session's
    query. NULL in rows written before schema version 9 (or by a process of an
    earlier version still running): those are built as before."""


class SessionHeadRow(SQLModel, table=True):
    """Projection: where each session stands, written with the events that move it.

    Lets a tool list sessions and their heads without replaying logs; a load
    checks it against the replay and trusts the events when they disagree.
    """

    __tablename__ = "session_heads"

    session_key: str = Field(sa_column=Column(String(300), primary_key=True))
    active_branch_id: str = Field(sa_column=Column(String(64), nullable=False))
    head_node_id: str | None = Field(default=None, sa_column=Column(String(32), nullable=True))
    last_seq: int = Field(sa_column=Column(BigInteger, nullable=False))
    updated_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class SessionBranchRow(SQLModel, table=True):
    """Projection: every branch of every session, with the head each was left at.

    The active branch's row is not rewritten at each append (that would be one
    more upsert per event): its current head is ``session_heads.head_node_id``,
    and its row is brought up to date when the session moves to another branch.
    """

    __tablename__ = "session_branches"

    session_key: str = Field(sa_column=Column(String(300), primary_key=True))
    branch_id: str = Field(sa_column=Column(String(64), primary_key=True))
    head_node_id: str | None = Field(default=None, sa_column=Column(String(32), nullable=True))


class ConfigOverrideRow(SQLModel, table=True):
    """A runtime flag override set by an admin, per scope (a Discord guild id, say).

    The current value only; who changed what and when is in the
    ``config.changed`` log events, which the canary and audits read.
    """

    __tablename__ = "config_overrides"

    scope: str = Field(sa_column=Column(String(64), primary_key=True))
    path: str = Field(sa_column=Column(String(200), primary_key=True))
    value: Any = Field(sa_column=Column(JSON, nullable=False))
    updated_by: str = Field(sa_column=Column(String(64), nullable=False))
    updated_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class HandoffRow(SQLModel, table=True):
    """The current state of one handoff between two agents of a session.

    Only the current state: the ``handoff.<status>`` session events are the
    history and the source of truth, and these rows can be rebuilt from them
    (:meth:`core.handoffs.HandoffService.rebuild_from_events`).
    """

    __tablename__ = "handoffs"
    __table_args__ = (Index("ix_handoffs_session_key", "session_key"),)

    id: str = Field(sa_column=Column(String(32), primary_key=True))
    session_key: str = Field(sa_column=Column(String(300), nullable=False))
    from_agent: str = Field(sa_column=Column(String(100), nullable=False))
    to_agent: str = Field(sa_column=Column(String(100), nullable=False))
    artifact_id: str | None = Field(default=None, sa_column=Column(String(64), nullable=True))
    status: str = Field(sa_column=Column(String(16), nullable=False))
    created_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    updated_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class SubagentRow(SQLModel, table=True):
    """One spawned subagent: who asked, where, which agent, and where it stands now.

    The ``subagent.*`` session events are its history; this row is what
    ``/agents list`` and the restart recovery read without replaying logs.
    """

    __tablename__ = "subagents"
    __table_args__ = (Index("ix_subagents_state", "state"),)

    session_key: str = Field(sa_column=Column(String(300), primary_key=True))
    parent_session_key: str | None = Field(
        default=None, sa_column=Column(String(300), nullable=True)
    )
    agent: str | None = Field(default=None, sa_column=Column(String(100), nullable=True))
    mode: str = Field(sa_column=Column(String(16), nullable=False))
    thread: bool = Field(sa_column=Column(Boolean, nullable=False))
    reply: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    """Its answer alone is posted where it was asked (a spawn while threads are off)."""
    requester: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    requested_by: str | None = Field(default=None, sa_column=Column(String(64), nullable=True))
    scope: str | None = Field(default=None, sa_column=Column(String(64), nullable=True))
    task: str = Field(sa_column=Column(Text, nullable=False))
    state: str = Field(sa_column=Column(String(16), nullable=False))
    binding_id: str | None = Field(default=None, sa_column=Column(String(64), nullable=True))
    outcome_reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    tokens: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    cost_usd: float = Field(default=0.0, sa_column=Column(Float, nullable=False))
    created_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    updated_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class CompletionDeliveryRow(SQLModel, table=True):
    """The outbox of completion announcements: one row per completion id, ever.

    The primary key is the idempotency record: a retried, duplicated or
    recovered completion cannot insert a second row, and only the caller that
    moves a row from ``pending`` to ``sending`` posts it.
    """

    __tablename__ = "completion_deliveries"
    __table_args__ = (Index("ix_completion_deliveries_status", "status"),)

    completion_id: str = Field(sa_column=Column(String(100), primary_key=True))
    session_key: str = Field(sa_column=Column(String(300), nullable=False))
    outcome: str = Field(sa_column=Column(String(16), nullable=False))
    result: str = Field(sa_column=Column(Text, nullable=False))
    status: str = Field(sa_column=Column(String(16), nullable=False))
    attempts: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    mode: str | None = Field(default=None, sa_column=Column(String(16), nullable=True))
    reason: str | None = Field(default=None, sa_column=Column(String(64), nullable=True))
    destination: str | None = Field(default=None, sa_column=Column(String(64), nullable=True))
    message_id: str | None = Field(default=None, sa_column=Column(String(64), nullable=True))
    created_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    delivered_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )


class LeaseRow(SQLModel, table=True):
    """Work one bot process has taken, and until when it is that process's.

    ``kind`` says what ``key`` names (``completion``: an outbox row being
    delivered; ``session``: a session whose agent runs in that process). The
    owner renews its leases while it lives; once ``expires_at`` is past,
    another process may take the work over. See :mod:`core.leases`.
    """

    __tablename__ = "leases"
    __table_args__ = (Index("ix_leases_owner", "owner"),)

    kind: str = Field(sa_column=Column(String(16), primary_key=True))
    key: str = Field(sa_column=Column(String(300), primary_key=True))
    owner: str = Field(sa_column=Column(String(100), nullable=False))
    expires_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class AcpProcessRow(SQLModel, table=True):
    """An external agent's process group a bot process started and has not stopped yet.

    ``owner`` is that bot process (its lease owner id); ``machine`` the pid space the
    group lives in (this boot of this kernel, this pid namespace), ``pid`` its leader
    and ``started`` the leader's start time (clock ticks since boot), which tell the
    leader from a later process given the same pid. A process killed with ``kill -9``
    leaves its rows; the next process on that machine that can prove the owner dead
    stops the groups still led by the recorded process (:mod:`core.acp.groups`).
    """

    __tablename__ = "acp_processes"
    __table_args__ = (Index("ix_acp_processes_machine", "machine"),)

    owner: str = Field(sa_column=Column(String(100), primary_key=True))
    pid: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    machine: str = Field(sa_column=Column(String(200), nullable=False))
    started: int = Field(sa_column=Column(BigInteger, nullable=False))
    host: str = Field(sa_column=Column(String(255), nullable=False))
    agent: str = Field(sa_column=Column(String(100), nullable=False))
    session_key: str = Field(sa_column=Column(String(300), nullable=False))
    recorded_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class InboxRow(SQLModel, table=True):
    """Something a person said to the bot, recorded before anything can fail.

    One row per message (or button press) ever received in a bound
    conversation, keyed by the channel's own id for it: a message the gateway
    delivers twice, or that a catch-up reads again, cannot be recorded twice.
    ``status`` is ``pending`` until the session's log holds it (``done``), or
    until there is nobody to give it to (``dropped``). ``seq`` orders a
    conversation's rows (a Discord snowflake grows with time). ``notified``
    says the author was already told that handling it failed, so they are
    told once.
    """

    __tablename__ = "inbox"
    __table_args__ = (
        Index("ix_inbox_status", "status"),
        Index("ix_inbox_conversation", "channel", "account_id", "conversation_id", "seq"),
    )

    channel: str = Field(sa_column=Column(String(32), primary_key=True))
    account_id: str = Field(sa_column=Column(String(64), primary_key=True))
    item_id: str = Field(sa_column=Column(String(64), primary_key=True))
    kind: str = Field(sa_column=Column(String(16), nullable=False))
    conversation_id: str = Field(sa_column=Column(String(64), nullable=False))
    parent_conversation_id: str | None = Field(
        default=None, sa_column=Column(String(64), nullable=True)
    )
    seq: int = Field(sa_column=Column(BigInteger, nullable=False))
    author_id: str | None = Field(default=None, sa_column=Column(String(64), nullable=True))
    author_name: str | None = Field(default=None, sa_column=Column(String(200), nullable=True))
    body: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    source: str = Field(sa_column=Column(String(16), nullable=False))
    status: str = Field(sa_column=Column(String(16), nullable=False))
    attempts: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    notified: bool = Field(default=False, sa_column=Column(Boolean, nullable=False))
    received_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    attempted_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    done_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))


class InboxCursorRow(SQLModel, table=True):
    """How far the bot has read a bound conversation, people's messages and its own.

    After a downtime the catch-up reads a conversation only past this point,
    and only if the channel says something newer exists. ``last_seq`` NULL
    marks a binding made before the inbox existed: its first catch-up records
    where the conversation stands without replaying its history.
    """

    __tablename__ = "inbox_cursors"

    channel: str = Field(sa_column=Column(String(32), primary_key=True))
    account_id: str = Field(sa_column=Column(String(64), primary_key=True))
    conversation_id: str = Field(sa_column=Column(String(64), primary_key=True))
    last_seq: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    updated_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class InboxPositionRow(SQLModel, table=True):
    """Where an account's stream of events was read up to, in the channel's own token.

    A channel that hands its events out as one stream per account, resumed from a
    token it gave (a Matrix ``/sync``'s ``next_batch``), keeps that token here. It is
    written only once the events it covers are in the inbox, so a restart resumes
    before anything that was not recorded, never after.
    """

    __tablename__ = "inbox_positions"

    channel: str = Field(sa_column=Column(String(32), primary_key=True))
    account_id: str = Field(sa_column=Column(String(64), primary_key=True))
    position: str = Field(sa_column=Column(Text, nullable=False))
    updated_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class ThreadMessageRow(SQLModel, table=True):
    """A message an agent's words went into, recorded before its final text is posted.

    ``shown`` is false while the thread may not show ``content`` yet: a process
    that starts finds such rows and finishes them in the thread. A shown row is
    kept only while ``open_calls`` names a tool call whose line in it may still
    change; otherwise it is deleted. See :mod:`core.transcript`.
    """

    __tablename__ = "thread_messages"
    __table_args__ = (
        Index("ix_thread_messages_binding_id", "binding_id"),
        Index("ix_thread_messages_shown", "shown"),
    )

    key: str = Field(sa_column=Column(String(32), primary_key=True))
    binding_id: str = Field(sa_column=Column(String(64), nullable=False))
    session_key: str = Field(sa_column=Column(String(300), nullable=False))
    turn_id: str | None = Field(default=None, sa_column=Column(String(64), nullable=True))
    content: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    sent: list[Any] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    open_calls: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    shown: bool = Field(default=False, sa_column=Column(Boolean, nullable=False))
    updated_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class ScheduledJobRow(SQLModel, table=True):
    """A scheduled job: what runs, when, for whom, and where it lands.

    The destination is never a raw id to post to: a thread job names its
    binding and session (resolved through the router at each run), a channel
    job the channel it was made in (its runs spawn there as ``/agents spawn``
    would). ``next_run_at`` is the next due time the scheduler will claim;
    NULL once a one-shot has run or a job was removed. See :mod:`core.scheduler`.
    """

    __tablename__ = "scheduled_jobs"
    __table_args__ = (
        Index("ix_scheduled_jobs_due", "state", "next_run_at"),
        Index("ix_scheduled_jobs_owner", "scope", "owner_id"),
    )

    job_id: str = Field(sa_column=Column(String(16), primary_key=True))
    kind: str = Field(sa_column=Column(String(16), nullable=False))
    scope: str | None = Field(default=None, sa_column=Column(String(64), nullable=True))
    channel: str = Field(sa_column=Column(String(32), nullable=False))
    account_id: str = Field(sa_column=Column(String(64), nullable=False))
    conversation_id: str = Field(sa_column=Column(String(64), nullable=False))
    parent_conversation_id: str | None = Field(
        default=None, sa_column=Column(String(64), nullable=True)
    )
    session_key: str | None = Field(default=None, sa_column=Column(String(300), nullable=True))
    owner_id: str = Field(sa_column=Column(String(64), nullable=False))
    owner_name: str | None = Field(default=None, sa_column=Column(String(200), nullable=True))
    name: str = Field(sa_column=Column(String(100), nullable=False))
    spec: str = Field(sa_column=Column(String(200), nullable=False))
    timezone: str = Field(sa_column=Column(String(64), nullable=False))
    task: str = Field(sa_column=Column(Text, nullable=False))
    agent: str | None = Field(default=None, sa_column=Column(String(64), nullable=True))
    state: str = Field(sa_column=Column(String(16), nullable=False))
    paused_reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    anchor_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    next_run_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    last_result: str | None = Field(default=None, sa_column=Column(String(300), nullable=True))
    created_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    updated_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class ScheduledRunRow(SQLModel, table=True):
    """One due run of a job, keyed by ``(job_id, due_at)``: claimed in the transaction
    that moves the job on, before anything is posted, so it is run once.

    ``status``: ``claimed`` (a process is dispatching it, under the lease named
    by ``run_key``), ``working`` (its turn or subagent was started), ``finished``,
    ``skipped`` (the previous run was still working), ``missed`` (past the grace
    while the bot was down) or ``failed``. ``due_count`` is how many due times the
    row stands for: a run after a downtime stands for every slot it folded.
    """

    __tablename__ = "scheduled_runs"
    __table_args__ = (
        Index("ix_scheduled_runs_status", "status"),
        Index("ix_scheduled_runs_key", "run_key", unique=True),
    )

    job_id: str = Field(sa_column=Column(String(16), primary_key=True))
    due_at: datetime = Field(sa_column=Column(UTCDateTime(), primary_key=True))
    run_key: str = Field(sa_column=Column(String(64), nullable=False))
    status: str = Field(sa_column=Column(String(16), nullable=False))
    due_count: int = Field(default=1, sa_column=Column(BigInteger, nullable=False))
    late: bool = Field(default=False, sa_column=Column(Boolean, nullable=False))
    session_key: str | None = Field(default=None, sa_column=Column(String(300), nullable=True))
    detail: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    claimed_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    updated_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


def table_of(model: type[SQLModel]) -> Table:
    """The SQLAlchemy table of a table model: SQLModel sets ``__table__`` without typing it."""
    return SQLModel.metadata.tables[str(model.__tablename__)]
