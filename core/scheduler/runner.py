"""The scheduler's clock-work: claim due runs, start each once, watch it to its end.

Every tick (a second on the services' clock) one transaction claims the runs
that fell due on this process's guilds (:func:`core.scheduler.repository.claim_due`):
a run is a row before anything is posted, so two processes never both start
it. Then each claimed run is started on its own, so one slow job never holds
another back:

- a thread job's (and a wake-up's) run is a new turn of the session bound there:
  its words go into the inbox as a follow-up (never a steer) keyed by the run,
  the thread says ``⏰ Scheduled: <name>``, and the inbox hands it over once, behind
  any running turn. The destination is resolved through the router at the run,
  never a stored raw id; a thread that is gone pauses the job and tells its
  owner once, in the parent channel;
- a channel job's run spawns a subagent there, as ``/agents spawn`` would, under a
  session key made from the run: its completion is announced once in the channel.

A process that dies after its claim leaves the run ``claimed`` under a lease
that nobody renews; its successor finds it (:func:`repository.abandoned_runs`)
and starts it, once: the inbox item and the spawned session are keyed by the
run, so whatever the dead process already did is found, not done again.

After a downtime a job's due times that passed are folded into one run (the
latest) if it is within ``misfire_grace_seconds``, else recorded as missed, and
the thread gets one line saying how many were due. Catch-up runs are started a
second apart, never in a burst at start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import Any, Protocol

from core import log_events
from core.bindings.records import ConversationRef, SessionBindingRecord
from core.clock import Clock
from core.config import SchedulerConfig
from core.errors import ThreadboundError
from core.inbox import Inbox, InboxMessage
from core.leases import Leases
from core.logging import get_logger
from core.registry import PerAccount
from core.routing import BoundDeliveryRouter
from core.runtime import SessionRuntime
from core.scheduler import repository
from core.scheduler.records import Job, Run, RunStatus
from core.scheduler.repository import Claim, Planned
from core.scheduler.service import SchedulePolicy, Schedules
from core.sharding import ShardSet
from core.store.database import Database
from core.subagents.service import SubagentService

__all__ = ["ConversationGone", "ScheduleChannel", "ScheduleRunner"]

_log = get_logger("core.scheduler")

TICK_SECONDS = 1.0
CATCH_UP_SPACING_SECONDS = 1.0
"""Catch-up runs after a downtime start this far apart: never a burst at start-up."""
CLAIM_BATCH = 100
MAX_STARTING = 32
"""Runs being started at once (posting their line, spawning); the rest wait their turn."""
SKIPPED_OVERLAP = "the previous run was still working"
SCHEDULE_PREFIX = "schedule:"


class ConversationGone(ThreadboundError):
    """The thread or channel a run should post into no longer exists (or is unbound)."""


class ScheduleChannel(Protocol):
    """What the scheduler needs from a chat account (one per account)."""

    @property
    def channel(self) -> str: ...

    @property
    def account_id(self) -> str: ...

    async def tell_thread(
        self, binding: SessionBindingRecord, text: str, /, *, since: datetime | None = None
    ) -> None:
        """Post ``text`` as the bot in the bound conversation (reopening it if archived);
        raises :class:`ConversationGone` when it is gone (its binding then ends).
        ``since``: unless the bot posted that very text there after that moment (a run a
        dead process was starting)."""
        ...

    async def tell_channel(
        self, conversation: ConversationRef, text: str, /, *, mention: str | None = None
    ) -> None:
        """Post ``text`` as the bot in a channel, pinging only the user ``mention``;
        raises :class:`ConversationGone` when the channel is gone."""
        ...

    async def is_member(self, scope: str | None, user_id: str, /) -> bool:
        """Whether the user is still in the server (True when it cannot be told)."""
        ...

    def seq_at(self, moment: datetime, /) -> int:
        """An ordering number for a message at ``moment`` among the conversation's own."""
        ...


@dataclass(slots=True)
class _Working:
    job: Job
    run: Run
    session_key: str | None
    thread_id: str | None = None
    """A channel job's run: the thread its subagent works in (for the closing line)."""


class ScheduleRunner:
    """Claims due runs on this process's guilds and starts each exactly once."""

    def __init__(
        self,
        database: Database,
        schedules: Schedules,
        *,
        inbox: Inbox,
        router: BoundDeliveryRouter,
        runtime: SessionRuntime,
        subagents: SubagentService,
        leases: Leases,
        policy: SchedulePolicy,
        settings: SchedulerConfig,
        shards: ShardSet,
        clock: Clock,
    ) -> None:
        self._db = database
        self._schedules = schedules
        self._inbox = inbox
        self._router = router
        self._runtime = runtime
        self._subagents = subagents
        self._leases = leases
        self._policy = policy
        self._settings = settings
        self._shards = shards
        self.clock = clock
        self.channels: PerAccount[ScheduleChannel] = PerAccount("schedule channel")
        self._starting = asyncio.Semaphore(MAX_STARTING)
        self._late: asyncio.Queue[Claim] = asyncio.Queue()
        self._tasks: set[asyncio.Future[None]] = set()
        self._working: dict[str, _Working] = {}
        """Runs started and not seen to end, by run key."""
        self._dispatching: set[str] = set()
        self._pacer: asyncio.Future[None] | None = None
        self._ticking_since: datetime | None = None
        """When this process first ticked: runs due well before it are catch-ups."""
        self._taken_over: set[str] = set()
        """Runs claimed by a process that died: what it posted is looked for, not repeated."""
        self.ticks = 0

    # -- the loop ----------------------------------------------------------------------

    async def run(self) -> None:
        """Until cancelled: tick. What a dead process claimed is picked up by
        :meth:`pick_up`, which the services' start-up calls once it has proved its
        predecessor dead (and every half lease after that, from here)."""
        while True:
            try:
                await self.tick()
            except Exception:  # a store that is briefly away: next tick tries again
                _log.warning("scheduler.tick_failed", exc_info=True)
            await self.clock.sleep(TICK_SECONDS)

    async def tick(self) -> int:
        """Claim what is due now (batch after batch) and start it; settle ended runs;
        every half lease, take over runs a process that died since had claimed.
        Returns how many runs were claimed."""
        self.ticks += 1
        if self.ticks % max(1, round(self._leases.ttl.total_seconds() / 2 / TICK_SECONDS)) == 0:
            await self.pick_up()
        claimed = 0
        now = self.clock.now()  # one "now" for every batch: a long tick makes nothing late
        if self._ticking_since is None:
            self._ticking_since = now
        while True:
            batch = await self._claim(now)
            claimed += len(batch)
            for claim in batch:
                if claim.run.status != "claimed":
                    self._spawn(self._not_run(claim))
                elif claim.run.late:
                    self._catch_up(claim)
                else:
                    self._spawn(self._start(claim))
            if len(batch) < CLAIM_BATCH:
                break
        if self._working:
            await self._settle()
        return claimed

    async def _claim(self, now: datetime) -> list[Claim]:
        return await self._db.run(
            partial(
                repository.claim_due,
                plan=partial(self._plan, now=now),
                owner=self._leases.owner,
                lease_until=self._leases.until(),
                shards=self._shards,
                limit=CLAIM_BATCH,
            ),
            now,
        )

    def _plan(self, job: Job, *, now: datetime) -> Planned:
        """Which run a due job gets now, and when it is due next (runs in the claim's
        transaction: pure, no I/O)."""
        first = job.next_run_at or now
        spec = self._schedules.spec_of(job)
        due, count = first, 1
        if spec is not None:
            following = spec.next_after(due, job.anchor_at)
            while following is not None and following <= now:
                due, count = following, count + 1
                if count >= 100_000:  # a seconds-spaced job down for a year: enough counted
                    break
                following = spec.next_after(due, job.anchor_at)
            next_run = spec.next_after(now, job.anchor_at)
        else:
            next_run = None
        behind = (now - due).total_seconds()
        missed = behind > self._settings.misfire_grace_seconds
        skip = None
        where = job.conversation
        if not missed and not self._policy.schedules(
            job.scope, where.account_id, channel=where.channel
        ):
            skip = "scheduledTasks is off here"
        return Planned(
            due_at=due,
            due_count=count,
            missed=missed,
            late=count > 1 or self._due_before_start(due),
            next_run_at=next_run,
            skip=skip,
        )

    def _due_before_start(self, due: datetime) -> bool:
        """Due before this process ticked at all: a catch-up after a downtime (paced)."""
        started = self._ticking_since
        return started is not None and (started - due).total_seconds() > 2 * TICK_SECONDS

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _catch_up(self, claim: Claim) -> None:
        """Queue a catch-up run; they start one at a time, a little apart."""
        self._late.put_nowait(claim)
        if self._pacer is None or self._pacer.done():
            self._pacer = asyncio.ensure_future(self._pace_late())
            self._spawn(self._pacer)

    async def _pace_late(self) -> None:
        while not self._late.empty():
            claim = self._late.get_nowait()
            self._spawn(self._start(claim))
            if not self._late.empty():
                await self.clock.sleep(CATCH_UP_SPACING_SECONDS)

    async def pick_up(self) -> None:
        """Runs a dead process claimed and did not start: started now (paced), once; runs
        started before a restart: watched to their end."""
        now = self.clock.now()
        try:
            abandoned = await self._db.run(repository.abandoned_runs, self._leases.owner, now)
            working = await self._db.run(repository.working_runs)
        except Exception:
            _log.warning("scheduler.pick_up_failed", exc_info=True)
            return
        for run in abandoned:
            job = await self._db.run(repository.get_job, run.job_id)
            if job is None or not self._shards.owns_scope(job.scope):
                continue
            taken = await self._leases.take("schedule", run.run_key)
            if taken is not None:
                continue  # a live neighbour has it after all
            _log.info("scheduler.run_taken_over", job_id=job.job_id, run_key=run.run_key)
            self._taken_over.add(run.run_key)
            self._catch_up(Claim(job, run))
        for run in working:
            if run.run_key in self._working:
                continue
            job = await self._db.run(repository.get_job, run.job_id)
            if job is not None and self._shards.owns_scope(job.scope):
                self._working[run.run_key] = _Working(job, run, run.session_key)

    # -- starting one run ------------------------------------------------------------

    async def _start(self, claim: Claim) -> None:
        job, run = claim.job, claim.run
        self._dispatching.add(run.run_key)
        try:
            async with self._starting:
                await self._start_once(job, run)
        except Exception as exc:
            _log.warning(
                "scheduler.run_failed", job_id=job.job_id, run_key=run.run_key, exc_info=True
            )
            reason = _reason(exc)
            await self._finish(job, run, "failed", f"could not start: {reason}")
            # where the run should have shown: its owner sees it did not, and why
            await self._tell(job, f"⚠️ ⏰ “{job.name}” did not run: {reason.rstrip('.')}.")
        finally:
            self._dispatching.discard(run.run_key)

    async def _start_once(self, job: Job, run: Run) -> None:
        previous = await self._db.run(partial(repository.last_run, before=run.due_at), job.job_id)
        if previous is not None and await self._still_working(job, previous):
            await self._skip(job, run, SKIPPED_OVERLAP)
            return
        if not await self._owner_present(job):
            await self._pause(job, "its owner is no longer in the server", tell=False)
            await self._skip(job, run, "its owner left the server")
            return
        session_key: str | None
        thread_id: str | None = None
        if job.kind == "channel":
            session_key, thread_id = await self._start_spawn(job, run)
        else:
            session_key = await self._start_turn(job, run)
        if session_key is None:
            return
        await self._db.run(
            partial(
                repository.finish_run,
                owner=self._leases.owner,
                session_key=session_key,
                result="working",
            ),
            run,
            "working",
            self.clock.now(),
        )
        self._working[run.run_key] = _Working(job, run, session_key, thread_id)

    async def _start_turn(self, job: Job, run: Run) -> str | None:
        """The run's words into the session's inbox as a follow-up, announced in the thread."""
        session_key = job.session_key
        binding = self._destination(job)
        channel = self._channel(job.conversation)
        if binding is None or channel is None or session_key is None:
            why = "its thread was deleted or is no longer bound to its session"
            if binding is not None:
                why = "its account is not connected"
            await self._pause(job, why, tell=binding is None)
            await self._finish(job, run, "failed", why)
            return None
        item = InboxMessage(
            conversation=binding.conversation,
            item_id=f"{SCHEDULE_PREFIX}{run.run_key}",
            seq=channel.seq_at(self.clock.now()),
            text=job.task,
            author_id=job.owner_id,
            author_name=job.owner_name,
            mode="follow_up",
            source="schedule",
        )
        # Taken over from a dead process: the lines it may have posted are looked for first.
        since = run.claimed_at if run.run_key in self._taken_over else None
        try:
            if run.due_count > 1:
                await channel.tell_thread(binding, self._downtime_line(job, run), since=since)
            await channel.tell_thread(binding, f"⏰ Scheduled: {job.name}", since=since)
        except ConversationGone:
            why = "its thread was deleted"
            await self._pause(job, why, tell=True)
            await self._finish(job, run, "failed", why)
            return None
        except Exception:  # Discord refused the line for now: the turn goes ahead without it
            _log.warning("scheduler.line_failed", job_id=job.job_id, exc_info=True)
        if await self._inbox.record([item]):  # the durable step: written once per run
            self._started(job, run, session_key)
        await self._inbox.deliver(binding.conversation)  # once: the item is keyed by the run
        return session_key

    async def _start_spawn(self, job: Job, run: Run) -> tuple[str, str | None]:
        """A subagent spawned in the job's channel, under a session key made from the run
        (a successor finds it spawned and does not spawn twice); its key and thread."""
        key = "subagent:sched-" + hashlib.sha256(run.run_key.encode()).hexdigest()[:12]
        if await self._subagents.get(key) is not None:
            binding = self._subagents.binding_of(key)
            return key, binding.conversation.conversation_id if binding is not None else None
        request = self._subagents.request_for(
            job.conversation,
            task=job.task,
            agent=job.agent,
            mode="run",
            requested_by=job.owner_id,
            requested_by_name=job.owner_name,
            scope=job.scope,
        )
        request = replace(
            request,
            session_key=key,
            title=f"⏰ {job.name}"[:100],
            metadata={"kept_after_run": True},  # a reply in its thread continues the run
        )
        spawned = await self._subagents.spawn(request)
        self._started(job, run, key)
        channel = self._channel(job.conversation)
        thread = None
        if spawned.binding is not None:
            thread = spawned.binding.conversation.conversation_id
        if channel is not None:
            where = ""
            if thread is not None:
                where = f" — **{spawned.display_name}** is on it in <#{thread}>"
            lines = [f"⏰ Scheduled: {job.name}{where}"]
            if run.due_count > 1:
                lines.insert(0, self._downtime_line(job, run))
            with contextlib.suppress(ConversationGone):  # the spawn went through regardless
                await channel.tell_channel(job.conversation, "\n".join(lines))
        return key, thread

    async def _not_run(self, claim: Claim) -> None:
        """A run recorded missed (past the grace) or skipped (the flag is off) at its claim:
        logged, and a missed one told in its thread or channel, once."""
        job, run = claim.job, claim.run
        fields = self._fields(job, run)
        if run.status == "skipped":
            reason = run.detail or "skipped"
            log_events.emit(
                log_events.SchedulerRunSkipped(**fields, reason=reason, guild=job.scope)
            )
            return
        log_events.emit(
            log_events.SchedulerRunMissed(**fields, due_count=run.due_count, guild=job.scope)
        )
        runs = f"{run.due_count} runs" if run.due_count != 1 else "1 run"
        were = "were" if run.due_count != 1 else "was"
        grace = _duration(self._settings.misfire_grace_seconds)
        text = (
            f"⏰ While the bot was offline, {runs} of “{job.name}” {were} due; the latest is "
            f"older than the {grace} grace period, so none ran."
        )
        await self._tell(job, text)

    async def _tell(self, job: Job, text: str) -> None:
        """A line where the job's runs go: its thread (through its binding) or its channel."""
        channel = self._channel(job.conversation)
        if channel is None:
            return
        try:
            if job.kind == "channel":
                await channel.tell_channel(job.conversation, text)
                return
            binding = self._destination(job)
            if binding is not None:
                await channel.tell_thread(binding, text)
        except Exception:
            _log.warning("scheduler.notice_failed", job_id=job.job_id, exc_info=True)

    def _destination(self, job: Job) -> SessionBindingRecord | None:
        """Where a thread job's (or wake-up's) run goes, through the router, now: the binding
        holding the session in the job's thread; a wake-up also follows its session to
        the one thread it is bound to, if that moved."""
        return self._router.resolve_destination(
            target_session_key=job.session_key,
            requester=job.conversation,
            fail_closed=job.kind != "wakeup",
            scope=job.scope,
        ).binding

    def _downtime_line(self, job: Job, run: Run) -> str:
        return (
            f"⏰ While the bot was offline, {run.due_count} runs of “{job.name}” were due; "
            "ran the latest once now."
        )

    # -- ends ---------------------------------------------------------------------------

    async def _still_working(self, job: Job, run: Run) -> bool:
        """Whether the job's earlier ``run`` may still be posting or running."""
        if run.status == "claimed":  # being started here, or by a process alive lately
            if run.run_key in self._dispatching:
                return True
            return self.clock.now() - run.claimed_at < self._leases.ttl
        if run.status != "working" or run.session_key is None:
            return False
        if job.kind == "channel":
            record = await self._subagents.get(run.session_key)
            return record is not None and record.state in ("starting", "running")
        agent = self._runtime.peek(run.session_key)
        return agent is not None and agent.running

    async def _settle(self) -> None:
        """Runs whose turn or subagent has ended are recorded finished, with their result:
        a thread's turn is looked at in memory, every channel run's subagent in one read."""
        spawned = [
            w.session_key
            for w in self._working.values()
            if w.job.kind == "channel" and w.session_key is not None
        ]
        states = await self._subagents.states(spawned) if spawned else {}
        for key, working in list(self._working.items()):
            if working.run.run_key in self._dispatching:
                continue
            run = replace(working.run, status="working", session_key=working.session_key)
            try:
                result = "finished"
                if working.job.kind == "channel":
                    result = states.get(working.session_key or "", "finished")
                    if result in ("starting", "running"):
                        continue
                elif await self._still_working(working.job, run):
                    continue
                del self._working[key]
                await self._finish(working.job, run, "finished", None, result=result)
                if working.job.kind == "channel":
                    await self._tell(working.job, _closing_line(working, result))
            except Exception:
                _log.warning("scheduler.settle_failed", run_key=key, exc_info=True)

    async def _finish(
        self,
        job: Job,
        run: Run,
        status: RunStatus,
        detail: str | None,
        *,
        result: str | None = None,
    ) -> None:
        self._working.pop(run.run_key, None)
        result = result or (f"{status}: {detail}" if detail else status)
        await self._db.run(
            partial(repository.finish_run, owner=self._leases.owner, detail=detail, result=result),
            run,
            status,
            self.clock.now(),
        )
        if status == "skipped":
            return
        log_events.emit(
            log_events.SchedulerRunFinished(
                **self._fields(job, run), result=result, guild=job.scope
            )
        )

    async def _skip(self, job: Job, run: Run, reason: str) -> None:
        await self._db.run(
            partial(
                repository.finish_run,
                owner=self._leases.owner,
                detail=reason,
                result=f"skipped: {reason}",
            ),
            run,
            "skipped",
            self.clock.now(),
        )
        log_events.emit(
            log_events.SchedulerRunSkipped(**self._fields(job, run), reason=reason, guild=job.scope)
        )

    def _started(self, job: Job, run: Run, session_key: str | None) -> None:
        log_events.emit(
            log_events.SchedulerRunStarted(
                **self._fields(job, run),
                due_count=run.due_count,
                late=run.late,
                session_key=session_key,
                guild=job.scope,
            )
        )

    @staticmethod
    def _fields(job: Job, run: Run) -> dict[str, Any]:
        return {
            "job_id": job.job_id,
            "run_key": run.run_key,
            "due_at": run.due_at.isoformat().replace("+00:00", "Z"),
            "kind": job.kind,
            "account": job.conversation.account_id,
        }

    async def _pause(self, job: Job, why: str, *, tell: bool) -> None:
        """Pause the job for ``why``; ``tell``: its owner hears it once, in the parent
        channel (the thread is gone), with only the owner mentioned."""
        current = await self._db.run(repository.get_job, job.job_id)
        if current is None or current.state != "active":
            return
        paused = current.moved("paused", self.clock.now(), paused_reason=why)
        await self._db.run(repository.save_job, paused)
        _log.info("scheduler.job_paused", job_id=job.job_id, reason=why)
        parent = job.conversation.parent_conversation_id
        channel = self._channel(job.conversation)
        if not tell or parent is None or channel is None:
            return
        where = job.conversation.model_copy(
            update={"conversation_id": parent, "parent_conversation_id": None}
        )
        text = (
            f"<@{job.owner_id}> ⏰ Your scheduled job “{job.name}” (`{job.job_id}`) is paused: "
            f"{why}. Nothing was posted anywhere else; /schedule remove id:{job.job_id} "
            "deletes it."
        )
        try:
            await channel.tell_channel(where, text, mention=job.owner_id)
        except Exception:
            _log.warning("scheduler.pause_notice_failed", job_id=job.job_id, exc_info=True)

    async def _owner_present(self, job: Job) -> bool:
        channel = self._channel(job.conversation)
        if channel is None or job.scope is None:
            return True
        try:
            return await channel.is_member(job.scope, job.owner_id)
        except Exception:
            return True

    def _channel(self, conversation: ConversationRef) -> ScheduleChannel | None:
        return self.channels.get(conversation.channel, conversation.account_id)

    async def wait_started(self) -> None:
        """Wait until the runs being started now have been started (tests, shutdown);
        catch-up runs still waiting for their turn are not waited for."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        if self._pacer is not None:
            self._pacer.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)


_ENDINGS = {
    "completed": "is done",
    "failed": "failed",
    "timed_out": "timed out",
    "cancelled": "was cancelled",
    "rejected": "stopped at a rejected request",
}


def _closing_line(working: _Working, result: str) -> str:
    """A channel job's run ended: one line in the channel, pointing at its thread."""
    ended = _ENDINGS.get(result, result.replace("_", " "))
    where = f": its answer is in <#{working.thread_id}>" if working.thread_id else ""
    return f"⏰ “{working.job.name}” {ended}{where}."


def _duration(seconds: int) -> str:
    """``1-hour``-style words for the grace period: ``1 hour``, ``30 minutes``."""
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ThreadboundError):
        return " ".join(str(exc).split())[:200]
    return "an unexpected error (it was logged)"
