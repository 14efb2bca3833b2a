"""The bot's domain services, built over one store, and their life together.

:func:`bot.wiring.build_services` builds them from the configuration; every chat
account, command and background task reaches the domain through this one
object. Its life: pick up what a previous process left (once), keep up while
running (renewals, sweeps, recoveries, retries), and stop cleanly: posts under
way land, running turns stop where their threads can still say so, the store
closes last.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.acp import AcpConnections
from core.agent.factory import ProfileAgentFactory
from core.artifacts.service import ArtifactService
from core.attachments import AttachmentStore
from core.bindings.adapter import AdapterRegistry, ChannelAdapter
from core.bindings.lifecycle import run_maintenance
from core.bindings.service import SessionBindingService
from core.clock import Clock
from core.config import Config
from core.events import DomainEvent, DomainEvents
from core.handoffs.activate import finish_accepted
from core.handoffs.brief import Briefs
from core.handoffs.service import HandoffService
from core.inbound import InboundRouter
from core.inbox import Inbox, InboxChannel
from core.leases import Leases
from core.logging import get_logger
from core.mcp import McpServers
from core.overrides import RuntimeOverrides
from core.providers.types import Provider
from core.routing import BoundDeliveryRouter
from core.runtime import SessionRuntime
from core.scheduler.runner import ScheduleChannel, ScheduleRunner
from core.scheduler.service import Schedules
from core.sessions.log import SessionLog
from core.sharding import ShardSet
from core.store import Database
from core.store.changes import ChangeFeed
from core.stream import EventStream
from core.subagents import CompletionSink, SinkRegistry, SubagentService
from core.transcript import Transcript, TranscriptSink

__all__ = ["ChannelAccount", "Services"]

_log = get_logger("core.services")


@dataclass(frozen=True, slots=True)
class ChannelAccount:
    """One chat account's side of the domain, plugged in once (:meth:`Services.plug`).

    Each is the port of one service: the conversations it creates (``adapter``),
    what its people say (``inbox``), where announcements go (``completions``), how an
    owed message is finished (``transcript``), where scheduled runs say they start
    (``schedules``), and what it does when the domain tells
    it something (``on_event``: a thread's hello and goodbye; returned awaitables are
    waited for by the service that published, see :mod:`core.stream`).
    """

    adapter: ChannelAdapter
    inbox: InboxChannel
    completions: CompletionSink
    transcript: TranscriptSink
    schedules: ScheduleChannel
    on_event: Callable[[DomainEvent], Awaitable[None] | None]


@dataclass(slots=True)
class Services:
    config: Config
    database: Database
    adapters: AdapterRegistry
    bindings: SessionBindingService
    router: BoundDeliveryRouter
    sessions: SessionLog
    runtime: SessionRuntime
    overrides: RuntimeOverrides
    inbound: InboundRouter
    inbox: Inbox
    transcript: Transcript
    """What bound threads are owed of agents' messages, until they show it."""
    subagents: SubagentService
    artifacts: ArtifactService
    handoffs: HandoffService
    briefs: Briefs
    mcp: McpServers
    acp: AcpConnections
    """The external agents' processes (sessions bound over ACP)."""
    agent_factory: ProfileAgentFactory
    attachments: AttachmentStore
    leases: Leases
    shards: ShardSet
    schedules: Schedules
    """Scheduled jobs: made, listed, paused, resumed and removed (``/schedule``)."""
    scheduler: ScheduleRunner
    """Claims due runs and starts each once."""
    events: DomainEvents = field(default_factory=EventStream)
    """What the services tell the channels; each account subscribes once."""
    changes: ChangeFeed | None = None
    """Other processes' changes to bindings and overrides (PostgreSQL only)."""
    providers: dict[str, Provider] = field(default_factory=dict)
    taken_over_sessions: list[str] = field(default_factory=list)
    """Sessions a provably dead process held (a killed predecessor), found at pick-up:
    their leases are expired, nothing else is done with them yet. Every shard's
    sessions, not only ours."""

    stopping: bool = False
    """A clean stop has begun (work that a stop cuts off says so, instead of failing)."""
    _picked_up: asyncio.Future[None] | None = None
    _plugged: dict[tuple[str, str], Callable[[], None]] = field(default_factory=dict)
    """Each plugged account's event subscription, by (channel, account): to undo."""
    _closed: bool = False

    async def pick_up(self) -> None:
        """What a previous process left unfinished, picked up once per process: undelivered
        completions and unfinished subagent tasks, then accepted handoffs already answered,
        and scheduled runs it had claimed. Every caller (each account's client) waits for
        that one run."""
        if self._picked_up is None:
            self._picked_up = asyncio.ensure_future(self._pick_up())
        await asyncio.shield(self._picked_up)

    async def _pick_up(self) -> None:
        await self._stop_orphaned_agents()  # before anything may start a session's agent again
        taken = await self.leases.take_over_dead()  # before recovery looks for abandoned work
        self.taken_over_sessions = [key for kind, key in taken if kind == "session"]
        # answers a previous process left cut (refused edits, then a crash), before any
        # announcement of theirs is posted under them
        finished = await self.transcript.settle_owed()
        if finished:
            _log.info("transcript.finished_at_start", messages=finished)
        await self.subagents.start()
        done = await finish_accepted(
            handoffs=self.handoffs, runtime=self.runtime, include=self.owns_session
        )
        if done:
            _log.info("handoffs.completed_at_start", count=done)
        waiting = await self.runtime.resume_waiting(self.owns_session)
        if waiting:
            _log.info("approvals.resumed_at_start", sessions=waiting)
        cut = await self._close_cut_off_turns(self.taken_over_sessions)
        if cut:
            _log.info("sessions.closed_at_start", sessions=cut)
        # runs a dead process had claimed: their leases were expired above
        await self.scheduler.pick_up()

    async def _keep_taking_over(self, interval_seconds: float) -> None:
        """Every ``interval_seconds``: the work of a process that died meanwhile (proved
        dead, not waited out) is taken over, and its cut-off turns closed."""
        while True:
            await self.bindings.clock.sleep(interval_seconds)
            try:
                taken = await self.leases.take_over_dead()
                await self._close_cut_off_turns([key for kind, key in taken if kind == "session"])
            except Exception:
                _log.warning("leases.take_over_failed", exc_info=True)
            if self.config.acp_agents:
                await self._stop_orphaned_agents()

    async def _stop_orphaned_agents(self) -> None:
        """Stop the external agents a killed bot process left running on this machine
        (only a process proven dead: see :mod:`core.acp.groups`). A failure is logged:
        the start goes on, and the next take-over round tries again."""
        try:
            await self.acp.stop_orphans()  # each one stopped is logged
        except Exception:
            _log.warning("acp.orphans_failed", exc_info=True)

    async def _close_cut_off_turns(self, sessions: Sequence[str]) -> int:
        """Start the sessions a dead process was running, so a turn it left cut off is
        closed now and its thread says so (not at the next message, nor never)."""
        started = 0
        for key in sessions:
            if self.runtime.peek(key) is not None or not await self.owns_session(key):
                continue
            try:
                await self.runtime.get(key)
            except Exception:  # one session's trouble must not stop the start-up
                _log.warning("sessions.close_failed", session_key=key, exc_info=True)
                continue
            started += 1
        return started

    async def owns_session(self, session_key: str) -> bool:
        """Whether this process answers for the session: its guild is on our shards.

        A subagent's guild is its record's scope; any other session's, that of
        the thread it is bound to. A session in no guild is shard 0's.
        """
        record = await self.subagents.get(session_key)
        if record is not None:
            return self.shards.owns_scope(record.scope)
        binding = self.subagents.binding_of(session_key)
        return self.shards.owns_scope(binding.scope if binding else None)

    async def maintain(self) -> None:
        """The upkeep a running bot needs, until cancelled: binding touches flushed and
        expiries swept, idle agents evicted (their state is in the log), leases
        renewed, a dead process's work taken over when its leases expire,
        other processes' changes heard, and scheduled runs claimed and started."""
        settings = self.config.bindings
        lease_seconds = self.leases.ttl.total_seconds()
        async with asyncio.TaskGroup() as group:
            group.create_task(self.leases.keep_alive())
            group.create_task(self._keep_taking_over(lease_seconds / 2))
            group.create_task(self.subagents.keep_recovering(lease_seconds / 2))
            group.create_task(self.inbox.keep_retrying(lease_seconds / 2))
            group.create_task(self.inbox.keep_flushing(settings.touch_flush_seconds))
            group.create_task(self.transcript.keep_flushing(settings.touch_flush_seconds))
            group.create_task(self.transcript.keep_settling(lease_seconds / 2))
            if self.changes is not None:
                group.create_task(self.changes.run())
            group.create_task(
                run_maintenance(
                    self.bindings,
                    touch_flush_seconds=settings.touch_flush_seconds,
                    sweep_seconds=settings.sweep_interval_seconds,
                )
            )
            group.create_task(self.runtime.run_maintenance())
            group.create_task(self.acp.keep_stopping_idle())
            group.create_task(self.scheduler.run())

    async def drain(self, seconds: float) -> int:
        """Let announcements and binding ends already under way finish, for up to
        ``seconds`` (on the services' clock); returns how many were waited for.

        Called at shutdown before the chat clients close: a farewell posted after
        its client's HTTP session is gone is lost (the announcement is safe in the
        outbox either way). New work may still start meanwhile; it is not waited for.
        """
        announcements, ends = self.subagents.finishing(), self.bindings.ending()
        # a run's announcement includes its binding's end
        pending: list[Awaitable[Any]] = [*announcements, *ends]
        if not pending:
            return 0
        _log.info(
            "bot.draining",
            announcements=len(announcements),
            binding_ends=len(ends),
            seconds=seconds,
        )
        await self.within(seconds, pending)
        return len(pending)

    async def stop_turns(self, seconds: float, shown: Sequence[Awaitable[Any]]) -> int:
        """At a clean stop, while the chat clients are still connected: stop the running
        turns (their queues kept) so their threads say so, and wait up to ``seconds``
        for ``shown`` (each account's Discord work: what the threads show, a brief's
        answer). Watchers of subagent tasks stop first, so a stopped turn is never
        announced as the task's end. Returns how many turns were stopped."""
        self.stopping = True
        await self.subagents.close()
        stopped = await self.runtime.interrupt()
        await self.within(seconds, [asyncio.ensure_future(work) for work in shown])
        return stopped

    async def within(self, seconds: float, pending: Sequence[Awaitable[Any]]) -> None:
        """Wait for ``pending`` for up to ``seconds`` on the services' clock."""
        futures = [asyncio.ensure_future(p) for p in pending]
        if not futures:
            return
        timer = asyncio.ensure_future(self.bindings.clock.sleep(seconds))
        everything = asyncio.ensure_future(asyncio.wait(futures))
        try:
            await asyncio.wait({timer, everything}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            everything.cancel()
        unfinished = sum(1 for f in futures if not f.done())
        if unfinished:
            _log.warning("bot.drain_timed_out", unfinished=unfinished, seconds=seconds)

    @property
    def clock(self) -> Clock:
        """The services' one clock (a fake one in tests)."""
        return self.bindings.clock

    def plug(self, account: ChannelAccount) -> None:
        """Plug a chat account in: one place for every port it gives and the one event
        subscription it needs. A reconnected client's account takes the place of the
        one before it for the same (channel, account)."""
        self.adapters.register(account.adapter, replace=True)
        self.inbox.channels.register(account.inbox, replace=True)
        self.sinks.register(account.completions, replace=True)
        self.transcript.sinks.register(account.transcript, replace=True)
        self.scheduler.channels.register(account.schedules, replace=True)
        key = (account.adapter.channel.lower(), account.adapter.account_id)
        earlier = self._plugged.pop(key, None)
        if earlier is not None:
            earlier()  # the account it replaces hears nothing more
        self._plugged[key] = self.events.subscribe(account.on_event)

    @property
    def sinks(self) -> SinkRegistry:
        """Where completion announcements are posted, one sink per (channel, account)."""
        return self.subagents.delivery.sinks

    async def close(self) -> None:
        """Stop turns (keeping queues), land session writes, flush touches, give the
        leases back, close the store. Closing twice does nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.scheduler.close()  # runs being started stop; their claims are found again
            await self.subagents.close()
            await self.runtime.close()
            await self.acp.close()  # after the turns stopped: each agent was told to cancel
            await self.sessions.close()
            await self.mcp.close()
            for provider in self.providers.values():
                closing = getattr(provider, "aclose", None)
                if closing is not None:
                    await closing()
            await self.bindings.close()
            await self.transcript.close()
            await self._flush_cursors()
            await self.leases.close()  # handed over at once, not when they expire
        finally:
            await self.database.close()

    async def _flush_cursors(self) -> None:
        try:
            await self.inbox.flush_cursors()
        except Exception:  # only costs a re-read of some threads at the next start
            _log.warning("inbox.cursor_flush_failed", exc_info=True)
