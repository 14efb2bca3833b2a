"""SubagentOverview on every store: /agents list's rows, and one handoff query for them all."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from core.clock import FakeClock
from core.handoffs import HandoffService
from core.store import Database
from core.subagents.overview import SubagentOverview
from tests.core.subagents.harness import Harness, RecordingSink, Step, harness
from tests.fixtures.bindings import conv
from tests.fixtures.statements import statements

AGENTS = {
    "scout": {"display_name": "Scout", "handoff_to": ["writer"]},
    "writer": {"display_name": "Writer", "user_startable": False},
}


@pytest.fixture
async def h(database: Database, clock: FakeClock) -> AsyncIterator[Harness]:
    """The subagent harness with the scout and writer profiles."""
    made = await harness(database, clock, lambda _messages: Step(text="the answer"), agents=AGENTS)
    yield made
    await made.close()


def overview(h: Harness) -> SubagentOverview:
    return SubagentOverview(h.service, h.runtime, h.bindings, h.database)


async def spawn_settled(h: Harness, count: int) -> list[str]:
    """``count`` subagents spawned a second apart (oldest first), their tasks done."""
    keys = []
    for n in range(count):
        await h.clock.advance(1)
        spawned = await h.service.spawn(h.request(f"task {n}", agent="scout"))
        keys.append(spawned.record.session_key)
    await h.settle()
    return keys


async def hand_over(h: Harness, database: Database, clock: FakeClock, key: str) -> None:
    """An accepted handoff from scout to writer in ``key``, as the table keeps it."""
    handoffs = HandoffService(database, h.sessions, clock=clock)
    tree = await h.sessions.load(key)
    offered = await handoffs.offer(tree, from_agent="scout", to_agent="writer", actor="u1")
    await handoffs.accept(tree, offered.id, actor="u1")


async def evict_all(h: Harness, clock: FakeClock) -> None:
    await clock.advance(3600)
    h.runtime.evict_idle()


class TestOverview:
    async def test_rows_newest_first_for_this_account_only(
        self, h: Harness, clock: FakeClock
    ) -> None:
        """A subagent asked for on another account is not listed; the newest comes first."""
        mine = await spawn_settled(h, 2)
        h.service.delivery.sinks.register(RecordingSink(account_id="b"))
        await h.service.spawn(
            h.request("elsewhere", agent="scout", requester=conv("9", account="b"))
        )
        await h.settle()
        await evict_all(h, clock)
        seen = await overview(h).overview("main")
        assert [row.session_key for row in seen.subagents] == mine[::-1]
        assert {row.name for row in seen.subagents} == {"Scout"}
        assert [row.handed_from for row in seen.subagents] == [None, None]
        assert not seen.cut

    async def test_a_session_handed_over_shows_its_new_agent(
        self, h: Harness, database: Database, clock: FakeClock
    ) -> None:
        """Not in memory: the handoffs table says who runs it now, and from whom it came."""
        (key,) = await spawn_settled(h, 1)
        await hand_over(h, database, clock, key)
        await evict_all(h, clock)
        (row,) = (await overview(h).overview("main")).subagents
        assert (row.name, row.handed_from, row.queued) == ("Writer", "Scout", None)

    async def test_one_handoff_query_for_every_row(
        self, h: Harness, database: Database, clock: FakeClock
    ) -> None:
        """However many subagents are listed, who took them over is read in one query."""
        keys = await spawn_settled(h, 3)
        for key in keys:
            await hand_over(h, database, clock, key)
        await evict_all(h, clock)
        with statements(database) as sent:
            seen = await overview(h).overview("main")
        assert [row.name for row in seen.subagents] == ["Writer"] * 3
        assert len([s for s in sent if "handoffs" in s.lower()]) == 1

    async def test_the_limit_cuts_the_list(self, h: Harness, clock: FakeClock) -> None:
        """At the limit the list says it is cut (and lists no legacy runs)."""
        await spawn_settled(h, 3)
        seen = await overview(h).overview("main", limit=2)
        assert len(seen.subagents) == 2
        assert seen.cut
        assert seen.unbound == ()
