"""SubagentService on every store: spawn, cleanup, completion once, parent told, recovery."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from core.bindings.records import ConversationRef
from core.clock import FakeClock
from core.errors import BindingError, FeatureDisabled, ProviderError, StoreError
from core.leases import Leases
from core.providers.types import ToolCall
from core.store import Database
from core.subagents import SpawnRefused, repository
from core.subagents.events import CHILD_FINISHED, COMPLETED, SPAWNED
from tests.core.subagents.harness import CHANNEL, Harness, Step, harness
from tests.fixtures.bindings import conv
from tests.fixtures.stores import StoreFactory

SLEEP = ToolCall(id="s1", name="sleep", arguments='{"seconds": 5}')
AGENTS = {
    "scout": {"display_name": "Scout"},
    "writer": {"display_name": "Writer", "user_startable": False},
}


def types(tree: Any) -> list[str]:
    return [e.type for e in tree.events]


class TestSpawn:
    async def test_run_mode_in_a_thread_announces_once_then_unbinds(self, h: Harness) -> None:
        """Bound, answered, announced in its thread once, then the thread is let go."""
        spawned = await h.service.spawn(h.request(thread=True))
        await h.settle()
        thread = spawned.binding.conversation.conversation_id
        assert [where for where, _ in h.sink.bound] == [thread]
        assert h.sink.bound[0][1].startswith("✅ **Subagent** completed its task.")
        assert h.sink.fallback == []
        assert h.adapter.farewells == [(spawned.binding.binding_id, "run-complete")]
        record = await h.service.get(spawned.record.session_key)
        assert record.state == "completed"
        tree = await h.sessions.load(spawned.record.session_key)
        assert types(tree)[0] == SPAWNED
        assert types(tree).count(COMPLETED) == 1

    async def test_an_announcement_under_way_is_finishing_until_its_farewell(
        self, h: Harness
    ) -> None:
        """Shutdown waits on ``finishing()``: it holds from the announcement to the farewell."""
        gate = asyncio.Event()
        h.sink.gate = gate
        spawned = await h.service.spawn(h.request(thread=True))
        await h.sink.entered.wait()  # the announcement is being posted
        (finishing,) = h.service.finishing()
        assert not finishing.done()
        gate.set()
        await finishing
        assert h.service.finishing() == []
        assert h.adapter.farewells == [(spawned.binding.binding_id, "run-complete")]

    async def test_session_mode_stays_bound_and_says_so(self, h: Harness) -> None:
        """A session keeps its thread; the announcement says the session stays active."""
        spawned = await h.service.spawn(h.request(mode="session", thread=True))
        await h.settle()
        assert "stays active" in h.sink.bound[0][1]
        assert h.adapter.farewells == []
        assert (await h.service.get(spawned.record.session_key)).state == "idle"
        assert h.bindings.list_by_session(spawned.record.session_key)[0].status == "active"

    async def test_without_a_thread_the_result_falls_back_to_the_requester(
        self, h: Harness
    ) -> None:
        """No binding: the requester gets header and result, as the bot."""
        await h.service.spawn(h.request())
        await h.settle()
        assert h.sink.bound == []
        ((where, content),) = h.sink.fallback
        assert where == CHANNEL.conversation_id
        assert "completed its task" in content
        assert content.endswith("the answer")

    @pytest.mark.parametrize(
        ("options", "error", "text"),
        [
            ({"mode": "session"}, SpawnRefused, "thread=true"),
            ({"agent": "nobody"}, SpawnRefused, "no agent 'nobody'"),
            ({"agent": "writer"}, SpawnRefused, "accepted handoff"),
        ],
    )
    async def test_refusals_leave_nothing(
        self, database: Database, clock: FakeClock, options: dict, error: type, text: str
    ) -> None:
        """Refused spawns name the problem and write nothing."""
        h = await harness(database, clock, agents=AGENTS)
        try:
            with pytest.raises(error, match=text):
                await h.service.spawn(h.request(**options))
            assert await h.service.list() == []
            assert await h.sessions.session_keys() == []
        finally:
            await h.close()

    async def test_thread_refused_when_flag_is_off_names_the_flag(self, h: Harness) -> None:
        h.threads["allowed"] = False
        with pytest.raises(FeatureDisabled, match="spawnSubagentSessions"):
            await h.service.spawn(h.request(thread=True))
        assert await h.service.list() == []

    async def test_the_refusal_names_the_flag_of_the_requester_s_platform(self, h: Harness) -> None:
        """Asked from a Matrix room, the flag to turn on is the Matrix one."""
        h.threads["allowed"] = False
        room = ConversationRef(channel="matrix", account_id="default", conversation_id="!r:x")
        request = dataclasses.replace(h.request(thread=True), requester=room)
        with pytest.raises(FeatureDisabled) as refused:
            await h.service.spawn(request)
        assert refused.value.flag == "channels.matrix.threadBindings.spawnSubagentSessions"

    async def test_bind_failure_removes_the_provisional_child(self, h: Harness) -> None:
        """If the thread cannot be bound, the child's log and row are removed."""
        h.adapter.created.clear()

        async def refuse(*_args: Any, **_kwargs: Any) -> Any:
            raise BindingError("Discord refused to create the thread")

        h.adapter.create_conversation = refuse  # type: ignore[method-assign]
        with pytest.raises(BindingError):
            await h.service.spawn(h.request(thread=True))
        assert await h.service.list() == []
        assert await h.sessions.session_keys() == []

    async def test_start_failure_after_bind_ends_the_binding_spawn_failed(self, h: Harness) -> None:
        """The run cannot start after the bind: the binding ends with a spawn-failed farewell."""

        async def broken(*_args: Any, **_kwargs: Any) -> Any:
            raise RuntimeError("no agent for you")

        h.runtime.start_new = broken  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            await h.service.spawn(h.request(thread=True))
        ((_, reason),) = h.adapter.farewells
        assert reason == "spawn-failed"
        (record,) = await h.service.list()
        assert record.state == "failed"
        assert "could not start" in (record.outcome_reason or "")

    async def test_profile_agent_is_recorded_and_named(
        self, database: Database, clock: FakeClock
    ) -> None:
        """The spawned agent's profile names the announcement and runs the session."""
        h = await harness(database, clock, lambda _m: Step(text="ok"), agents=AGENTS)
        try:
            spawned = await h.service.spawn(h.request(agent="scout", thread=True))
            await h.settle()
            assert h.sink.bound[0][1].startswith("✅ **Scout**")
            agent = await h.runtime.get(spawned.record.session_key)
            assert agent.agent_name == "scout"
        finally:
            await h.close()


class TestCompletion:
    async def test_a_failed_turn_is_announced_as_failed(
        self, database: Database, clock: FakeClock
    ) -> None:
        h = await harness(database, clock, [Step(error=ProviderError("model exploded"))])
        try:
            await h.service.spawn(h.request(thread=True))
            await h.settle()
            (content,) = [c for _, c in h.sink.bound]
            assert content.startswith("❌ **Subagent** failed.")
            assert "model exploded" in content
            assert h.adapter.farewells[0][1] == "run-failed"
        finally:
            await h.close()

    async def test_timeout_cancels_and_announces_timed_out(
        self, database: Database, clock: FakeClock
    ) -> None:
        """No result within the timeout: the turn is cancelled and announced as timed out."""
        long_sleep = ToolCall(id="s2", name="sleep", arguments='{"seconds": 100}')
        h = await harness(database, clock, [Step(tool_calls=(long_sleep,))], task_timeout=60)
        try:
            spawned = await h.service.spawn(h.request(thread=True))
            await clock.wait_for_sleepers(2)  # the tool's 100 s and the 60 s timeout
            await clock.advance(60)
            await h.settle()
            record = await h.service.get(spawned.record.session_key)
            assert record.state == "timed_out"
            (content,) = [c for _, c in h.sink.bound]
            assert content.startswith("⏱️ **Subagent** timed out.")
            assert "no result within 60s" in content
        finally:
            await h.close()

    async def test_concurrent_deliveries_of_one_completion_post_once(self, h: Harness) -> None:
        """While the first delivery is mid-post, four more of the same id post nothing."""
        gate = asyncio.Event()
        h.sink.gate = gate
        spawned = await h.service.spawn(h.request(thread=True))
        key = spawned.record.session_key
        await asyncio.wait_for(h.sink.entered.wait(), 10)  # the first delivery is mid-post
        agent = await h.runtime.get(key)
        events = [e for e in agent.tree.events if e.type == COMPLETED]
        completion_id = events[0].payload["completion_id"]
        record = await h.service.get(key)
        racers = [h.service.delivery.deliver(completion_id, record) for _ in range(4)]
        assert await asyncio.gather(*racers) == [False] * 4
        gate.set()
        await h.settle()
        assert len(h.sink.posts) == 1

    async def test_recording_twice_is_refused(self, h: Harness) -> None:
        assert await h.service.delivery.record("c1", "s", "completed", "x") is True
        assert await h.service.delivery.record("c1", "s", "completed", "x") is False

    async def test_failed_posts_are_retried_on_the_clock(self, h: Harness) -> None:
        """Two 503s, then the post lands; still exactly one post."""
        h.sink.fail = 2
        await h.service.spawn(h.request(thread=True))
        for _ in range(2):
            await h.clock.wait_for_sleepers()
            await h.clock.advance(10)
        await h.settle()
        assert len(h.sink.posts) == 1


class TestParent:
    async def test_tool_spawn_tells_the_parent_with_the_result(
        self, database: Database, clock: FakeClock
    ) -> None:
        """A parent agent's spawn_subagent: the child's result comes back as an event."""
        spawn = ToolCall(id="p1", name="spawn_subagent", arguments='{"task": "dig"}')

        def script(messages: Any) -> Step:
            last = messages[-1]
            if last.role == "user" and last.content == "plan":
                return Step(tool_calls=(spawn,))
            if last.role == "tool":
                return Step(text="parent waits")
            return Step(text="child result")

        h = await harness(database, clock, script)
        try:
            await h.bindings.bind("parent", "session", conv("555", "100"))
            parent = await h.runtime.get("parent")
            await parent.send("plan")
            await parent.wait_idle()
            await h.settle()
            finished = [e for e in parent.tree.events if e.type == CHILD_FINISHED]
            assert len(finished) == 1
            assert finished[0].payload["result"] == "child result"
            (record,) = await h.service.list()
            assert record.parent_session_key == "parent"
            ((where, content),) = h.sink.fallback  # no thread: to the parent's thread, as the bot
            assert where == "555"
            assert content.endswith("child result")
            assert any(
                e.type == "tool_result" and "started subagent" in e.payload["content"]
                for e in parent.tree.events
            )
        finally:
            await h.close()

    async def test_a_running_parent_is_steered_with_the_result(
        self, database: Database, clock: FakeClock
    ) -> None:
        """The child finishes while the parent still works: the result reaches its next step."""
        spawn = ToolCall(id="p1", name="spawn_subagent", arguments='{"task": "dig"}')
        wait = ToolCall(id="p2", name="sleep", arguments='{"seconds": 5}')

        def script(messages: Any) -> Step:
            last = messages[-1]
            if last.role == "user" and last.content == "plan":
                return Step(tool_calls=(spawn,))
            if last.role == "user" and last.content == "dig":
                return Step(text="child result")
            if last.role == "tool" and last.name == "spawn_subagent":
                return Step(tool_calls=(wait,))
            return Step(text="parent done")

        h = await harness(database, clock, script)
        try:
            await h.bindings.bind("parent", "session", conv("555", "100"))
            parent = await h.runtime.get("parent")
            await parent.send("plan")
            await clock.wait_for_sleepers()  # the parent sleeps in its second step
            await h.settle()  # meanwhile the child finished and was announced
            assert len(parent.tree.steering_queue) == 1
            await clock.advance(5)
            await parent.wait_idle()
            last_call = h.provider.calls[-1]
            told = [
                m.content for m in last_call if m.role == "user" and "subagent_result" in m.content
            ]
            assert len(told) == 1
            assert "child result" in told[0]
            assert told[0].startswith('<steering source="system">')  # from the bot, not a user
        finally:
            await h.close()


class TestRecovery:
    async def test_a_restart_delivers_what_was_recorded_once(
        self, open_store: StoreFactory, clock: FakeClock
    ) -> None:
        """Recorded but not posted (the process died): the next start posts it, once."""
        first = await harness(await open_store(), clock, lambda _m: Step(text="done"))

        async def died(*_args: Any) -> bool:
            raise RuntimeError("process killed before posting")

        first.service.delivery.deliver = died  # type: ignore[method-assign]
        spawned = await first.service.spawn(first.request(thread=True))
        await first.settle()
        assert first.sink.posts == []
        await first.close()
        await first.database.close()
        # Killed, it never released its leases: they must expire before another takes over.
        await clock.advance(first.service.delivery.leases.ttl.total_seconds())

        second = await harness(await open_store(), clock, lambda _m: Step(text="again"))
        try:
            await second.bindings.start()
            await second.service.start()
            await second.settle()
            await second.service.start()  # a second start does nothing more
            await second.settle()
            assert len(second.sink.bound) == 1
            assert second.adapter.farewells[0][1] == "run-complete"
            statuses = await second.database.run(repository.delivery_statuses)
            assert list(statuses.values()) == ["delivered"]
            assert spawned.record.session_key in {
                r.session_key for r in await second.service.list()
            }
        finally:
            await second.close()


class TestDiedMidPost:
    """The process died after the post reached the channel but before the row said so."""

    async def _first_run(self, open_store: StoreFactory, clock: FakeClock, *, posted: bool) -> Any:
        first = await harness(await open_store(), clock, lambda _m: Step(text="done"))
        delivery = first.service.delivery
        real_post = first.sink.post_bound

        async def post_then_die(binding: Any, content: str) -> Any:
            if posted:
                await real_post(binding, content)
            raise RuntimeError("process killed mid-post")

        first.sink.post_bound = post_then_die  # type: ignore[method-assign]
        await first.service.spawn(first.request(thread=True))
        await first.settle()
        statuses = await first.database.run(repository.delivery_statuses)
        assert list(statuses.values()) == ["sending"]
        await first.close()
        await first.database.close()
        await clock.advance(delivery.leases.ttl.total_seconds())  # the dead process's leases
        del delivery
        first.sink.post_bound = real_post  # type: ignore[method-assign]
        return first.sink

    @pytest.mark.parametrize("posted", [True, False])
    async def test_restart_checks_the_destination_before_posting(
        self, open_store: StoreFactory, clock: FakeClock, posted: bool
    ) -> None:
        """Found in the channel: marked delivered, no second post; not found: posted once."""
        channel = await self._first_run(open_store, clock, posted=posted)
        second = await harness(await open_store(), clock, lambda _m: Step(text="x"), sink=channel)
        try:
            await second.bindings.start()
            await second.service.start()
            await second.settle()
            assert len(channel.bound) == 1
            assert channel.lookups == 1
            statuses = await second.database.run(repository.delivery_statuses)
            assert list(statuses.values()) == ["delivered"]
        finally:
            await second.close()


async def test_a_task_cut_by_a_shutdown_is_announced_after_the_restart(
    open_store: StoreFactory, clock: FakeClock
) -> None:
    """A subagent still running at shutdown is not re-run: the restart announces it failed."""
    long_sleep = ToolCall(id="s3", name="sleep", arguments='{"seconds": 100}')
    first = await harness(await open_store(), clock, [Step(tool_calls=(long_sleep,))])
    spawned = await first.service.spawn(first.request(thread=True))
    await clock.wait_for_sleepers()
    await first.close()
    await first.database.close()
    assert first.sink.posts == []

    second = await harness(await open_store(), clock, sink=first.sink)
    try:
        await second.bindings.start()
        await second.service.start()
        await second.settle()
        ((_, content),) = first.sink.bound
        assert content.startswith("❌ **Subagent** failed.")
        record = await second.service.get(spawned.record.session_key)
        assert record.state == "failed"
        assert second.provider.calls == []  # never silently re-run
    finally:
        await second.close()


async def test_a_late_start_leaves_this_processs_posts_in_flight_alone(h: Harness) -> None:
    """start() while a post is under way must not treat it as a dead process's post."""
    gate = asyncio.Event()
    h.sink.gate = gate
    await h.service.spawn(h.request(thread=True))
    await asyncio.wait_for(h.sink.entered.wait(), 10)  # the announcement is being posted
    await h.service.start()
    gate.set()
    await h.settle()
    assert len(h.sink.posts) == 1
    assert h.sink.lookups == 0


class TestStoreWork:
    """What one subagent's life asks of the store, beside its session log."""

    async def test_a_life_is_four_transactions_beside_the_session_log(
        self, database: Database, clock: FakeClock, store_units: list[str]
    ) -> None:
        """The row with the session's lease; the binding with the row running; at the end
        the row, the completion recorded and claimed; the delivered mark with the run-mode
        thread's end. Not a load of the new session, not a transaction per write."""
        units = store_units
        h = await harness(
            database, clock, lambda _m: Step(text="done"), leases=Leases(database, clock=clock)
        )
        try:
            units.clear()  # what starting the services read
            await h.service.spawn(h.request(thread=True))
            await h.settle()
            assert len(h.sink.bound) == 1
            assert len(units) == 4, units
        finally:
            await h.close()

    async def test_a_spawn_under_way_is_not_taken_by_another_processs_recovery(
        self, database: Database, clock: FakeClock
    ) -> None:
        """The row is written with the session's lease: a neighbour recovering while the
        thread is still being created finds the session held, and leaves it alone."""
        mine, theirs = Leases(database, clock=clock), Leases(database, clock=clock)
        first = await harness(database, clock, lambda _m: Step(text="done"), leases=mine)
        second = await harness(database, clock, lambda _m: Step(text="x"), leases=theirs)
        creating, go_on = asyncio.Event(), asyncio.Event()
        create = first.adapter.create_conversation

        async def slow_create(*args: Any, **kwargs: Any) -> Any:
            creating.set()
            await go_on.wait()
            return await create(*args, **kwargs)

        first.adapter.create_conversation = slow_create  # type: ignore[method-assign]
        try:
            spawning = asyncio.ensure_future(first.service.spawn(first.request(thread=True)))
            await asyncio.wait_for(creating.wait(), 10)
            (record,) = await second.service.list("starting")
            await second.service.recover()
            await second.settle()
            assert second.runtime.peek(record.session_key) is None
            assert await theirs.holders("session") == {record.session_key: mine.owner}
            go_on.set()
            spawned = await spawning
            await first.settle()
            assert spawned.record.state == "running"
            assert len(first.sink.bound) == 1
        finally:
            go_on.set()
            await first.close()
            await second.close()

    async def test_a_failed_thread_end_still_marks_the_announcement_delivered(
        self, h: Harness
    ) -> None:
        """The delivered mark rides on the thread's end; if that end fails the mark is
        committed on its own, and the announcement is never posted again."""
        unbind = h.bindings.unbind

        async def failing(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("tx") is not None:
                raise StoreError("the store went away")
            return await unbind(*args, **kwargs)

        h.bindings.unbind = failing  # type: ignore[method-assign]
        await h.service.spawn(h.request(thread=True))
        await h.settle()
        assert len(h.sink.posts) == 1
        assert list((await h.database.run(repository.delivery_statuses)).values()) == ["delivered"]
        assert await h.service.delivery.leases.holders("completion") == {}
