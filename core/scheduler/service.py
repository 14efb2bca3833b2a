"""The scheduler's use cases: add, list, pause, resume and remove a job, and an agent's
wake-up. Every chat app (a slash command, a text command, a button, the
``schedule_wakeup`` tool) asks these and renders the answer; the rules live here.

Where a job is made decides what its runs are. Inside a bound conversation, a
new turn of that conversation's session (its owners' or an administrator's to
make, as a follow-up is); in a plain channel, a subagent spawned there as
``/agents spawn`` would. The checks come before anything is saved, each with one
sentence: the flag, the spec, the spacing, the agent, the owner's job count.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Protocol

from core.bindings.records import ConversationRef
from core.bindings.service import SessionBindingService
from core.clock import Clock
from core.config import SchedulerConfig, channel_flag
from core.errors import FeatureDisabled, ThreadboundError
from core.scheduler import repository
from core.scheduler.records import Job, JobKind
from core.scheduler.spec import Spec, SpecError, format_when, parse_when, relative
from core.store.database import Database
from core.subagents.owners import Owners
from core.subagents.service import SubagentService
from core.subagents.validation import is_blank

__all__ = [
    "Added",
    "JobNotFound",
    "JobRefused",
    "JobView",
    "NewJob",
    "SchedulePolicy",
    "Schedules",
]

_FLAG = "scheduledTasks"
"""The flag a job needs, named at its channel's level."""

NAME_LIMIT = 60


class JobRefused(ThreadboundError):
    """A job cannot be made or changed; the message says why and what would work."""


class JobNotFound(ThreadboundError):
    """No live job with that id in this server."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        super().__init__(
            f"there is no scheduled job `{job_id}` in this server; /schedule list shows yours"
        )


class SchedulePolicy(Protocol):
    """Whether the scheduler is on for a scope and account: ``scheduledTasks`` resolved
    (:class:`core.overrides.RuntimeOverrides` is one)."""

    def schedules(
        self, scope: str | None, account_id: str | None = None, *, channel: str = "discord"
    ) -> bool: ...


@dataclass(frozen=True, slots=True)
class NewJob:
    """``/schedule add`` as asked: where, by whom, when, what."""

    where: ConversationRef
    scope: str | None
    owner_id: str
    when: str
    task: str
    owner_name: str | None = None
    agent: str | None = None
    name: str | None = None
    timezone: str | None = None
    admin: bool = False


@dataclass(frozen=True, slots=True)
class Added:
    job: Job
    sentence: str
    """The plain confirmation: when it runs and when next, with the job's id."""


@dataclass(frozen=True, slots=True)
class JobView:
    """One line of ``/schedule list``: the job and its next run in words."""

    job: Job
    next_run: str | None


class Schedules:
    """The scheduler's use cases over the store, the bindings and the subagents."""

    def __init__(
        self,
        database: Database,
        bindings: SessionBindingService,
        subagents: SubagentService,
        settings: SchedulerConfig,
        *,
        policy: SchedulePolicy,
        clock: Clock,
    ) -> None:
        self._db = database
        self._bindings = bindings
        self._subagents = subagents
        self._owners = Owners(bindings, subagents)
        self.settings = settings
        self._policy = policy
        self.clock = clock

    # -- making a job ------------------------------------------------------------------

    async def add(self, request: NewJob) -> Added:
        """Save a new job, or refuse it with one sentence (nothing saved).

        Raises:
            FeatureDisabled: ``scheduledTasks`` is off there.
            SpecError: a ``when`` or ``tz`` that does not parse.
            JobRefused: an empty task, a spacing under the minimum, an agent that may not
                start, a bound session the caller does not own.
            repository.JobLimit: the owner has the most jobs allowed.
        """
        where = request.where
        if not self._policy.schedules(request.scope, where.account_id, channel=where.channel):
            raise FeatureDisabled(channel_flag(where.channel, _FLAG), "a scheduled job")
        if is_blank(request.task):
            raise JobRefused("the task is empty; say what should be done at each run")
        now = self.clock.now()
        spec = parse_when(
            request.when, timezone=request.timezone or self.settings.timezone, now=now
        )
        self._check_spacing(spec)
        binding = self._bindings.active_for_conversation(where)
        kind: JobKind = "thread" if binding is not None else "channel"
        agent = None
        session_key = None
        if binding is not None:
            if request.agent:
                raise JobRefused(
                    "this thread's own agent answers a job made here; leave agent out, or make "
                    "the job in a channel to spawn that agent at each run"
                )
            session_key = binding.target_session_key
            if not await self._owners.may_change(
                session_key, request.owner_id, admin=request.admin
            ):
                raise JobRefused(
                    "only this session's owners or an administrator can schedule work into it"
                )
        else:
            try:
                agent = self._subagents.choose_agent(request.agent)
            except ThreadboundError as exc:
                raise JobRefused(str(exc)) from None
        return await self._save_new(
            spec,
            now,
            kind=kind,
            scope=request.scope,
            conversation=binding.conversation if binding is not None else where,
            session_key=session_key,
            owner_id=request.owner_id,
            owner_name=request.owner_name,
            name=_name_of(request.name, request.task),
            task=request.task,
            agent=agent,
        )

    async def wakeup(self, session_key: str, after: str, note: str) -> Added:
        """An agent's ``schedule_wakeup``: one later turn in its own session, carrying
        ``note``, as a job of the session's owner (counted against their limit).

        Raises:
            JobRefused: a session bound nowhere, an owner unknown, an empty note.
            SpecError: ``after`` is not a duration like ``20m``.
            FeatureDisabled, repository.JobLimit: as for :meth:`add`.
        """
        if is_blank(note):
            raise JobRefused("the note is empty; say what the later turn should do")
        binding = next(iter(self._bindings.active_for_session(session_key)), None)
        if binding is None:
            raise JobRefused(
                "this session is bound to no conversation, so a later turn would have nowhere "
                "to show; a wake-up needs a bound thread"
            )
        record = await self._subagents.get(session_key)
        owner = (record.requested_by if record is not None else None) or binding.bound_by
        if owner is None:
            raise JobRefused("this session has no owner to schedule a wake-up for")
        where = binding.conversation
        if not self._policy.schedules(binding.scope, where.account_id, channel=where.channel):
            raise FeatureDisabled(channel_flag(where.channel, _FLAG), "a scheduled wake-up")
        now = self.clock.now()
        text = after.strip()
        if not text.lower().startswith("in "):
            text = f"in {text}"
        spec = parse_when(text, timezone=self.settings.timezone, now=now)
        if spec.kind != "in":
            raise SpecError(f'{after!r} is not a delay; give one like "20m" or "2h"', text=after)
        return await self._save_new(
            spec,
            now,
            kind="wakeup",
            scope=binding.scope,
            conversation=binding.conversation,
            session_key=session_key,
            owner_id=owner,
            name=_name_of(None, note),
            task=note,
        )

    async def _save_new(
        self,
        spec: Spec,
        now: datetime,
        *,
        kind: JobKind,
        scope: str | None,
        conversation: ConversationRef,
        session_key: str | None,
        owner_id: str,
        name: str,
        task: str,
        owner_name: str | None = None,
        agent: str | None = None,
    ) -> Added:
        """Save a new active job running on ``spec`` from ``now`` (refused at the owner's
        limit), and say when it runs."""
        job = Job(
            job_id=secrets.token_hex(4),
            kind=kind,
            scope=scope,
            conversation=conversation,
            session_key=session_key,
            owner_id=owner_id,
            owner_name=owner_name,
            name=name,
            spec=spec.text,
            timezone=spec.timezone,
            task=task,
            agent=agent,
            state="active",
            anchor_at=now,
            next_run_at=spec.next_after(now, now),
            created_at=now,
            updated_at=now,
        )
        await self._db.run(
            partial(repository.insert_job, limit=self.settings.max_jobs_per_user), job
        )
        return Added(job, f"{spec.describe(now).rstrip('.')}. Job `{job.job_id}`.")

    def _check_spacing(self, spec: Spec) -> None:
        spacing = spec.min_spacing_seconds()
        minimum = self.settings.min_interval_seconds
        if spacing is not None and spacing < minimum:
            raise JobRefused(
                f"“{spec.text}” runs every {_seconds(spacing)}, more often than the minimum "
                f"of {_seconds(minimum)} ([scheduler] min_interval_seconds); choose a longer "
                "interval"
            )

    # -- reading and changing jobs ---------------------------------------------------

    async def list(
        self, scope: str | None, caller: str, *, admin: bool, account_id: str | None = None
    ) -> list[JobView]:
        """The caller's live jobs in ``scope`` (an administrator's: everyone's), oldest first."""
        jobs: list[Job] = await self._db.run(
            partial(repository.list_jobs, account_id=account_id),
            scope,
            None if admin else caller,
        )
        return [JobView(job, self.next_run(job)) for job in jobs]

    def next_run(self, job: Job) -> str | None:
        """``Mon 7 Dec 09:00 (in 2 days)`` in the job's zone; None while paused or done."""
        if job.state != "active" or job.next_run_at is None:
            return None
        now = self.clock.now()
        wait = max(0.0, (job.next_run_at - now).total_seconds())
        return f"{format_when(job.next_run_at, job.timezone)} ({relative(wait)})"

    async def get(self, job_id: str, scope: str | None) -> Job:
        """The live job ``job_id`` of ``scope``.

        Raises:
            JobNotFound: none (another server's job is not found either).
        """
        job: Job | None = await self._db.run(repository.get_job, job_id.strip().strip("`"))
        if job is None or job.scope != scope or job.state not in repository.LIVE_STATES:
            raise JobNotFound(job_id)
        return job

    async def pause(self, job_id: str, scope: str | None, caller: str, *, admin: bool) -> Job:
        """Stop the job's runs until it is resumed (owner or administrator).

        Raises:
            JobNotFound, JobRefused: unknown here; not the caller's to change.
        """
        job = self._may_change(await self.get(job_id, scope), caller, admin=admin)
        if job.state == "paused":
            return job
        paused = job.moved("paused", self.clock.now(), paused_reason=f"paused by <@{caller}>")
        await self._db.run(repository.save_job, paused)
        return paused

    async def resume(self, job_id: str, scope: str | None, caller: str, *, admin: bool) -> Job:
        """Let a paused job run again: a recurring one from its next due time after now,
        a one-shot whose time passed at once (owner or administrator).

        Raises:
            JobNotFound, JobRefused: unknown here; not the caller's to change.
        """
        job = self._may_change(await self.get(job_id, scope), caller, admin=admin)
        if job.state == "active":
            return job
        where = job.conversation
        if not self._policy.schedules(scope, where.account_id, channel=where.channel):
            raise FeatureDisabled(channel_flag(where.channel, _FLAG), "resuming a scheduled job")
        now = self.clock.now()
        due = job.next_run_at
        spec = self.spec_of(job)
        if spec is not None and spec.recurring:
            due = spec.next_after(now, job.anchor_at)
        elif due is None or due < now:
            due = now
        resumed = job.moved("active", now, paused_reason=None, next_run_at=due)
        await self._db.run(repository.save_job, resumed)
        return resumed

    async def remove(self, job_id: str, scope: str | None, caller: str, *, admin: bool) -> Job:
        """Delete the job: it never runs again (owner or administrator).

        Raises:
            JobNotFound, JobRefused: unknown here; not the caller's to change.
        """
        job = self._may_change(await self.get(job_id, scope), caller, admin=admin)
        removed = job.moved("removed", self.clock.now(), next_run_at=None)
        await self._db.run(repository.save_job, removed)
        return removed

    @staticmethod
    def _may_change(job: Job, caller: str, *, admin: bool) -> Job:
        if admin or job.owner_id == caller:
            return job
        raise JobRefused(
            f"job `{job.job_id}` is <@{job.owner_id}>'s; only its owner or an administrator "
            "can change it"
        )

    @staticmethod
    def spec_of(job: Job) -> Spec | None:
        """The job's recurring spec (None for a one-shot, which has no next after its run)."""
        try:
            spec = parse_when(job.spec, timezone=job.timezone, now=job.anchor_at)
        except SpecError:  # a one-shot's date-time, read back after it passed
            return None
        return spec if spec.recurring else None


def _name_of(name: str | None, task: str) -> str:
    """The job's label: the one given, or the task's first words."""
    if name is not None and not is_blank(name):
        return " ".join(name.split())[:NAME_LIMIT]
    words = " ".join(task.split())
    return words if len(words) <= NAME_LIMIT else words[: NAME_LIMIT - 1].rstrip() + "…"


def _seconds(seconds: int) -> str:
    """``45 seconds``, ``5 minutes``, ``2 hours``."""
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute"), (1, "second")):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"
