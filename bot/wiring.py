"""Wiring: config -> store -> services, built once and passed down.

No globals: everything the bot needs hangs off :class:`Services`, which the
entry point builds before connecting and closes after disconnecting, in the
reverse order: running turns stop (queues kept), session writes land, touches
are flushed, then the store closes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.agent import ToolRegistry
from core.agent.builtin_tools import http_get_tool, sleep_tool
from core.agent.factory import ProfileAgentFactory
from core.agent.mcp_tools import referenced_tools
from core.agent.usage import ModelInfo
from core.artifacts import builtin as _builtin_artifacts
from core.artifacts.service import ArtifactService, artifact_tool_handler
from core.attachments import AttachmentStore
from core.bindings.adapter import AdapterRegistry
from core.bindings.lifecycle import run_maintenance
from core.bindings.service import SessionBindingService
from core.clock import Clock, SystemClock
from core.config import AgentProfile, Config
from core.errors import ProviderError
from core.events import DomainEvents
from core.handoffs.activate import finish_accepted
from core.handoffs.brief import Briefs
from core.handoffs.service import HandoffService
from core.inbound import InboundRouter
from core.inbox import Inbox
from core.leases import Leases
from core.logging import get_logger
from core.mcp import McpServers
from core.overrides import RuntimeOverrides
from core.providers.config import build_provider
from core.providers.types import ChatMessage, Provider, ProviderEvent, ToolSpec
from core.routing import BoundDeliveryRouter
from core.runtime import SessionRuntime
from core.sessions.log import SessionLog
from core.sharding import ShardSet
from core.store import Database, open_database
from core.store.changes import ChangeFeed
from core.store.liveness import liveness_for
from core.stream import EventStream
from core.subagents import CompletionDelivery, SinkRegistry, SubagentService
from core.subagents.tool import spawn_tool_handler

del _builtin_artifacts  # imported for its registrations (brief, note)

_log = get_logger("bot.wiring")

__all__ = ["NoProvider", "Services", "build_services"]


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
    subagents: SubagentService
    artifacts: ArtifactService
    handoffs: HandoffService
    briefs: Briefs
    mcp: McpServers
    agent_factory: ProfileAgentFactory
    attachments: AttachmentStore
    leases: Leases
    shards: ShardSet
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
    _closed: bool = False

    async def pick_up(self) -> None:
        """What a previous process left unfinished, picked up once per process: undelivered
        completions and unfinished subagent tasks, then accepted handoffs already answered.
        Every caller (each account's client) waits for that one run."""
        if self._picked_up is None:
            self._picked_up = asyncio.ensure_future(self._pick_up())
        await asyncio.shield(self._picked_up)

    async def _pick_up(self) -> None:
        taken = await self.leases.take_over_dead()  # before recovery looks for abandoned work
        self.taken_over_sessions = [key for kind, key in taken if kind == "session"]
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
        renewed, a dead process's work taken over when its leases expire, and
        other processes' changes heard."""
        settings = self.config.bindings
        lease_seconds = self.leases.ttl.total_seconds()
        async with asyncio.TaskGroup() as group:
            group.create_task(self.leases.keep_alive())
            group.create_task(self._keep_taking_over(lease_seconds / 2))
            group.create_task(self.subagents.keep_recovering(lease_seconds / 2))
            group.create_task(self.inbox.keep_retrying(lease_seconds / 2))
            group.create_task(self.inbox.keep_flushing(settings.touch_flush_seconds))
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
            await self.subagents.close()
            await self.runtime.close()
            await self.sessions.close()
            await self.mcp.close()
            for provider in self.providers.values():
                closing = getattr(provider, "aclose", None)
                if closing is not None:
                    await closing()
            await self.bindings.close()
            await self._flush_cursors()
            await self.leases.close()  # handed over at once, not when they expire
        finally:
            await self.database.close()

    async def _flush_cursors(self) -> None:
        try:
            await self.inbox.flush_cursors()
        except Exception:  # only costs a re-read of some threads at the next start
            _log.warning("inbox.cursor_flush_failed", exc_info=True)


class NoProvider:
    """Stands in when no ``[providers.<name>]`` is configured; every turn says what to add."""

    name = "none"

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        model: str | None = None,
    ) -> AsyncGenerator[ProviderEvent, None]:
        raise ProviderError(
            "no model provider is configured: add a [providers.<name>] table "
            "(base_url, model, api_key_env) to config.toml"
        )
        yield  # pragma: no cover - makes this an async generator


def default_tools(config: Config, clock: Clock) -> ToolRegistry:
    return ToolRegistry([sleep_tool(clock), http_get_tool(config.agent.http_get_allowed_hosts)])


async def build_services(
    config: Config,
    *,
    clock: Clock | None = None,
    env: Mapping[str, str] | None = None,
    provider: Provider | None = None,
    provider_info: ModelInfo | None = None,
    single_process: bool = False,
) -> Services:
    """Open the store (migrating it) and build the services over it, indexes loaded.

    ``provider`` replaces the configured one (tests, the playground's demo model);
    otherwise the first ``[providers.<name>]`` table is used; ``provider_info`` says
    what that replacement can do where no table does (the demo model reads images,
    by naming them). ``single_process``
    (the bot's own start) refuses a SQLite file another bot process runs on.
    """
    clock = clock or SystemClock()
    env = os.environ if env is None else env
    providers: dict[str, Provider] = {
        name: build_provider(cfg, env, name=name) for name, cfg in config.providers.items()
    }
    default: Provider = next(iter(providers.values()), None) or NoProvider()
    mcp = McpServers(config.mcp_servers, env=env, clock=clock, cwd=config.base_dir)
    attachments = AttachmentStore(config.attachments_path())
    try:
        # Tool names the file spells out must exist: one clear line now, not a
        # confused model later. A server that cannot start is only logged.
        source = str(config.config_path) if config.config_path else "<defaults>"
        await mcp.check(referenced_tools(_tool_lists(config), config.mcp_servers), source=source)
    except BaseException:
        await mcp.close()
        raise
    shards = ShardSet.of(config.discord.shard_count, config.discord.shard_ids)
    database = await open_database(
        config.store_url(),
        busy_timeout_ms=config.store.busy_timeout_ms,
        pg_schema=config.store.schema_ or None,
        single_process=single_process,
    )
    liveness = liveness_for(database)
    try:
        events: DomainEvents = EventStream()
        leases = Leases(
            database, ttl_seconds=config.store.lease_seconds, clock=clock, liveness=liveness
        )
        await leases.start()
        adapters = AdapterRegistry()
        overrides = RuntimeOverrides(database, config, clock=clock)
        await overrides.start()
        bindings = SessionBindingService(
            database,
            adapters=adapters,
            clock=clock,
            windows=overrides,
            shards=shards,
            publish=events.publish,
        )
        await bindings.start()
        sessions = SessionLog(database, clock=clock)
        factory = ProfileAgentFactory(
            config,
            providers,
            default,
            default_tools(config, clock),
            provider_override=provider,
            override_info=provider_info,
            mcp=mcp,
            clock=clock,
            load_image=attachments.load,
        )
        runtime = SessionRuntime(
            sessions,
            factory,
            clock=clock,
            idle_evict_seconds=config.agent.idle_evict_seconds,
            leases=leases,
            publish=events.publish,
        )
        router = BoundDeliveryRouter(bindings, clock=clock)
        inbound = InboundRouter(bindings, runtime)
        inbox = Inbox(
            database,
            inbound,
            bindings,
            attachments=attachments,
            text_max_bytes=config.agent.attachment_text_max_bytes,
            clock=clock,
            fetch_timeout_seconds=config.agent.attachment_fetch_timeout_seconds,
            resident=lambda key: runtime.peek(key) is not None,
        )
        subagents = SubagentService(
            database,
            sessions,
            runtime,
            bindings,
            CompletionDelivery(
                database,
                router,
                SinkRegistry(),
                name_of=lambda r: config.display_name(r.agent),
                clock=clock,
                leases=leases,
            ),
            profiles=config.agents,
            policy=overrides,
            clock=clock,
            timeout_seconds=config.agent.subagent_timeout_seconds or None,
            shards=shards,
            publish=events.publish,
        )
        artifacts = ArtifactService(sessions)
        handoffs = HandoffService(database, sessions, clock=clock)
        factory.attach_spawn(spawn_tool_handler(subagents))
        factory.attach_artifacts(_artifact_handler(artifacts, runtime))
    except BaseException:
        await liveness.close()
        await database.close()
        await mcp.close()
        raise
    return Services(
        config=config,
        database=database,
        adapters=adapters,
        bindings=bindings,
        router=router,
        sessions=sessions,
        runtime=runtime,
        overrides=overrides,
        inbound=inbound,
        inbox=inbox,
        subagents=subagents,
        artifacts=artifacts,
        handoffs=handoffs,
        briefs=Briefs(runtime, artifacts, handoffs, config.agents),
        mcp=mcp,
        agent_factory=factory,
        attachments=attachments,
        leases=leases,
        shards=shards,
        changes=_change_feed(config, database, bindings, overrides),
        providers=providers,
        events=events,
    )


def _change_feed(
    config: Config,
    database: Database,
    bindings: SessionBindingService,
    overrides: RuntimeOverrides,
) -> ChangeFeed | None:
    """On PostgreSQL, what other processes change reaches this one's memory."""
    if database.dialect != "postgresql":
        return None  # SQLite: this is the only process
    feed = ChangeFeed(
        config.store_url(), schema=config.store.schema_ or None, origin=database.origin
    )

    async def binding_changed(message: Mapping[str, Any]) -> None:
        await bindings.reload_binding(str(message.get("id")))

    async def override_changed(_message: Mapping[str, Any]) -> None:
        await overrides.reload()

    feed.on("binding", binding_changed)
    feed.on("override", override_changed)
    feed.on_resync(bindings.reload)
    feed.on_resync(overrides.reload)
    return feed


def _tool_lists(config: Config) -> list[list[str]]:
    """Every ``tools`` list of the file: ``[agent] tools`` and each profile's."""
    lists = [profile.tools for profile in config.agents.values()]
    if config.agent.tools is not None:
        lists.append(config.agent.tools)
    return lists


def _artifact_handler(
    artifacts: ArtifactService, runtime: SessionRuntime
) -> Callable[[AgentProfile], Any]:
    """The emit_artifact handler per profile: the types it allows, the caller's live tree."""

    def tree_of(context: Any) -> Any:
        agent = runtime.peek(context.session_key)
        if agent is None:  # a tool runs inside a turn: its agent is resident
            raise ProviderError(f"session {context.session_key!r} is not running")
        return agent.tree

    def handler_for(profile: AgentProfile) -> Any:
        return artifact_tool_handler(
            artifacts, get_tree=tree_of, allowed_types=profile.artifact_types
        )

    return handler_for
