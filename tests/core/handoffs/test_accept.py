"""Handoffs.accept / reject over a real store: who speaks where once a handoff is decided."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

import core.artifacts.builtin as _builtin
from core.agent.agent import Agent
from core.agent.assignment import AGENT_ACTIVATED
from core.agent.builtin_tools import sleep_tool
from core.agent.factory import ProfileAgentFactory
from core.agent.tools import ToolRegistry
from core.artifacts import ArtifactService
from core.bindings.adapter import AdapterRegistry
from core.bindings.records import ConversationRef, SessionBindingRecord
from core.bindings.service import SessionBindingService
from core.clock import FakeClock
from core.config import parse_config
from core.errors import BindingError
from core.handoffs import HandoffRecord, HandoffService
from core.handoffs.accept import HANDED_OFF, Handoffs
from core.providers.scripted import ScriptedProvider, Step
from core.runtime import SessionRuntime
from core.sessions import SessionLog
from core.store import Database
from core.stream import EventStream
from tests.fixtures.adapters import RecordingAdapter
from tests.fixtures.bindings import conv

del _builtin  # registers the brief type

KEY = "agent:main:subagent:accept"
TIMEOUT = 5


def agents(thread: str) -> dict[str, Any]:
    return {
        "scout": {"display_name": "Scout", "handoff_to": ["writer"]},
        "writer": {
            "display_name": "Writer",
            "avatar_url": "https://example.test/w.png",
            "user_startable": False,
            "handoff_thread": thread,
        },
    }


class Adapter(RecordingAdapter):
    """Refuses to create conversations while ``refuse`` is set (Discord said no)."""

    refuse = False

    async def create_conversation(
        self, requested: ConversationRef, *, target_session_key: str, metadata: dict[str, Any]
    ) -> ConversationRef:
        if self.refuse:
            raise BindingError("Discord could not create a thread; try again in a moment.")
        return await super().create_conversation(
            requested, target_session_key=target_session_key, metadata=metadata
        )


@dataclass
class World:
    log: SessionLog
    runtime: SessionRuntime
    handoffs: HandoffService
    artifacts: ArtifactService
    bindings: SessionBindingService
    adapter: Adapter
    binding: SessionBindingRecord
    use: Handoffs
    shown: list[tuple[SessionBindingRecord, Agent, int]]
    provider: ScriptedProvider

    def show(self, record: SessionBindingRecord, agent: Agent) -> None:
        self.shown.append((record, agent, len(self.provider.calls)))


async def build(database: Database, clock: FakeClock, thread: str) -> World:
    config = parse_config({"agents": agents(thread)}, env={})
    provider = ScriptedProvider([Step(text="found it"), Step(text="written")])
    log = SessionLog(database, clock=clock)
    factory = ProfileAgentFactory(config, {}, provider, ToolRegistry([sleep_tool(clock)]))
    runtime = SessionRuntime(log, factory, clock=clock)
    handoffs = HandoffService(database, log, clock=clock)
    registry = AdapterRegistry()
    adapter = Adapter()
    registry.register(adapter)
    bindings = SessionBindingService(
        database, adapters=registry, clock=clock, publish=adapter.watch(EventStream())
    )
    await bindings.start()
    binding = await bindings.bind(
        KEY,
        "session",
        conv("t1", "c1"),
        {"persona": {"name": "Scout"}, "agent": "scout"},
        bound_by="u1",
        scope="g1",
    )
    tree = await log.load(KEY)
    await log.append(tree, AGENT_ACTIVATED, {"agent": "scout", "by": "u1"})
    use = Handoffs(runtime, handoffs, bindings, config.agents)
    return World(
        log, runtime, handoffs, ArtifactService(log), bindings, adapter, binding, use, [], provider
    )


async def offered(w: World) -> HandoffRecord:
    """The scout answered once, and offers the writer a brief."""
    agent = await w.runtime.get(KEY)
    await agent.send("look around", author_id="u1")
    async with asyncio.timeout(TIMEOUT):
        await agent.wait_idle()
    event = await w.artifacts.produce_confirmed(
        agent.tree,
        type="brief",
        data={"title": "Found", "summary": "It is there.", "next_agent": "writer"},
        origin=[e.node_id for e in agent.tree.said()],
        confirmed_by="u1",
        agent="scout",
    )
    return await w.handoffs.offer(
        agent.tree,
        from_agent="scout",
        to_agent="writer",
        artifact_id=event.payload["artifact_id"],
        actor="u1",
    )


@pytest.fixture
async def same(database: Database, clock: FakeClock) -> AsyncIterator[World]:
    w = await build(database, clock, "same")
    yield w
    await w.runtime.close()
    await w.log.close()
    await w.bindings.close()


@pytest.fixture
async def new(database: Database, clock: FakeClock) -> AsyncIterator[World]:
    w = await build(database, clock, "new")
    yield w
    await w.runtime.close()
    await w.log.close()
    await w.bindings.close()


class TestAccept:
    async def test_the_target_takes_over_in_the_same_conversation(self, same: World) -> None:
        """The binding speaks as the target (name and avatar), shown before its first call."""
        handoff = await offered(same)
        accepted = await same.use.accept(same.binding, handoff.id, by="u1", show=same.show)
        assert not accepted.moved
        assert accepted.binding.binding_id == same.binding.binding_id
        persona = accepted.binding.meta.persona
        assert (persona.name, persona.avatar_url) == ("Writer", "https://example.test/w.png")
        assert accepted.binding.meta.agent == "writer"
        ((record, agent, calls),) = same.shown
        assert (record, agent.agent_name, calls) == (accepted.binding, "writer", 1)
        async with asyncio.timeout(TIMEOUT):
            done = await same.use.completed(accepted)
        assert done is not None
        assert done.status == "completed"

    async def test_a_target_that_wants_a_new_conversation_moves_there(self, new: World) -> None:
        """A new binding beside the offer's, then the offer's let go as handed off."""
        handoff = await offered(new)
        accepted = await new.use.accept(new.binding, handoff.id, by="u1", show=new.show)
        assert accepted.moved
        (created,) = new.adapter.created
        assert accepted.binding.conversation == created
        assert created.parent_conversation_id == "c1"
        assert accepted.binding.metadata["handed_off_from"] == "t1"
        assert accepted.binding.meta.persona.name == "Writer"
        assert new.bindings.active(new.binding.binding_id) is None
        assert (new.binding.binding_id, HANDED_OFF) in new.adapter.farewells
        assert [r.binding_id for r, _, _ in new.shown] == [accepted.binding.binding_id]

    async def test_no_new_conversation_means_taking_over_where_offered(self, new: World) -> None:
        """Accepted already: the target takes over in the offer's conversation instead."""
        new.adapter.refuse = True
        handoff = await offered(new)
        accepted = await new.use.accept(new.binding, handoff.id, by="u1", show=new.show)
        assert not accepted.moved
        assert accepted.binding.binding_id == new.binding.binding_id
        assert accepted.binding.meta.persona.name == "Writer"
        assert new.adapter.farewells == []


class TestReject:
    async def test_reject_records_it_and_the_offer_is_no_longer_open(self, same: World) -> None:
        """Rejected by the presser; no press on it is answered any more."""
        handoff = await offered(same)
        assert await same.use.still_offered(KEY, handoff.id)
        rejected = await same.use.reject(KEY, handoff.id, by="u1")
        assert rejected.status == "rejected"
        assert not await same.use.still_offered(KEY, handoff.id)
