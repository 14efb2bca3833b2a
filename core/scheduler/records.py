"""What the scheduler keeps: jobs and their runs, as plain values (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

from core.bindings.records import ConversationRef

__all__ = ["WORKING", "Job", "JobKind", "JobState", "Run", "RunStatus", "run_key"]

JobKind = Literal["thread", "channel", "wakeup"]
"""Where a job's runs go: a new turn in a bound thread's session (``thread``), a
subagent spawned into a new thread of a channel (``channel``), or one later turn an
agent asked for in its own session (``wakeup``, the ``schedule_wakeup`` tool)."""

JobState = Literal["active", "paused", "done", "removed"]
RunStatus = Literal["claimed", "working", "finished", "skipped", "missed", "failed"]

WORKING: tuple[RunStatus, ...] = ("claimed", "working")
"""A run in these states may still be posting or running: the next one is skipped."""


@dataclass(frozen=True, slots=True)
class Job:
    """A scheduled job.

    ``conversation`` is where it was made: the bound thread (``thread``, ``wakeup``)
    or the channel (``channel``). A thread job's runs go to ``session_key``
    through the binding that holds it there, resolved at each run, never to the
    raw id. ``spec`` is the ``when`` as given (normalised), in ``timezone``;
    ``anchor_at`` is what an ``every`` interval counts from.
    """

    job_id: str
    kind: JobKind
    scope: str | None
    conversation: ConversationRef
    owner_id: str
    name: str
    spec: str
    timezone: str
    task: str
    state: JobState
    anchor_at: datetime
    next_run_at: datetime | None
    created_at: datetime
    updated_at: datetime
    session_key: str | None = None
    owner_name: str | None = None
    agent: str | None = None
    paused_reason: str | None = None
    last_result: str | None = None

    def moved(self, state: JobState, now: datetime, **changes: object) -> Job:
        """The job in ``state`` as of ``now`` (with any other ``changes``)."""
        return replace(self, state=state, updated_at=now, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Run:
    """One due run of a job, keyed by ``(job_id, due_at)``.

    ``run_key`` names it in one string (its lease, the inbox item of its turn);
    ``due_count`` is how many due times it stands for (more than one after a
    downtime: they were folded into this one); ``late``: it is a catch-up, run
    after the bot came back, so it is paced.
    """

    job_id: str
    due_at: datetime
    run_key: str
    status: RunStatus
    claimed_at: datetime
    updated_at: datetime
    due_count: int = 1
    late: bool = False
    session_key: str | None = None
    detail: str | None = None


def run_key(job_id: str, due_at: datetime) -> str:
    """The one-string name of a run: its job and its due time to the second (UTC)."""
    return f"{job_id}@{int(due_at.timestamp())}"
