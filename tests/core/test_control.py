"""SessionControl over a real store: a command's use cases on one session, by its key."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from structlog.testing import capture_logs

from core.agent.builtin_tools import sleep_tool
from core.agent.factory import ProfileAgentFactory
from core.agent.tools import ToolRegistry
from core.artifacts import ArtifactService
from core.clock import FakeClock
from core.config import parse_config
from core.control import (
    Cancelled,
    ModelSwitched,
    NothingRunning,
    Rewound,
    Running,
    SessionControl,
    UnknownProvider,
    resolve_ref,
)
from core.errors import SessionError
from core.providers.scripted import ScriptedProvider, Step
from core.runtime import SessionRuntime
from core.sessions import SessionLog
from core.store import Database

KEY = "agent:main:control"
TIMEOUT = 5


@dataclass
class World:
    log: SessionLog
    runtime: SessionRuntime
    control: SessionControl
    gate: asyncio.Event


@pytest.fixture
async def world(database: Database, clock: FakeClock) -> AsyncIterator[World]:
    config = parse_config(
        {"providers": {"local": {"base_url": "http://127.0.0.1:9/v1", "model": "small"}}}, env={}
    )
    gate = asyncio.Event()
    provider = ScriptedProvider(
        [Step(text="first answer"), Step(text="second answer"), Step(text="held", gate=gate)]
    )
    log = SessionLog(database, clock=clock)
    factory = ProfileAgentFactory(
        config, {"local": provider}, provider, ToolRegistry([sleep_tool(clock)])
    )
    runtime = SessionRuntime(log, factory, clock=clock)
    yield World(log, runtime, SessionControl(runtime, log, factory, ArtifactService(log)), gate)
    gate.set()
    await runtime.close()
    await log.close()


async def two_turns(w: World) -> None:
    agent = await w.runtime.get(KEY)
    for text in ("hello", "and then?"):
        await agent.send(text, author_id="u1")
        async with asyncio.timeout(TIMEOUT):
            await agent.wait_idle()


class TestResolveRef:
    async def test_a_unique_prefix_a_full_id_or_a_label(self, world: World) -> None:
        """Each names its node; the tree is read as the agent holds it."""
        await two_turns(world)
        tree = await world.control.tree(KEY)
        first = next(e for e in tree.events if e.advances)
        assert resolve_ref(tree, first.node_id[:10]) == first.node_id
        assert resolve_ref(tree, f" {first.node_id} ") == first.node_id
        assert await world.control.bookmark(KEY, first.node_id[:10], "start") == first.node_id
        assert resolve_ref(tree, "start") == first.node_id

    async def test_a_node_nobody_named_is_a_clear_refusal(self, world: World) -> None:
        """The message says where the ids are shown."""
        await two_turns(world)
        with pytest.raises(SessionError, match="use /tree to see the node ids"):
            resolve_ref(await world.control.tree(KEY), "zzzz")


class TestRunningTurn:
    async def test_cancel_stops_it_and_drops_the_queue(self, world: World) -> None:
        """A queued follow-up is dropped with the turn; a rewind meanwhile is refused."""
        await two_turns(world)
        agent = await world.runtime.get(KEY)
        await agent.send("third", author_id="u1")
        await agent.follow_up("after that", author_id="u1")
        assert isinstance(await world.control.rewind(KEY, "anything"), Running)
        done = await world.control.cancel(KEY, by_user_id="u1", by_name="alice")
        assert isinstance(done, Cancelled)
        assert [m.text for m in done.dropped] == ["after that"]
        assert not (await world.control.view(KEY)).running

    async def test_nothing_to_cancel_when_no_agent_is_in_memory(self, world: World) -> None:
        """No agent is started just to be cancelled."""
        assert await world.control.cancel(KEY, by_user_id="u1", by_name="alice") == NothingRunning()
        assert world.runtime.peek(KEY) is None

    async def test_nothing_to_cancel_when_its_agent_is_idle(self, world: World) -> None:
        """An idle agent with nothing queued is not said to be cancelled, nor logged so."""
        await two_turns(world)
        agent = await world.runtime.get(KEY)
        await agent.wait_idle()
        with capture_logs() as logs:
            done = await world.control.cancel(KEY, by_user_id="u1", by_name="alice")
        assert done == NothingRunning()
        assert [e for e in logs if e["event"] == "turn.cancelled"] == []


class TestChanges:
    async def test_rewind_before_a_message_gives_its_text_back(self, world: World) -> None:
        """From a user message the conversation goes on from before it."""
        await two_turns(world)
        tree = await world.control.tree(KEY)
        second = [e for e in tree.events if e.type == "user_message"][1]
        rewound = await world.control.rewind(KEY, second.node_id[:10])
        assert rewound == Rewound(second.node_id, "and then?")

    async def test_switch_among_the_configured_providers(self, world: World) -> None:
        """A configured provider's model is switched to, recorded by who asked; an unknown
        provider names the known ones."""
        unknown = await world.control.switch_model(KEY, "cloud", None, by="u1")
        assert unknown == UnknownProvider("cloud", ("local",))
        switched = await world.control.switch_model(KEY, "local", None, by="u1")
        assert switched == ModelSwitched("local", "small")
        view = await world.control.view(KEY)
        assert view.model == "small"
        changed = [e for e in view.tree.events if e.type == "model.changed"]
        assert [e.payload["by_user_id"] for e in changed] == ["u1"]
