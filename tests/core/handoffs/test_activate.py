"""Activation on Accept over a real store: the target agent takes over, or nothing changes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

import core.artifacts.builtin as _builtin
from core.agent.agent import Agent
from core.agent.assignment import AGENT_ACTIVATED, active_agent
from core.agent.builtin_tools import sleep_tool
from core.agent.factory import ProfileAgentFactory
from core.agent.tools import ToolRegistry
from core.artifacts import ArtifactService
from core.clock import FakeClock
from core.config import Config, parse_config
from core.errors import HandoffError, SessionError
from core.handoffs import HandoffRecord, HandoffService
from core.handoffs.activate import (
    Activation,
    ActivationRefused,
    BeforeInput,
    activate,
    complete_when_done,
    finish_accepted,
)
from core.providers.scripted import ScriptedProvider, Step
from core.runtime import SessionRuntime
from core.sessions import SessionLog
from core.store import Database

del _builtin  # registers the brief type

KEY = "agent:main:subagent:handoff"
TIMEOUT = 5
AGENTS = {
    "scout": {"display_name": "Scout", "system_prompt": "You scout.", "handoff_to": ["writer"]},
    "writer": {"display_name": "Writer", "system_prompt": "You write.", "user_startable": False},
}


@dataclass
class World:
    config: Config
    provider: ScriptedProvider
    log: SessionLog
    runtime: SessionRuntime
    handoffs: HandoffService
    artifacts: ArtifactService

    async def activate(
        self, handoff_id: str, *, before_input: BeforeInput | None = None
    ) -> Activation:
        return await activate(
            runtime=self.runtime,
            handoffs=self.handoffs,
            profiles=self.config.agents,
            session_key=KEY,
            handoff_id=handoff_id,
            actor="u1",
            before_input=before_input,
        )

    async def statuses(self) -> list[str]:
        return [r.status for r in await self.handoffs.list(KEY)]


def build(database: Database, clock: FakeClock, steps: list[Step]) -> World:
    config = parse_config({"agents": AGENTS}, env={})
    provider = ScriptedProvider(steps)
    log = SessionLog(database, clock=clock)
    factory = ProfileAgentFactory(config, {}, provider, ToolRegistry([sleep_tool(clock)]))
    runtime = SessionRuntime(log, factory, clock=clock)
    return World(
        config,
        provider,
        log,
        runtime,
        HandoffService(database, log, clock=clock),
        ArtifactService(log),
    )


@pytest.fixture
async def world(database: Database, clock: FakeClock) -> AsyncIterator[World]:
    w = build(database, clock, [Step(text="found three options"), Step(text="draft written")])
    tree = await w.log.load(KEY)
    await w.log.append(tree, AGENT_ACTIVATED, {"agent": "scout", "by": "u1"})
    yield w
    await w.runtime.close()
    await w.log.close()


async def scout_turn(w: World) -> Agent:
    agent = await w.runtime.get(KEY)
    await agent.send("look around", author_id="u1")
    async with asyncio.timeout(TIMEOUT):
        await agent.wait_idle()
    return agent


async def offer(w: World, agent: Agent, to_agent: str = "writer") -> HandoffRecord:
    origin = [e.node_id for e in agent.tree.path() if e.kind in ("user", "assistant")]
    event = await w.artifacts.produce_confirmed(
        agent.tree,
        type="brief",
        data={"title": "Three options", "summary": "Pick the second.", "next_agent": to_agent},
        origin=origin,
        confirmed_by="u1",
        agent="scout",
    )
    return await w.handoffs.offer(
        agent.tree,
        from_agent="scout",
        to_agent=to_agent,
        artifact_id=event.payload["artifact_id"],
        actor="u1",
    )


class TestActivate:
    async def test_accept_hands_the_session_to_the_target(self, world: World) -> None:
        """Accepted, agent.activated recorded, a new writer agent gets the brief as input."""
        old = await scout_turn(world)
        handoff = await offer(world, old)
        seen: list[tuple[Agent, int]] = []

        def before_input(agent: Agent, record: HandoffRecord) -> None:
            seen.append((agent, len(world.provider.calls)))

        result = await world.activate(handoff.id, before_input=before_input)
        new = result.agent
        async with asyncio.timeout(TIMEOUT):
            await new.wait_idle()

        assert await world.statuses() == ["accepted"]
        assert new is not old
        assert new is world.runtime.peek(KEY)
        assert (new.agent_name, new.system_prompt) == ("writer", "You write.")
        assert active_agent(new.tree) == "writer"
        (activated,) = [e for e in new.tree.events if e.type == AGENT_ACTIVATED][1:]
        assert activated.payload == {
            "agent": "writer",
            "by": "u1",
            "handoff_id": handoff.id,
            "artifact_id": handoff.artifact_id,
        }
        assert seen == [(new, 1)]  # prepared before its first model call
        call = world.provider.calls[1]
        assert call[0].content == "You write."
        assert call[-1].role == "user"
        assert call[-1].content == ("Handoff from Scout — brief: Three options\n\nPick the second.")
        assert old.tree.events[-1].type == AGENT_ACTIVATED  # the old tree kept in step

    async def test_a_restart_keeps_the_target(
        self, world: World, database: Database, clock: FakeClock
    ) -> None:
        """After activation a rebuilt runtime runs the writer's profile again."""
        handoff = await offer(world, await scout_turn(world))
        result = await world.activate(handoff.id)
        async with asyncio.timeout(TIMEOUT):
            await result.agent.wait_idle()
        again = build(database, clock, [])
        agent = await again.runtime.get(KEY)
        assert (agent.agent_name, agent.system_prompt) == ("writer", "You write.")


class TestCompletion:
    async def test_completed_once_the_target_has_answered(self, world: World) -> None:
        """complete_when_done: accepted -> completed after the writer's answer."""
        handoff = await offer(world, await scout_turn(world))
        result = await world.activate(handoff.id)
        async with asyncio.timeout(TIMEOUT):
            done = await complete_when_done(result, handoffs=world.handoffs, runtime=world.runtime)
        assert done is not None
        assert await world.statuses() == ["completed"]

    async def test_a_restart_completes_what_a_stopped_process_left_accepted(
        self, world: World, database: Database, clock: FakeClock
    ) -> None:
        """The writer answered, then the process stopped: the next start completes the handoff."""
        handoff = await offer(world, await scout_turn(world))
        result = await world.activate(handoff.id)
        async with asyncio.timeout(TIMEOUT):
            await result.agent.wait_idle()
        assert await world.statuses() == ["accepted"]

        again = build(database, clock, [])
        async with asyncio.timeout(TIMEOUT):
            assert await finish_accepted(handoffs=again.handoffs, runtime=again.runtime) == 1
            assert await finish_accepted(handoffs=again.handoffs, runtime=again.runtime) == 0
        assert await again.statuses() == ["completed"]
        await again.runtime.close()


class TestRefusals:
    async def test_unknown_handoff(self, world: World) -> None:
        """An id the session does not have is refused and nothing is written."""
        agent = await scout_turn(world)
        before = len(agent.tree.events)
        with pytest.raises(HandoffError, match="does not exist"):
            await world.activate("0" * 32)
        assert len(agent.tree.events) == before

    async def test_not_offered(self, world: World) -> None:
        """A rejected (or already accepted) handoff cannot activate anything."""
        agent = await scout_turn(world)
        handoff = await offer(world, agent)
        await world.handoffs.reject(agent.tree, handoff.id, actor="u1")
        with pytest.raises(HandoffError, match="is rejected"):
            await world.activate(handoff.id)
        assert active_agent(agent.tree) == "scout"
        assert await world.statuses() == ["rejected"]

    async def test_accepted_twice(self, world: World) -> None:
        """A second Accept is refused: the handoff is accepted already."""
        handoff = await offer(world, await scout_turn(world))
        result = await world.activate(handoff.id)
        async with asyncio.timeout(TIMEOUT):
            await result.agent.wait_idle()
        with pytest.raises(HandoffError, match="is accepted"):
            await world.activate(handoff.id)

    async def test_target_without_profile(self, world: World) -> None:
        """A target with no [agents.<id>] is refused before accepting."""
        handoff = await offer(world, await scout_turn(world), to_agent="ghost")
        with pytest.raises(ActivationRefused, match="'ghost', which has no"):
            await world.activate(handoff.id)
        assert await world.statuses() == ["offered"]

    async def test_activation_rule_refuses(
        self, world: World, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A table that does not show the acceptance activates nobody (the rule is applied)."""
        agent = await scout_turn(world)
        handoff = await offer(world, agent)

        async def lagging(_key: str) -> list[HandoffRecord]:
            return []

        monkeypatch.setattr(world.handoffs, "list", lagging)
        with pytest.raises(ActivationRefused, match="may not be activated"):
            await world.activate(handoff.id)
        assert active_agent(agent.tree) == "scout"
        assert world.runtime.peek(KEY) is agent

    async def test_running_turn(self, database: Database, clock: FakeClock) -> None:
        """While the current agent runs a turn, neither activate nor reload replaces it."""
        gate = asyncio.Event()
        w = build(database, clock, [Step(text="one"), Step(text="two", gate=gate)])
        tree = await w.log.load(KEY)
        await w.log.append(tree, AGENT_ACTIVATED, {"agent": "scout", "by": "u1"})
        try:
            agent = await scout_turn(w)
            handoff = await offer(w, agent)
            await agent.send("more", author_id="u1")
            async with asyncio.timeout(TIMEOUT):
                await w.provider.wait_calls(2)
            with pytest.raises(ActivationRefused, match="still running a turn"):
                await w.activate(handoff.id)
            with pytest.raises(SessionError, match="running a turn"):
                await w.runtime.reload(KEY)
            assert await w.statuses() == ["offered"]
            assert w.runtime.peek(KEY) is agent
            gate.set()
            async with asyncio.timeout(TIMEOUT):
                await agent.wait_idle()
        finally:
            await w.runtime.close()
            await w.log.close()
