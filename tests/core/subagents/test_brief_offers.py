"""BriefOffers on every store: when and where the brief button is asked for."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from core.clock import FakeClock
from core.store import Database
from core.subagents.brief_offers import BriefOffers, task_unannounced
from core.subagents.service import Spawned
from tests.core.subagents.harness import Harness, Step, config, harness

AGENTS = {
    "scout": {"display_name": "Scout", "handoff_to": ["writer"]},
    "writer": {"display_name": "Writer", "user_startable": False},
    "plain": {"display_name": "Plain"},
}
TIMEOUT = 5


@pytest.fixture
async def h(database: Database, clock: FakeClock) -> AsyncIterator[Harness]:
    """The subagent harness with a scout that hands off to a writer, and one that does not."""
    made = await harness(database, clock, lambda _messages: Step(text="the answer"), agents=AGENTS)
    yield made
    await made.close()


def offers(h: Harness) -> BriefOffers:
    return BriefOffers(h.bindings, config(AGENTS).agents, h.runtime, h.sessions, h.service)


async def session(h: Harness, agent: str = "scout") -> Spawned:
    """A session-mode subagent in a thread, its task done and announced."""
    spawned = await h.service.spawn(h.request(agent=agent, mode="session", thread=True))
    await h.settle()
    return spawned


async def said(h: Harness, key: str, text: str = "and now?") -> None:
    agent = await h.runtime.get(key)
    await agent.send(text, author_id="u1")
    async with asyncio.timeout(TIMEOUT):
        await agent.wait_idle()


class TestTaskUnannounced:
    async def test_a_task_is_unannounced_until_its_completion(self, h: Harness) -> None:
        """Spawned and not completed: its announcement comes first; after it, no longer."""
        spawned = await session(h)
        tree = await h.sessions.load(spawned.record.session_key)
        assert not task_unannounced(tree)
        cut = [e for e in tree.events if e.type != "subagent.completed"]
        assert task_unannounced(type(tree).from_events(tree.session_key, cut))

    async def test_a_session_that_is_no_task(self, h: Harness) -> None:
        """A session never spawned as a task has nothing to announce."""
        assert not task_unannounced(await h.sessions.load("agent:main:plain"))


class TestWatch:
    async def test_asks_after_each_turn_but_not_the_tasks_own(
        self, database: Database, clock: FakeClock
    ) -> None:
        """Watched from before the task's turn: it is announced first; a later turn asks."""
        gate = asyncio.Event()
        steps = [Step(text="the task's answer", gate=gate), Step(text="the answer")]
        h = await harness(database, clock, steps, agents=AGENTS)
        try:
            asked: list[str] = []
            spawned = await h.service.spawn(h.request(agent="scout", mode="session", thread=True))
            offers(h).watch(spawned.agent, asked.append)
            gate.set()
            await h.settle()
            assert asked == []
            await said(h, spawned.record.session_key)
            assert asked == [spawned.record.session_key]
        finally:
            await h.close()

    async def test_an_agent_that_hands_off_to_nobody_is_not_watched(self, h: Harness) -> None:
        """No brief button is ever due for it."""
        asked: list[str] = []
        spawned = await session(h, "plain")
        offers(h).watch(await h.runtime.get(spawned.record.session_key), asked.append)
        await said(h, spawned.record.session_key)
        assert asked == []


class TestWhere:
    async def test_the_sessions_conversations_on_one_account(self, h: Harness) -> None:
        """Its active bindings on that channel account, and none elsewhere."""
        spawned = await session(h)
        assert spawned.binding is not None
        key = spawned.record.session_key
        found = offers(h).conversations(key, channel="discord", account_id="main")
        assert found == [spawned.binding.binding_id]
        assert offers(h).conversations(key, channel="discord", account_id="b") == []

    async def test_missed_lists_what_a_previous_process_may_have_owed(self, h: Harness) -> None:
        """A thread of an agent that hands off, its task done; not one that hands off to none."""
        scout = await session(h)
        await session(h, "plain")
        assert scout.binding is not None
        owed = await offers(h).missed(channel="discord", account_id="main")
        assert owed == [scout.binding.binding_id]


class TestDue:
    async def test_due_after_the_first_turn_and_not_again_once_posted(self, h: Harness) -> None:
        """Due for the scout, handing off to the writer; recorded, it is not due twice."""
        spawned = await session(h)
        assert spawned.binding is not None
        binding_id = spawned.binding.binding_id
        offer = await offers(h).due(binding_id)
        assert offer is not None
        assert (offer.due.agent, offer.due.to_agent) == ("scout", "writer")
        assert offer.binding.binding_id == binding_id
        await offers(h).mark_prompted(offer)
        assert await offers(h).due(binding_id) is None

    async def test_nothing_is_due_in_a_binding_that_ended(self, h: Harness) -> None:
        spawned = await session(h)
        assert spawned.binding is not None
        await h.bindings.unbind(spawned.binding.binding_id, reason="user-unfocus")
        assert await offers(h).due(spawned.binding.binding_id) is None
