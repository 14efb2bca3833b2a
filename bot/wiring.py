"""Wiring: config -> store -> services, built once and passed down.

No globals: everything the bot needs hangs off :class:`Services`, which the
entry point builds before connecting and closes after disconnecting, in the
reverse order: running turns stop (queues kept), session writes land, touches
are flushed, then the store closes.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from core.acp import AcpConnections, AgentGroups, missing_command
from core.agent import ToolRegistry
from core.agent.builtin_tools import (
    ArtifactHandler,
    ScheduleWakeupArgs,
    SpawnSubagentArgs,
    http_get_tool,
    sleep_tool,
)
from core.agent.factory import ProfileAgentFactory
from core.agent.mcp_tools import referenced_tools
from core.agent.tools import ToolContext
from core.agent.usage import ModelInfo
from core.artifacts import builtin as _builtin_artifacts
from core.artifacts.service import ArtifactService, artifact_tool_handler
from core.attachments import AttachmentStore
from core.bindings.adapter import AdapterRegistry
from core.bindings.service import SessionBindingService
from core.clock import Clock, SystemClock
from core.config import AgentProfile, Config
from core.errors import ProviderError
from core.events import DomainEvents
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
from core.scheduler.runner import ScheduleRunner
from core.scheduler.service import Schedules
from core.services import Services
from core.sessions.log import SessionLog
from core.sharding import ShardSet
from core.store import Database, open_database
from core.store.changes import ChangeFeed
from core.store.liveness import Liveness, liveness_for
from core.stream import EventStream
from core.subagents import CompletionDelivery, SinkRegistry, SubagentService
from core.subagents.tool import spawn_tool_handler
from core.transcript import Transcript

del _builtin_artifacts  # imported for its registrations (brief, note)

_log = get_logger("bot.wiring")

__all__ = ["NoProvider", "Services", "build_services"]


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

    In order: the tool servers the file names are checked (before anything needs
    closing but them), the store opens, then :func:`_services` builds the domain
    over it; whatever fails closes what was opened.
    """
    clock = clock or SystemClock()
    env = os.environ if env is None else env
    providers: dict[str, Provider] = {
        name: build_provider(cfg, env, name=name) for name, cfg in config.providers.items()
    }
    mcp = McpServers(config.mcp_servers, env=env, clock=clock, cwd=config.base_dir)
    try:
        # Tool names the file spells out must exist: one clear line now, not a
        # confused model later. A server that cannot start is only logged.
        source = str(config.config_path) if config.config_path else "<defaults>"
        await mcp.check(referenced_tools(_tool_lists(config), config.mcp_servers), source=source)
        database = await open_database(
            config.store_url(),
            busy_timeout_ms=config.store.busy_timeout_ms,
            pg_schema=config.store.schema_ or None,
            single_process=single_process,
        )
    except BaseException:
        await mcp.close()
        raise
    liveness = liveness_for(database)
    try:
        return await _services(
            config,
            _Opened(database, liveness, mcp, providers, clock, env),
            provider=provider,
            provider_info=provider_info,
        )
    except BaseException:
        await liveness.close()
        await database.close()
        await mcp.close()
        raise


@dataclass(frozen=True, slots=True)
class _Opened:
    """What :func:`build_services` opened before the domain is built over it."""

    database: Database
    liveness: Liveness
    mcp: McpServers
    providers: dict[str, Provider]
    clock: Clock
    env: Mapping[str, str]


async def _services(
    config: Config,
    opened: _Opened,
    *,
    provider: Provider | None,
    provider_info: ModelInfo | None,
) -> Services:
    """The domain over an open store, each service after those it needs: who may act
    and where (leases, flags, bindings), the agents (sessions, external agents, the
    factory, the runtime), what people say (the router, the inbox), and the work
    seen through (subagents, artifacts, handoffs, what threads are owed)."""
    database, clock, env, mcp = opened.database, opened.clock, opened.env, opened.mcp
    providers = opened.providers
    default: Provider = next(iter(providers.values()), None) or NoProvider()
    attachments = AttachmentStore(config.attachments_path())
    shards = ShardSet.of(config.discord.shard_count, config.discord.shard_ids)
    events: DomainEvents = EventStream()

    # -- who may act, and where
    leases = Leases(
        database, ttl_seconds=config.store.lease_seconds, clock=clock, liveness=opened.liveness
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

    # -- the agents
    sessions = SessionLog(database, clock=clock)
    groups = AgentGroups(database, owner=leases.owner, liveness=opened.liveness, clock=clock)
    acp = AcpConnections(config, env=env, clock=clock, load_image=attachments.load, groups=groups)
    events.subscribe(acp.on_event)  # an unbound thread's agent process stops

    # The bot-acting tools' ports: the services they reach are built below, and
    # found when a tool runs (always after this function has returned).
    async def spawn(args: SpawnSubagentArgs, context: ToolContext) -> str:
        return await spawn_tool_handler(subagents)(args, context)

    async def wakeup(args: ScheduleWakeupArgs, context: ToolContext) -> str:
        added = await schedules.wakeup(context.session_key, args.after, args.note)
        return f"scheduled: {added.sentence} It comes back here as a new turn with your note."

    def artifacts_for(profile: AgentProfile) -> ArtifactHandler:
        return _artifact_handler(artifacts, runtime)(profile)

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
        external=acp,
        spawn=spawn,
        artifacts=artifacts_for,
        wakeup=wakeup,
    )
    runtime = SessionRuntime(
        sessions,
        factory,
        clock=clock,
        idle_evict_seconds=config.agent.idle_evict_seconds,
        leases=leases,
        publish=events.publish,
    )

    # -- what people say, and where completions go
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

    # -- the work seen through
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
        cannot_start=partial(_cannot_start, config),
    )
    artifacts = ArtifactService(sessions)
    handoffs = HandoffService(database, sessions, clock=clock)
    transcript = Transcript(database, bindings)
    events.subscribe(transcript.on_event)
    schedules = Schedules(
        database, bindings, subagents, config.scheduler, policy=overrides, clock=clock
    )
    scheduler = ScheduleRunner(
        database,
        schedules,
        inbox=inbox,
        router=router,
        runtime=runtime,
        subagents=subagents,
        leases=leases,
        policy=overrides,
        settings=config.scheduler,
        shards=shards,
        clock=clock,
    )
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
        transcript=transcript,
        subagents=subagents,
        artifacts=artifacts,
        handoffs=handoffs,
        briefs=Briefs(runtime, artifacts, handoffs, config.agents),
        mcp=mcp,
        acp=acp,
        agent_factory=factory,
        attachments=attachments,
        leases=leases,
        shards=shards,
        schedules=schedules,
        scheduler=scheduler,
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


def _cannot_start(config: Config, profile: AgentProfile) -> str | None:
    """Why an agent cannot be spawned on this machine (an external agent's program is
    missing), said before a thread is made for it."""
    return missing_command(config, profile.acp) if profile.acp else None


def _tool_lists(config: Config) -> list[list[str]]:
    """Every ``tools`` list of the file: ``[agent] tools`` and each profile's."""
    lists = [profile.tools for profile in config.agents.values()]
    if config.agent.tools is not None:
        lists.append(config.agent.tools)
    return lists


def _artifact_handler(
    artifacts: ArtifactService, runtime: SessionRuntime
) -> Callable[[AgentProfile], ArtifactHandler]:
    """The emit_artifact handler per profile: the types it allows, the caller's live tree."""

    def tree_of(context: Any) -> Any:
        agent = runtime.peek(context.session_key)
        if agent is None:  # a tool runs inside a turn: its agent is resident
            raise ProviderError(f"session {context.session_key!r} is not running")
        return agent.tree

    def handler_for(profile: AgentProfile) -> ArtifactHandler:
        return artifact_tool_handler(
            artifacts, get_tree=tree_of, allowed_types=profile.artifact_types
        )

    return handler_for
