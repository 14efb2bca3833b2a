"""Seeing a subagent's task through: from its agent going idle to one announcement.

A watcher waits for the task's end (the agent idle with nothing queued, or
the timeout, which cancels the turn), then completes it:

1. ``subagent.completed`` in the child's log;
2. in one transaction, its ``subagents`` row moved to the outcome's state
   with its usage, and the completion recorded in the outbox and claimed
   for posting (:mod:`core.subagents.delivery`);
3. the parent told: a ``subagent.child_finished`` event, a line for the
   people in the parent's thread when the child has a thread of its own (its
   announcement goes there, not to the parent's), and a steer from the
   system with the result while the parent still runs;
4. the announcement delivered once, then a run-mode thread let go with a
   farewell (its end and the announcement's delivered mark one transaction),
   then the finished observers told.

Each step checks what is already recorded, so running it again (after a
restart, say) repeats nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Final

from core import log_events
from core.agent.agent import Agent
from core.agent.endings import TIMED_OUT
from core.agent.events import AgentNotice
from core.agent.messages import SYSTEM_AUTHOR_PREFIX
from core.bindings.service import SessionBindingService
from core.clock import Clock
from core.logging import get_logger
from core.runtime import SessionRuntime
from core.store.database import Database
from core.stream import Publish, ignore
from core.subagents.delivery import CompletionDelivery
from core.subagents.events import (
    ChildFinishedPayload,
    CompletedPayload,
)
from core.subagents.outcome import parent_message, task_outcome
from core.subagents.records import Outcome, SubagentFinished, SubagentRecord, outcome_state
from core.subagents.repository import PendingCompletion

__all__ = ["TaskCompletion"]

_log = get_logger("core.subagents")

_UNBIND_REASONS: Final[dict[str, str]] = {
    "completed": "run-complete",
    "cancelled": "run-cancelled",
    "rejected": "run-rejected",
}
"""Why a run-mode thread is let go, by its task's end (anything else: ``run-failed``)."""


class TaskCompletion:
    """Watches tasks and completes them; owns the background work it starts."""

    def __init__(
        self,
        database: Database,
        runtime: SessionRuntime,
        bindings: SessionBindingService,
        delivery: CompletionDelivery,
        *,
        name_of: Callable[[SubagentRecord], str],
        clock: Clock,
        timeout_seconds: float | None,
        publish: Publish[SubagentFinished] = ignore,
    ) -> None:
        self._publish = publish
        self._db = database
        self._runtime = runtime
        self._bindings = bindings
        self._delivery = delivery
        self._name_of = name_of
        self._clock = clock
        self._timeout = timeout_seconds
        self._tasks: set[asyncio.Task[Any]] = set()
        self._watching: set[str] = set()
        self._finishing: set[asyncio.Future[None]] = set()

    def run(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` as a task kept until it ends (asyncio keeps only weak references)."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def watching(self, session_key: str) -> bool:
        return session_key in self._watching

    def watch(self, record: SubagentRecord) -> None:
        """See ``record``'s task through, once per session at a time."""
        if record.session_key in self._watching:
            return
        self._watching.add(record.session_key)
        self.run(self._see_through(record))

    async def _see_through(self, record: SubagentRecord) -> None:
        key = record.session_key
        try:
            agent = await self._runtime.get(key)
            outcome, reason, turn_id = await self._wait_outcome(agent)
            # A crash may have replaced the agent meanwhile: write through the current one.
            agent = await self._runtime.get(key)
            await self._complete(record, agent, outcome, reason, turn_id)
        except Exception:
            _log.error("subagent.watch_failed", session_key=key, exc_info=True)
        finally:
            self._watching.discard(key)

    async def _wait_outcome(self, agent: Agent) -> tuple[Outcome, str | None, str]:
        idle = asyncio.ensure_future(agent.wait_idle())
        if self._timeout is None:
            await idle
        else:
            timer = asyncio.ensure_future(self._clock.sleep(self._timeout))
            done, _ = await asyncio.wait({idle, timer}, return_when=asyncio.FIRST_COMPLETED)
            timer.cancel()
            if idle not in done:
                turn_id = agent.tree.running_turn_id or "timeout"
                idle.cancel()
                await agent.cancel(reason=TIMED_OUT)  # the bot's own cancel: no person named
                return "timed_out", f"no result within {self._timeout:g}s", turn_id
        return task_outcome(agent.tree)

    async def _complete(
        self,
        record: SubagentRecord,
        agent: Agent,
        outcome: Outcome,
        reason: str | None,
        turn_id: str,
    ) -> None:
        key = record.session_key
        completion_id = f"{key}/{turn_id}"
        result = agent.tree.last_answer()
        already = any(
            (done := e.data_as(CompletedPayload)) is not None
            and done.completion_id == completion_id
            for e in agent.tree.events
        )
        if not already:
            await agent.append(
                CompletedPayload(
                    completion_id=completion_id, outcome=outcome, result=result, reason=reason
                )
            )
        usage = agent.tree.total_usage
        record = record.moved(
            outcome_state(outcome, record.mode),
            self._clock.now(),
            outcome_reason=reason,
            tokens=usage.prompt_tokens + usage.completion_tokens,
            cost_usd=usage.cost_usd or 0.0,
        )
        claimed = await self._delivery.complete(record, completion_id, outcome, result)
        fresh = claimed is not None
        log_events.emit(
            log_events.SubagentCompleted(
                session_key=key,
                outcome=outcome,
                completion_id=completion_id,
                recorded=fresh,
                account=record.requester.account_id if record.requester else None,
                guild=record.scope,
            )
        )
        if record.parent_session_key:
            await self._tell_parent(record, completion_id, outcome, result)
        await self.finish(record, completion_id, claimed)

    async def finish(
        self,
        record: SubagentRecord,
        completion_id: str,
        claimed: PendingCompletion | None = None,
    ) -> None:
        """Announce (once), then let a run-mode subagent's thread go with a farewell.

        ``claimed``: the outbox row, already claimed for this call to post."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._finishing.add(done)
        try:
            await self._finish(record, completion_id, claimed)
        finally:
            self._finishing.discard(done)
            done.set_result(None)

    def _kept(self, binding_id: str) -> bool:
        """The run's thread stays bound after its task (see ``kept_after_run``)."""
        binding = self._bindings.get(binding_id)
        return binding is not None and binding.meta.kept_after_run

    def finishing(self) -> list[asyncio.Future[None]]:
        """Announcements under way (with their farewells), each done when it has ended."""
        return list(self._finishing)

    async def _finish(
        self, record: SubagentRecord, completion_id: str, claimed: PendingCompletion | None
    ) -> None:
        if record.mode != "run" or record.binding_id is None or self._kept(record.binding_id):
            await self._delivery.deliver(completion_id, record, claimed)
            self._publish(SubagentFinished(record))
            return
        why = _UNBIND_REASONS.get(record.state, "run-failed")
        posted = False
        try:
            async with self._db.transaction() as tx:  # the mark and the thread's end
                posted = await self._delivery.deliver(completion_id, record, claimed, tx=tx)
                await self._bindings.unbind(
                    target_session_key=record.session_key, reason=why, tx=tx
                )
        except Exception:
            if not posted:
                raise
            # Posted and marked (the mark lands alone when its transaction does not
            # commit): what failed is the thread's end, which stays bound.
            _log.error("delivery.then_failed", completion_id=completion_id, exc_info=True)
        self._publish(SubagentFinished(record))

    async def _tell_parent(
        self, record: SubagentRecord, completion_id: str, outcome: Outcome, result: str
    ) -> None:
        parent_key = record.parent_session_key
        assert parent_key is not None
        try:
            parent = await self._runtime.get(parent_key)
            told = any(
                (finished := e.data_as(ChildFinishedPayload)) is not None
                and finished.completion_id == completion_id
                for e in parent.tree.events
            )
            if told:
                return
            await parent.append(
                ChildFinishedPayload(
                    child_session_key=record.session_key,
                    completion_id=completion_id,
                    agent=record.agent,
                    outcome=outcome,
                    result=result,
                )
            )
            notice = self._child_notice(record, outcome)
            if notice is not None:  # the parent's thread, if it has one, shows it
                parent.emit(AgentNotice(parent_key, notice))
            if parent.running:
                await parent.steer(
                    parent_message(self._name_of(record), outcome, result),
                    author_id=f"{SYSTEM_AUTHOR_PREFIX}subagents",
                )
        except Exception:
            _log.error(
                "subagent.parent_not_told",
                session_key=record.session_key,
                parent_session_key=parent_key,
                exc_info=True,
            )

    def _child_notice(self, record: SubagentRecord, outcome: Outcome) -> str | None:
        """The parent thread's line about a child that has a thread of its own, naming it;
        None for a child without one (its announcement itself falls back to the parent's
        conversation, where it was asked)."""
        binding = self._bindings.get(record.binding_id) if record.binding_id else None
        if binding is None:
            return None
        thread = binding.meta.thread_name
        where = f" (its thread: “{thread}”)" if thread else " (in its own thread)"
        return f"📨 **{self._name_of(record)}** finished: {outcome.replace('_', ' ')}{where}"

    async def wait_settled(self) -> None:
        """Wait until every watcher and delivery in flight is done (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
