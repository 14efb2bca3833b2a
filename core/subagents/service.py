"""SubagentService: spawn a subagent, watch its task, announce its completion once.

One use case serves every way in: ``/agents spawn`` (a user), with a thread, or,
while threads are off there, as a *reply* (the answer alone posted where it was
asked), and the ``spawn_subagent`` tool (a parent agent). The order of a spawn
is what makes failure clean:

1. refuse early, before any I/O, what cannot work (:meth:`SubagentService.check`:
   a task that shows nothing, a thread while threads are off for that scope, a
   session without a thread, an agent that may not be started);
2. write the child's first events (``agent.activated``, ``subagent.spawned``);
3. without a thread, one transaction: its ``subagents`` row, already
   ``running``, and the session's lease. With one, the row goes first,
   ``starting``, with the lease (the provisional child, which no other
   process's recovery takes over while its thread is being made), then, in a
   second transaction once the thread exists, its binding and the row moved to
   ``running``; once that commits the binding is indexed and the thread
   introduced. If either fails, the provisional child is removed and nothing
   is left behind;
4. start the agent on the task, from the tree step 2 left (a new session has
   nothing else to load); if that fails after the bind, the binding ends
   with reason ``spawn-failed`` (the farewell says so).

Then :mod:`core.subagents.completion` sees the task through to one
announcement. At start-up :meth:`SubagentService.start` picks up what a
previous process left: completions not delivered, tasks not finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.agent.agent import Agent
from core.agent.assignment import AgentActivatedPayload
from core.bindings.records import (
    BindingMetadata,
    BindingPersona,
    ConversationRef,
    SessionBindingRecord,
)
from core.bindings.service import SessionBindingService
from core.clock import Clock, SystemClock
from core.config import AgentProfile, agent_display_name, channel_flag
from core.errors import FeatureDisabled, ThreadboundError
from core.handoffs.activation import may_activate
from core.logging import get_logger
from core.runtime import SessionBusy, SessionRuntime
from core.sessions.log import AppendItem, SessionLog, as_item
from core.sessions.tree import SessionTree
from core.sharding import EVERY_SHARD, ShardSet
from core.store.database import Database
from core.store.transaction import Transaction
from core.stream import Publish, ignore
from core.subagents import repository
from core.subagents.completion import TaskCompletion
from core.subagents.delivery import CompletionDelivery
from core.subagents.events import SpawnedPayload
from core.subagents.records import (
    SpawnMode,
    SubagentFinished,
    SubagentRecord,
    SubagentState,
)
from core.subagents.validation import is_blank

__all__ = ["SpawnPolicy", "SpawnRefused", "SpawnRequest", "Spawned", "SubagentService"]

_log = get_logger("core.subagents")
_SPAWN_FLAG = "spawnSubagentSessions"
"""The flag a thread-bound spawn needs, named at the asking channel's level."""

SUBAGENT_PREFIX = "subagent:"


class SpawnRefused(ThreadboundError):
    """The spawn cannot start; the message says why and what would work."""


@dataclass(frozen=True, slots=True)
class SpawnRequest:
    """A request to start a subagent.

    ``requester`` is where the spawn was asked (the completion's requester);
    ``scope`` is the guild (or other scope) whose flags apply; ``title`` names
    the thread. ``reply``: no thread, and the answer alone is posted where it
    was asked (``/agents spawn`` while threads are off there); a run, never
    listed among the subagents.
    """

    task: str
    agent: str | None = None
    mode: SpawnMode = "run"
    thread: bool = False
    reply: bool = False
    parent_session_key: str | None = None
    requester: ConversationRef | None = None
    requested_by: str | None = None
    requested_by_name: str | None = None
    scope: str | None = None
    title: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    session_key: str | None = None
    """The child's key, when the caller must find it again (a scheduled run, whose
    successor after a crash must not spawn it twice); a fresh one otherwise."""


@dataclass(frozen=True, slots=True)
class Spawned:
    record: SubagentRecord
    binding: SessionBindingRecord | None
    agent: Agent
    display_name: str


class SpawnPolicy(Protocol):
    """Whether a subagent may open a thread of its own there: the resolved flags (binding
    and spawning on, the scope's runtime overrides applied)."""

    def spawns_threads(
        self, scope: str | None, account_id: str | None = None, *, channel: str = "discord"
    ) -> bool: ...


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
        policy: SpawnPolicy,
        clock: Clock | None = None,
        timeout_seconds: float | None = None,
        shards: ShardSet = EVERY_SHARD,
        publish: Publish[SubagentFinished] = ignore,
        cannot_start: Callable[[AgentProfile], str | None] = lambda _profile: None,
    ) -> None:
        self._cannot_start = cannot_start
        self._db = database
        self._shards = shards
        self._spawning: set[str] = set()
        self._sessions = sessions
        self._runtime = runtime
        self._bindings = bindings
        self.delivery = delivery
        self._profiles = profiles
        self._policy = policy
        self.clock: Clock = clock or SystemClock()
        self._recovery: asyncio.Future[int] | None = None
        self._completion = TaskCompletion(
            database,
            runtime,
            bindings,
            delivery,
            name_of=self.name_of,
            clock=self.clock,
            timeout_seconds=timeout_seconds,
            publish=publish,
        )

    # -- names and profiles -------------------------------------------------------

    def display_name(self, agent: str | None) -> str:
        """The persona name ``agent`` runs under; never a free-text id (see the config's rule)."""
        return agent_display_name(self._profiles, agent)

    def name_of(self, record: SubagentRecord) -> str:
        return self.display_name(record.agent)

    def choose_agent(self, requested: str | None) -> str | None:
        """The agent to start; refuses unknown agents and agents only a handoff may start.

        Without configured profiles there is nothing to choose from: a named
        agent is refused rather than run under a persona named by the request.
        """
        if requested is not None and is_blank(requested):
            requested = None
        if not self._profiles:
            if requested is not None:
                raise SpawnRefused(
                    "no agent profiles are configured, so a subagent cannot be started as a "
                    "named agent; leave agent empty, or ask an admin to add [agents.<id>]"
                )
            return None
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

    # -- spawn ---------------------------------------------------------------------

    def request_for(
        self,
        requester: ConversationRef,
        *,
        task: str,
        agent: str | None = None,
        mode: SpawnMode = "run",
        requested_by: str | None = None,
        requested_by_name: str | None = None,
        scope: str | None = None,
    ) -> SpawnRequest:
        """What a person's spawn asked in ``requester`` is, by the flags there (no I/O):
        where spawning threads is on, a subagent in a thread of its own (the child of the
        session bound where it was asked, if any); off, a reply posted where it was asked.

        Raises:
            FeatureDisabled: a session while threads are off there (it lives in a thread).
        """
        threads = self._policy.spawns_threads(
            scope, requester.account_id, channel=requester.channel
        )
        if not threads and mode == "session":
            raise FeatureDisabled(
                channel_flag(requester.channel, _SPAWN_FLAG), "a session-mode subagent in a thread"
            )
        here = self._bindings.active_for_conversation(requester) if threads else None
        return SpawnRequest(
            task=task,
            agent=agent,
            mode=mode,
            thread=threads,
            reply=not threads,
            parent_session_key=here.target_session_key if here else None,
            requester=requester,
            requested_by=requested_by,
            requested_by_name=requested_by_name,
            scope=scope,
        )

    def check(self, request: SpawnRequest) -> str | None:
        """Refuse, before any I/O, what cannot work; returns the agent to start.

        :meth:`spawn` runs it first. A caller that must choose how to answer
        before it does any I/O (a slash command deciding whether its reply is
        public) runs it earlier as well.

        Raises:
            SpawnRefused: a task that shows nothing, a session without a thread,
                an agent that does not exist or may not be started directly.
            FeatureDisabled: a thread was asked for where spawning threads is off.
        """
        if is_blank(request.task):
            raise SpawnRefused("the task is empty; say what the subagent should do")
        if request.mode == "session" and not request.thread:
            raise SpawnRefused(
                "a session-mode subagent lives in its own thread: ask for thread=true, "
                "or use mode 'run'"
            )
        if request.reply and request.thread:
            raise SpawnRefused("a reply is posted where it was asked: it has no thread")
        requester = request.requester
        account = requester.account_id if requester is not None else None
        channel = requester.channel if requester is not None else "discord"
        if request.thread and not self._policy.spawns_threads(
            request.scope, account, channel=channel
        ):
            flag = channel_flag(channel, _SPAWN_FLAG)
            raise FeatureDisabled(flag, "a subagent in its own thread")
        agent = self.choose_agent(request.agent)
        profile = self._profiles.get(agent or "")
        why = self._cannot_start(profile) if profile is not None else None
        if why is not None:
            raise SpawnRefused(why)
        return agent

    async def spawn(self, request: SpawnRequest) -> Spawned:
        """Start a subagent on ``request.task``.

        Raises:
            SpawnRefused, FeatureDisabled: see :meth:`check`; nothing is written.
            BindingError, StoreError: the thread could not be bound (nothing is left).
        """
        agent_id = self.check(request)
        key = request.session_key or f"{SUBAGENT_PREFIX}{uuid.uuid4().hex[:12]}"
        self._spawning.add(key)  # not the recovery's to resume while it starts here
        try:
            return await self._spawn(key, agent_id, request)
        finally:
            self._spawning.discard(key)

    async def _spawn(self, key: str, agent_id: str | None, request: SpawnRequest) -> Spawned:
        now = self.clock.now()
        record = SubagentRecord(
            session_key=key,
            parent_session_key=request.parent_session_key,
            agent=agent_id,
            mode=request.mode,
            thread=request.thread,
            reply=request.reply,
            requester=request.requester,
            requested_by=request.requested_by,
            scope=request.scope,
            task=request.task,
            state="starting" if request.thread else "running",
            binding_id=None,
            created_at=now,
            updated_at=now,
        )
        tree = await self._open_child(record)
        binding = None
        try:
            async with self._db.transaction() as tx:  # the child: its row and its lease
                tx.add(repository.upsert_subagent, record)
                self._lease(tx, key)
            if request.thread:
                async with self._db.transaction() as tx:  # its thread, and the row running
                    binding = await self._bind(record, request, tx)
                    record = record.moved(
                        "running", self.clock.now(), binding_id=binding.binding_id
                    )
                    tx.add(repository.upsert_subagent, record)
                # committed: the binding is indexed and its thread introduced
        except BaseException:
            await self._discard(key)
            raise
        try:
            agent = await self._runtime.start_new(tree, leased=True)
            await agent.send(
                request.task,
                author_id=request.requested_by,
                author_name=request.requested_by_name,
            )
        except Exception as exc:
            await self._start_failed(record, binding, exc)
            raise
        self._completion.watch(record)
        return Spawned(record, binding, agent, self.display_name(agent_id))

    def _lease(self, tx: Transaction, key: str) -> None:
        """The new session's lease, in ``tx``: no other process's recovery takes the
        session over while the spawn is under way (a fresh key: nobody holds it, unless
        keys collide, which refuses the transaction)."""
        leases = self._runtime.leases
        if leases is not None:
            leases.take_in(tx, "session", key)

    async def _open_child(self, record: SubagentRecord) -> SessionTree:
        """Write the child's first events: the tree they leave is the new session's, for
        the runtime to start from as it is."""
        tree = SessionTree(record.session_key)
        items: list[AppendItem] = []
        if record.agent:
            items.append(as_item(AgentActivatedPayload(agent=record.agent, by=record.requested_by)))
        items.append(
            as_item(
                SpawnedPayload(
                    agent=record.agent,
                    mode=record.mode,
                    thread=record.thread,
                    task=record.task,
                    parent_session_key=record.parent_session_key,
                    requested_by=record.requested_by,
                )
            )
        )
        await self._sessions.append_many(tree, items)
        return tree

    async def _bind(
        self, record: SubagentRecord, request: SpawnRequest, tx: Transaction
    ) -> SessionBindingRecord:
        requester = request.requester
        if requester is None:
            raise SpawnRefused("a subagent thread needs the conversation it was asked from")
        profile = self._profiles.get(record.agent or "")
        persona = BindingPersona.of_agent(self._profiles, record.agent)
        metadata = BindingMetadata(
            persona=persona,
            agent=record.agent,
            spawn_mode=record.mode,
            requester_conversation_id=requester.conversation_id,
            thread_name=(request.title or f"{persona.name}: {record.task}")[:100],
            task=record.task,
        )
        if request.metadata:  # the caller's own keys, over ours
            metadata = BindingMetadata.model_validate({**metadata.changes(), **request.metadata})
        return await self._bindings.bind(
            record.session_key,
            "acp" if profile is not None and profile.acp else "subagent",
            requester.new_beside(),
            metadata=metadata,
            bound_by=record.requested_by,
            scope=record.scope,
            tx=tx,
        )

    async def _discard(self, key: str) -> None:
        """Remove a child that never started: its events, its row and its session lease."""
        with contextlib.suppress(ThreadboundError):
            await self._sessions.discard(key)
        leases = self._runtime.leases
        async with self._db.transaction() as tx:
            tx.add(repository.delete_subagent, key)
            if leases is not None:
                leases.release_in(tx, "session", key)
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

    async def _save(self, record: SubagentRecord) -> SubagentRecord:
        await self._db.run(repository.upsert_subagent, record)
        return record

    # -- start-up, listing, shutdown ---------------------------------------------------

    async def start(self) -> None:
        """Pick up what a previous process left: undelivered completions, unfinished tasks.

        Runs once per service; every call waits for that one run, so a caller
        (a second account's client, a test) knows the pick-up has been scheduled.
        """
        if self._recovery is None:
            self._recovery = asyncio.ensure_future(self.recover())
        await asyncio.shield(self._recovery)

    async def recover(self) -> int:
        """Take over the work of this process's guilds that no live process holds.

        At start-up that is what a previous process left; later (see
        :meth:`keep_recovering`) what a process that died leaves once its
        leases expire. Work under a live lease, and this process's own, is
        never touched. Returns how many pieces of work were taken.
        """
        taken = 0
        for row in await self.delivery.recover():
            record = await self.get(row.session_key)
            if record is None or not self._shards.owns_scope(record.scope):
                continue
            self._completion.run(self._completion.finish(record, row.completion_id))
            taken += 1
        unfinished = await self._db.run(
            lambda conn: repository.list_subagents(conn, ("starting", "running"), replies=True)
        )
        for record in unfinished:
            key = record.session_key
            if not self._shards.owns_scope(record.scope) or self._here(key):
                continue
            self._completion.run(self._resume(record))
            taken += 1
        return taken

    def _here(self, session_key: str) -> bool:
        """Whether this process already looks after the subagent."""
        return (
            session_key in self._spawning
            or self._completion.watching(session_key)
            or self._runtime.peek(session_key) is not None
        )

    async def keep_recovering(self, interval_seconds: float) -> None:
        """Run :meth:`recover` every ``interval_seconds`` until cancelled, so a dead
        process's work is finished soon after its leases expire."""
        while True:
            await self.clock.sleep(interval_seconds)
            try:
                taken = await self.recover()
            except Exception:  # a store that is briefly away: try again next time
                _log.warning("subagent.recovery_failed", exc_info=True)
                continue
            if taken:
                _log.info("subagent.recovered", count=taken)

    async def _resume(self, record: SubagentRecord) -> None:
        try:
            await self._runtime.get(record.session_key)
        except SessionBusy:
            return  # a live process runs it; if that one dies, a later recovery takes it
        self._completion.watch(record)

    def binding_of(self, session_key: str) -> SessionBindingRecord | None:
        """The session's first active binding (oldest first), if any: where it speaks."""
        return next(iter(self._bindings.active_for_session(session_key)), None)

    async def list(self, *states: SubagentState) -> list[SubagentRecord]:
        """The subagents (in ``states``, if any), oldest first; replies are no subagents
        (they show as runs without a thread) and are not among them."""
        return await self._db.run(repository.list_subagents, states)

    async def get(self, session_key: str) -> SubagentRecord | None:
        return await self._db.run(repository.get_subagent, session_key)

    async def states(self, session_keys: Sequence[str]) -> dict[str, str]:
        """The state of each subagent of ``session_keys`` that exists, in one read (the
        scheduler's runs, looked at every second)."""
        if not session_keys:
            return {}
        found: dict[str, str] = await self._db.run(repository.states_of, [*session_keys])
        return found

    async def wait_settled(self) -> None:
        """Wait until every watcher and delivery in flight is done (tests, shutdown)."""
        await self._completion.wait_settled()

    def finishing(self) -> Sequence[asyncio.Future[None]]:
        """Announcements (and their farewells) under way; see :meth:`Services.drain`."""
        return self._completion.finishing()

    async def close(self) -> None:
        await self._completion.close()
