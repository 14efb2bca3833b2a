"""Wiring: config -> store -> services, built once and passed down.

No globals: everything the bot needs hangs off :class:`Services`, which the
entry point builds before connecting and closes after disconnecting, in the
reverse order: running turns stop (queues kept), session writes land, touches
are flushed, then the store closes.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from core.agent import Agent, AgentSettings, ToolRegistry
from core.agent.builtin_tools import http_get_tool, sleep_tool
from core.bindings.adapter import AdapterRegistry
from core.bindings.records import ConversationRef
from core.bindings.service import LifecycleDefaults, SessionBindingService
from core.clock import Clock, SystemClock
from core.config import Config, resolve_thread_bindings
from core.errors import ProviderError
from core.inbound import InboundRouter
from core.overrides import RuntimeOverrides
from core.providers.config import build_provider
from core.providers.types import ChatMessage, Provider, ProviderEvent, ToolSpec
from core.routing import BoundDeliveryRouter
from core.runtime import AgentFactory, SessionRuntime
from core.sessions.log import SessionLog
from core.sessions.tree import SessionTree
from core.store import Database, open_database

__all__ = ["NoProvider", "Services", "build_services", "lifecycle_defaults_for"]


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
    providers: dict[str, Provider] = field(default_factory=dict)

    async def close(self) -> None:
        """Stop turns (keeping queues), land session writes, flush touches, close the store."""
        try:
            await self.runtime.close()
            await self.sessions.close()
            for provider in self.providers.values():
                closing = getattr(provider, "aclose", None)
                if closing is not None:
                    await closing()
            await self.bindings.close()
        finally:
            await self.database.close()


class NoProvider:
    """Stands in when no ``[providers.<name>]`` is configured; every turn says what to add."""

    name = "none"

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        model: str | None = None,
    ) -> AsyncIterator[ProviderEvent]:
        raise ProviderError(
            "no model provider is configured: add a [providers.<name>] table "
            "(base_url, model, api_key_env) to config.toml"
        )
        yield  # pragma: no cover - makes this an async generator


def lifecycle_defaults_for(config: Config) -> LifecycleDefaults:
    """Idle timeout and max age of a new binding, from the flags of its account."""
    known = set(config.account_ids())

    def defaults(conversation: ConversationRef) -> tuple[int, int]:
        account = conversation.account_id if conversation.account_id in known else None
        settings = resolve_thread_bindings(config, channel=conversation.channel, account_id=account)
        return settings.idle_timeout_ms, settings.max_age_ms

    return defaults


def agent_factory(config: Config, provider: Provider, tools: ToolRegistry) -> AgentFactory:
    """Every session's agent: the configured provider, the [agent] settings, the tools."""
    settings = AgentSettings.from_config(config.agent)

    def build(tree: SessionTree, log: SessionLog, on_crash: Callable) -> Agent:
        return Agent(tree, log, provider, tools, settings, on_crash=on_crash)

    return build


def default_tools(config: Config, clock: Clock) -> ToolRegistry:
    return ToolRegistry([sleep_tool(clock), http_get_tool(config.agent.http_get_allowed_hosts)])


async def build_services(
    config: Config,
    *,
    clock: Clock | None = None,
    env: Mapping[str, str] | None = None,
    provider: Provider | None = None,
) -> Services:
    """Open the store (migrating it) and build the services over it, indexes loaded.

    ``provider`` replaces the configured one (tests, the playground's demo model);
    otherwise the first ``[providers.<name>]`` table is used.
    """
    clock = clock or SystemClock()
    env = os.environ if env is None else env
    providers = {
        name: build_provider(cfg, env, name=name) for name, cfg in config.providers.items()
    }
    chosen = provider or next(iter(providers.values()), None) or NoProvider()
    database = await open_database(config.store_url(), busy_timeout_ms=config.store.busy_timeout_ms)
    try:
        adapters = AdapterRegistry()
        bindings = SessionBindingService(
            database,
            adapters=adapters,
            clock=clock,
            lifecycle_defaults=lifecycle_defaults_for(config),
        )
        await bindings.start()
        overrides = RuntimeOverrides(database, config, clock=clock)
        await overrides.start()
        sessions = SessionLog(database, clock=clock)
        runtime = SessionRuntime(
            sessions,
            agent_factory(config, chosen, default_tools(config, clock)),
            clock=clock,
            idle_evict_seconds=config.agent.idle_evict_seconds,
        )
    except BaseException:
        await database.close()
        raise
    return Services(
        config=config,
        database=database,
        adapters=adapters,
        bindings=bindings,
        router=BoundDeliveryRouter(bindings, clock=clock),
        sessions=sessions,
        runtime=runtime,
        overrides=overrides,
        inbound=InboundRouter(bindings, runtime),
        providers=providers,
    )
