"""SubagentService: spawn a subagent, watch its task, announce its completion once.

One use case serves both ways in: ``/agents spawn`` (a user) and the
``spawn_subagent`` tool (a parent agent). The order of a spawn is what makes
failure clean:

1. refuse early what cannot work (a thread while threads are off for that
   scope, a session without a thread, an agent that may not be started);
2. write the child's first events (``agent.activated``, ``subagent.spawned``)
   and its ``subagents`` row: the provisional child;
3. bind a thread if asked; if that fails the provisional child is removed
   and nothing is left behind;
4. start the agent on the task; if that fails after the bind, the binding
   ends with reason ``spawn-failed`` (the farewell says so).

When the task is done (the agent idle with nothing queued, or the timeout),
the completion is recorded in the child's log and the outbox, the parent is
told, the announcement is delivered once (:mod:`core.subagents.delivery`),
and a run-mode subagent lets its thread go with a farewell.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.agent.agent import Agent
from core.agent.assignment import AGENT_ACTIVATED
from core.agent.messages import SYSTEM_AUTHOR_PREFIX
from core.bindings.records import ConversationRef, SessionBindingRecord
from core.bindings.service import SessionBindingService
from core.clock import Clock, SystemClock
from core.config import FLAG_SPAWN_SUBAGENT_SESSIONS, AgentProfile
from core.errors import FeatureDisabled, ThreadboundError
from core.handoffs.activation import may_activate
from core.logging import get_logger
from core.runtime import SessionRuntime
from core.sessions.log import SessionLog
from core.sessions.tree import SessionTree
from core.store.database import Database
from core.subagents import _repository
from core.subagents.delivery import CompletionDelivery
from core.subagents.events import CHILD_FINISHED, COMPLETED, SPAWNED
from core.subagents.records import (
    Outcome,
    SpawnMode,
    SubagentRecord,
    SubagentState,
    outcome_state,
)

__all__ = ["SpawnRefused", "SpawnRequest", "Spawned", "SubagentService"]

_log = get_logger("core.subagents")

SUBAGENT_PREFIX = "subagent:"
DEFAULT_NAME = "Subagent"


class SpawnRefused(ThreadboundError):
    """The spawn cannot start; the message says why and what would work."""


@dataclass(frozen=True, slots=True)
class SpawnRequest:
    """A request to start a subagent.

    ``requester`` is where the spawn was asked (the completion's requester);
    ``scope`` is the guild (or other scope) whose flags apply; ``title`` names
    the thread.
    """

    task: str
    agent: str | None = None
    mode: SpawnMode = "run"
    thread: bool = False
    parent_session_key: str | None = None
    requester: ConversationRef | None = None
    requested_by: str | None = None
    scope: str | None = None
    title: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Spawned:
    record: SubagentRecord
    binding: SessionBindingRecord | None
    agent: Agent
    display_name: str


ThreadsAllowed = Callable[[SpawnRequest], bool]
"""Whether the resolved flags let this request open a thread (enabled and spawn on)."""

StartedObserver = Callable[[SubagentRecord, SessionBindingRecord | None, Agent], None]
"""Told when a subagent's agent runs (after a spawn, and again after a restart)."""

FinishedObserver = Callable[[SubagentRecord], None]
"""Told when a subagent's task is announced (and a run-mode thread let go)."""


class SubagentService:
    """Spawns subagents and sees each task through to one delivered announcement."""

    def __init__(
        self,
        database: Database,
        sessions: SessionLog,
        runtime: SessionRuntime,
        bindings: SessionBindingService,
        delivery: CompletionDelivery,
        *,
        profiles: Mapping[str, AgentProfile],
        threads_allowed: ThreadsAllowed,
        clock: Clock | None = None,
        timeout_seconds: float | None = None,
    ) -> None:
        self._db = database
        self._sessions = sessions
        self._runtime = runtime
        self._bindings = bindings
        self.delivery = delivery
        self._profiles = profiles
        self._threads_allowed = threads_allowed
        self.clock: Clock = clock or SystemClock()
        self._timeout = timeout_seconds
        self._observers: list[StartedObserver] = []
        self._finished: list[FinishedObserver] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._watching: set[str] = set()
        self._recovery: asyncio.Future[None] | None = None

    # -- names and profiles -------------------------------------------------------

    def display_name(self, agent: str | None) -> str:
        profile = self._profiles.get(agent or "")
        return profile.display_name if profile else (agent or DEFAULT_NAME)

    def name_of(self, record: SubagentRecord) -> str:
        return self.display_name(record.agent)

    def _choose_agent(self, requested: str | None) -> str | None:
        """The agent to start; refuses unknown agents and agents only a handoff may start."""
        if not self._profiles:
            return requested
        if requested is None:
            startable = [a for a, p in self._profiles.items() if p.user_startable]
            if not startable:
                raise SpawnRefused(
                    "no configured agent may be started directly; see [agents.<id>] user_startable"
                )
            return startable[0]
        profile = self._profiles.get(requested)
        if profile is None:
            raise SpawnRefused(
                f"there is no agent {requested!r}; configured agents: {', '.join(self._profiles)}"
            )
        if not may_activate(requested, user_startable=profile.user_startable, handoffs=()):
            raise SpawnRefused(
                f"agent {requested!r} starts only through an accepted handoff, not directly"
            )
        return requested

    def on_started(self, observer: StartedObserver) -> Callable[[], None]:
        self._observers.append(observer)
        return lambda: self._observers.remove(observer)

    def on_finished(self, observer: FinishedObserver) -> Callable[[], None]:
        self._finished.append(observer)
        return lambda: self._finished.remove(observer)

    # -- spawn ---------------------------------------------------------------------

    async def spawn(self, request: SpawnRequest) -> Spawned:
        """Start a subagent on ``request.task``.

        Raises:
            SpawnRefused: empty task, a session without a thread, an agent that
                does not exist or may not be started directly.
            FeatureDisabled: a thread was asked for where spawning threads is off.
            BindingError, StoreError: the thread could not be bound (nothing is left).
        """
        if not request.task.strip():
            raise SpawnRefused("the task is empty; say what the subagent should do")
        if request.mode == "session" and not request.thread:
            raise SpawnRefused(
                "a session-mode subagent lives in its own thread: ask for thread=true, "
                "or use mode 'run'"
            )
        if request.thread and not self._threads_allowed(request):
            raise FeatureDisabled(FLAG_SPAWN_SUBAGENT_SESSIONS, "a subagent in its own thread")
        agent_id = self._choose_agent(request.agent)
        key = f"{SUBAGENT_PREFIX}{uuid.uuid4().hex[:12]}"
        now = self.clock.now()
        record = SubagentRecord(
            session_key=key,
            parent_session_key=request.parent_session_key,
            agent=agent_id,
            mode=request.mode,
            thread=request.thread,
            requester=request.requester,
            requested_by=request.requested_by,
            scope=request.scope,
            task=request.task,
            state="starting",
            binding_id=None,
            created_at=now,
            updated_at=now,
        )
        await self._open_child(record)
        binding = None
        if request.thread:
            try:
                binding = await self._bind(record, request)
            except BaseException:
                await self._discard(key)
                raise
        try:
            agent = await self._runtime.get(key)
            record = await self._save(
                record.moved(
                    "running", self.clock.now(), binding_id=binding.binding_id if binding else None
                )
            )
            self._tell_started(record, binding, agent)
            await agent.send(request.task, author_id=request.requested_by)
        except Exception as exc:
            await self._start_failed(record, binding, exc)
            raise
        self._watch(record)
        return Spawned(record, binding, agent, self.display_name(agent_id))

    async def _open_child(self, record: SubagentRecord) -> None:
        tree = SessionTree(record.session_key)
        items: list[tuple[str, dict[str, Any], None]] = []
        if record.agent:
            items.append(
                (AGENT_ACTIVATED, {"agent": record.agent, "by": record.requested_by}, None)
            )
        items.append(
            (
                SPAWNED,
                {
                    "agent": record.agent,
                    "mode": record.mode,
                    "thread": record.thread,
                    "task": record.task,
                    "parent_session_key": record.parent_session_key,
                    "requested_by": record.requested_by,
                },
                None,
            )
        )
        await self._sessions.append_many(tree, items)
        await self._save(record)

    async def _bind(self, record: SubagentRecord, request: SpawnRequest) -> SessionBindingRecord:
        requester = request.requester
        if requester is None:
            raise SpawnRefused("a subagent thread needs the conversation it was asked from")
        profile = self._profiles.get(record.agent or "")
        name = self.display_name(record.agent)
        metadata = {
            "persona": {"name": name, "avatar_url": profile.avatar_url if profile else None},
            "agent": record.agent,
            "spawn_mode": record.mode,
            "requester_conversation_id": requester.conversation_id,
            "thread_name": (request.title or f"{name}: {record.task}")[:100],
            **request.metadata,
        }
        if record.scope is not None:
            metadata["guild_id"] = record.scope
        return await self._bindings.bind(
            record.session_key,
            "subagent",
            requester.new_beside(),
            metadata=metadata,
            bound_by=record.requested_by,
        )

    async def _discard(self, key: str) -> None:
        with contextlib.suppress(ThreadboundError):
            await self._sessions.discard(key)
        await self._db.run(_repository.delete_subagent, key)
        _log.info("subagent.discarded", session_key=key)

    async def _start_failed(
        self, record: SubagentRecord, binding: SessionBindingRecord | None, exc: BaseException
    ) -> None:
        _log.error("subagent.start_failed", session_key=record.session_key, error=str(exc))
        await self._save(
            record.moved("failed", self.clock.now(), outcome_reason=f"could not start: {exc}")
        )
        if binding is not None:
            await self._bindings.unbind(binding.binding_id, reason="spawn-failed")

    def _tell_started(
        self, record: SubagentRecord, binding: SessionBindingRecord | None, agent: Agent
    ) -> None:
        for observer in list(self._observers):
            try:
                observer(record, binding, agent)
            except Exception:
                _log.error(
                    "subagent.observer_failed", session_key=record.session_key, exc_info=True
                )

    async def _save(self, record: SubagentRecord) -> SubagentRecord:
        await self._db.run(_repository.upsert_subagent, record)
        return record

    # -- watching and completion ----------------------------------------------------

    def _watch(self, record: SubagentRecord) -> None:
        if record.session_key in self._watching:
            return
        self._watching.add(record.session_key)
        self._background(self._see_through(record))

    def _background(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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
            timer = asyncio.ensure_future(self.clock.sleep(self._timeout))
            done, _ = await asyncio.wait({idle, timer}, return_when=asyncio.FIRST_COMPLETED)
            timer.cancel()
            if idle not in done:
                turn_id = agent.tree.running_turn_id or "timeout"
                idle.cancel()
                await agent.cancel()
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
        result = last_answer(agent.tree)
        already = any(
            e.type == COMPLETED and e.payload["completion_id"] == completion_id
            for e in agent.tree.events
        )
        if not already:
            await agent.append(
                COMPLETED,
                {
                    "completion_id": completion_id,
                    "outcome": outcome,
                    "result": result,
                    "reason": reason,
                },
            )
        usage = agent.tree.total_usage
        record = await self._save(
            record.moved(
                outcome_state(outcome, record.mode),
                self.clock.now(),
                outcome_reason=reason,
                tokens=usage.prompt_tokens + usage.completion_tokens,
                cost_usd=usage.cost_usd or 0.0,
            )
        )
        fresh = await self.delivery.record(completion_id, key, outcome, result)
        _log.info(
            "subagent.completed",
            session_key=key,
            outcome=outcome,
            completion_id=completion_id,
            recorded=fresh,
        )
        if record.parent_session_key:
            await self._tell_parent(record, completion_id, outcome, result)
        await self._finish(record, completion_id)

    async def _finish(self, record: SubagentRecord, completion_id: str) -> None:
        """Announce (once), then let a run-mode subagent's thread go with a farewell."""
        await self.delivery.deliver(completion_id, record)
        if record.mode == "run" and record.binding_id is not None:
            why = "run-complete" if record.state == "completed" else "run-failed"
            await self._bindings.unbind(target_session_key=record.session_key, reason=why)
        for observer in list(self._finished):
            try:
                observer(record)
            except Exception:
                _log.error(
                    "subagent.observer_failed", session_key=record.session_key, exc_info=True
                )

    async def _tell_parent(
        self, record: SubagentRecord, completion_id: str, outcome: Outcome, result: str
    ) -> None:
        parent_key = record.parent_session_key
        assert parent_key is not None
        try:
            parent = await self._runtime.get(parent_key)
            told = any(
                e.type == CHILD_FINISHED and e.payload["completion_id"] == completion_id
                for e in parent.tree.events
            )
            if told:
                return
            await parent.append(
                CHILD_FINISHED,
                {
                    "child_session_key": record.session_key,
                    "completion_id": completion_id,
                    "agent": record.agent,
                    "outcome": outcome,
                    "result": result,
                },
            )
            if parent.running:
                await parent.steer(
                    parent_message(self.name_of(record), outcome, result),
                    author_id=f"{SYSTEM_AUTHOR_PREFIX}subagents",
                )
        except Exception:
            _log.error(
                "subagent.parent_not_told",
                session_key=record.session_key,
                parent_session_key=parent_key,
                exc_info=True,
            )

    # -- start-up, listing, shutdown ---------------------------------------------------

    async def start(self) -> None:
        """Pick up what a previous process left: undelivered completions, unfinished tasks.

        Runs once per service; every call waits for that one run, so a caller
        (a second account's client, a test) knows the pick-up has been scheduled.
        """
        if self._recovery is None:
            self._recovery = asyncio.ensure_future(self._recover())
        await asyncio.shield(self._recovery)

    async def _recover(self) -> None:
        records = {r.session_key: r for r in await self.list()}
        for row in await self.delivery.recover():
            record = records.get(row["session_key"])
            if record is None:
                continue
            self._background(self._finish(record, row["completion_id"]))
        for record in records.values():
            if record.state in ("starting", "running"):
                self._background(self._resume(record))

    async def _resume(self, record: SubagentRecord) -> None:
        agent = await self._runtime.get(record.session_key)
        binding = self._binding_of(record)
        self._tell_started(record, binding, agent)
        self._watch(record)

    def _binding_of(self, record: SubagentRecord) -> SessionBindingRecord | None:
        live = [
            b for b in self._bindings.list_by_session(record.session_key) if b.status == "active"
        ]
        return live[0] if live else None

    async def list(self, *states: SubagentState) -> list[SubagentRecord]:
        return await self._db.run(_repository.list_subagents, states)

    async def get(self, session_key: str) -> SubagentRecord | None:
        return await self._db.run(_repository.get_subagent, session_key)

    async def wait_settled(self) -> None:
        """Wait until every watcher and delivery in flight is done (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def task_outcome(tree: SessionTree) -> tuple[Outcome, str | None, str]:
    """The outcome of the session's last turn: (outcome, reason, turn id)."""
    for event in reversed(tree.events):
        payload = event.payload
        if event.type == "turn_ended":
            reason = payload["reason"]
            if reason == "completed":
                return "completed", None, payload["turn_id"]
            if reason == "error":
                return "failed", payload.get("error") or "the model call failed", payload["turn_id"]
            if reason == "max_steps":
                return "failed", f"stopped after {payload['steps']} steps", payload["turn_id"]
            return "failed", "the session's budget is used up", payload["turn_id"]
        if event.type == "turn_cancelled":
            return "failed", "the turn was cancelled", payload.get("turn_id") or "cancelled"
        if event.type == "turn_interrupted":
            return "failed", "the bot restarted during the task", payload["turn_id"]
        if event.type == "turn_started":
            return "failed", "the agent stopped unexpectedly", payload["turn_id"]
    return "failed", "the task never started", "none"


def last_answer(tree: SessionTree) -> str:
    """The last non-empty assistant text on the active path."""
    for event in reversed(tree.path()):
        if event.type == "assistant_message" and event.payload.get("text"):
            return str(event.payload["text"])
    return ""


def parent_message(name: str, outcome: Outcome, result: str) -> str:
    """What a running parent agent is told when its child finishes."""
    return f'<subagent_result name="{name}" outcome="{outcome}">\n{result}\n</subagent_result>'
