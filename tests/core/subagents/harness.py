"""A subagent service over a real store, a recording adapter and a recording sink."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from core.agent.builtin_tools import sleep_tool
from core.agent.factory import ProfileAgentFactory
from core.agent.tools import ToolRegistry
from core.bindings.adapter import AdapterRegistry
from core.bindings.records import ConversationRef, SessionBindingRecord
from core.bindings.service import SessionBindingService
from core.clock import FakeClock
from core.config import Config, parse_config
from core.errors import DeliveryError
from core.leases import Leases
from core.providers.scripted import ScriptedProvider, Step
from core.routing import BoundDeliveryRouter
from core.runtime import SessionRuntime
from core.sessions.log import SessionLog
from core.store import Database
from core.stream import EventStream
from core.subagents import CompletionDelivery, Posted, SinkRegistry, SubagentService
from core.subagents.service import SpawnRequest
from core.subagents.tool import spawn_tool_handler
from tests.fixtures.adapters import RecordingAdapter
from tests.fixtures.bindings import conv

CHANNEL = conv("100")
"""Where spawns are asked from (a plain channel)."""


@dataclass
class RecordingSink:
    """Records every post; ``fail`` makes the next posts raise DeliveryError."""

    channel: str = "discord"
    account_id: str = "main"
    bound: list[tuple[str, str]] = field(default_factory=list)
    fallback: list[tuple[str, str]] = field(default_factory=list)
    fail: int = 0
    fail_code: int | None = None
    """The channel's own error code for those failures (None: an outage, a rate limit)."""
    gate: asyncio.Event | None = None
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    lookups: int = 0

    async def post_bound(self, binding: SessionBindingRecord, content: str) -> Posted:
        return await self._post(self.bound, binding.conversation.conversation_id, content)

    async def post_to(self, conversation: ConversationRef, content: str) -> Posted:
        return await self._post(self.fallback, conversation.conversation_id, content)

    async def _post(self, into: list, where: str, content: str) -> Posted:
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            self.fail -= 1
            raise DeliveryError("the channel answered 503", code=self.fail_code)
        into.append((where, content))
        return Posted(str(len(self.bound) + len(self.fallback)), "webhook")

    async def find_posted(
        self, conversation: ConversationRef, content: str, since: Any
    ) -> Posted | None:
        self.lookups += 1
        for index, (where, text) in enumerate(self.posts):
            if where == conversation.conversation_id and text == content:
                return Posted(str(index + 1), "webhook")
        return None

    @property
    def posts(self) -> list[tuple[str, str]]:
        return self.bound + self.fallback


@dataclass
class Harness:
    database: Database
    clock: FakeClock
    provider: ScriptedProvider
    sessions: SessionLog
    bindings: SessionBindingService
    adapter: RecordingAdapter
    runtime: SessionRuntime
    sink: RecordingSink
    service: SubagentService
    threads: dict[str, bool]

    def request(self, task: str = "find out", **options: Any) -> SpawnRequest:
        options.setdefault("requester", CHANNEL)
        options.setdefault("requested_by", "u1")
        options.setdefault("scope", "g1")
        return SpawnRequest(task=task, **options)

    async def settle(self) -> None:
        await asyncio.wait_for(self.service.wait_settled(), 10)

    async def close(self) -> None:
        await self.service.close()
        await self.runtime.close()
        await self.sessions.close()
        await self.bindings.close()


def config(agents: dict[str, Any] | None = None, timeout: float = 0) -> Config:
    return parse_config(
        {"agents": agents or {}, "agent": {"subagent_timeout_seconds": timeout}}, env={}
    )


async def harness(
    database: Database,
    clock: FakeClock,
    steps: Any = (),
    *,
    agents: dict[str, Any] | None = None,
    task_timeout: float = 0,
    sink: RecordingSink | None = None,
    leases: Leases | None = None,
) -> Harness:
    """``leases``: this process's, as the bot has them (None: a single process, no leases
    on sessions; the outbox then takes its own)."""
    cfg = config(agents, task_timeout)
    provider = ScriptedProvider(steps if callable(steps) else list(steps))
    adapters = AdapterRegistry()
    adapter = RecordingAdapter()
    adapters.register(adapter)
    publish = adapter.watch(EventStream())
    bindings = SessionBindingService(database, adapters=adapters, clock=clock, publish=publish)
    await bindings.start()
    sessions = SessionLog(database, clock=clock)

    async def spawn(args: Any, context: Any) -> str:  # the service is built below
        return await spawn_tool_handler(service)(args, context)

    factory = ProfileAgentFactory(cfg, {}, provider, ToolRegistry([sleep_tool(clock)]), spawn=spawn)
    runtime = SessionRuntime(sessions, factory, clock=clock, leases=leases)
    router = BoundDeliveryRouter(bindings, clock=clock)
    sinks = SinkRegistry()
    sink = sink or RecordingSink()
    sinks.register(sink)
    threads = {"allowed": True}
    service = SubagentService(
        database,
        sessions,
        runtime,
        bindings,
        CompletionDelivery(
            database,
            router,
            sinks,
            name_of=lambda r: cfg.agents[r.agent].display_name if r.agent else "Subagent",
            clock=clock,
            retry_seconds=1,
            max_attempts=3,
            leases=leases,
        ),
        profiles=cfg.agents,
        policy=_Threads(threads),
        clock=clock,
        timeout_seconds=task_timeout or None,
    )
    return Harness(
        database, clock, provider, sessions, bindings, adapter, runtime, sink, service, threads
    )


__all__ = ["CHANNEL", "Harness", "RecordingSink", "Step", "harness"]


class _Threads:
    """The spawn policy a test switches: ``threads["allowed"]``."""

    def __init__(self, threads: dict[str, bool]) -> None:
        self._threads = threads

    def spawns_threads(
        self, scope: str | None, account_id: str | None = None, *, channel: str = "discord"
    ) -> bool:
        return self._threads["allowed"]
