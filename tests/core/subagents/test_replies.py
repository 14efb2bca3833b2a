"""Replies: the spawn while threads are off, through the same spawn, completion and outbox
as every subagent; its answer alone is posted where it was asked, once, a restart too."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from core.clock import FakeClock
from core.leases import Leases
from core.providers.types import ToolCall
from core.store import Database
from core.subagents import SpawnRefused, repository
from core.subagents.announce import NO_ANSWER
from tests.core.subagents.harness import CHANNEL, Harness, Step, harness
from tests.fixtures.stores import StoreFactory


class TestReply:
    async def test_the_answer_alone_is_posted_where_it_was_asked(self, h: Harness) -> None:
        """No thread, no header, and no subagent to list; the outbox has it delivered."""
        spawned = await h.service.spawn(h.request(task="answer here", reply=True))
        await h.settle()
        assert spawned.binding is None
        assert h.sink.fallback == [(CHANNEL.conversation_id, "the answer")]
        assert h.sink.bound == []
        assert await h.service.list() == []
        assert (await h.service.get(spawned.record.session_key)).state == "completed"
        statuses = await h.database.run(repository.delivery_statuses)
        assert list(statuses.values()) == ["delivered"]

    async def test_a_task_without_an_answer_says_so(
        self, database: Database, clock: FakeClock
    ) -> None:
        h = await harness(database, clock, [Step(text="")])
        try:
            await h.service.spawn(h.request(reply=True))
            await h.settle()
            assert h.sink.fallback == [(CHANNEL.conversation_id, NO_ANSWER)]
        finally:
            await h.close()

    async def test_a_post_refused_by_name_is_given_up_at_once(self, h: Harness) -> None:
        """The channel refused it with its own code (no permission): one delivery.failed,
        not retryable, and no retry waiting on the clock."""
        h.sink.fail, h.sink.fail_code = 1, 50013
        with capture_logs() as logs:
            await h.service.spawn(h.request(reply=True))
            await h.settle()
        failed = [e for e in logs if e["event"] == "delivery.failed"]
        assert [e["retryable"] for e in failed] == [False]
        assert h.sink.posts == []
        statuses = await h.database.run(repository.delivery_statuses)
        assert list(statuses.values()) == ["failed"]

    async def test_an_outage_is_retried_and_the_answer_still_posted(
        self, h: Harness, clock: FakeClock
    ) -> None:
        """A 503 or a rate limit passes: the reply is tried again, as every completion is,
        and posted once, without a fallback line in the log (a reply is not one)."""
        h.sink.fail = 1
        with capture_logs() as logs:
            await h.service.spawn(h.request(task="answer here", reply=True))
            await clock.wait_for_sleepers()
            await clock.advance(1)  # the harness retries after 1 s
            await h.settle()
        failed = [e for e in logs if e["event"] == "delivery.failed"]
        assert [e["retryable"] for e in failed] == [True]
        assert len(h.sink.fallback) == 1
        assert [e for e in logs if e["event"] == "delivery.fallback"] == []

    async def test_a_reply_has_no_thread(self, h: Harness) -> None:
        with pytest.raises(SpawnRefused, match="no thread"):
            await h.service.spawn(h.request(reply=True, thread=True))
        assert await h.sessions.session_keys() == []


class TestCrashBeforeTheAnswer:
    """The process dies between the spawn and its answer; the next one posts it, once."""

    async def test_killed_before_posting_the_restart_posts_it(
        self, open_store: StoreFactory, clock: FakeClock
    ) -> None:
        first = await harness(await open_store(), clock, lambda _m: Step(text="the answer"))

        async def died(*_args: Any, **_kwargs: Any) -> bool:
            raise RuntimeError("process killed before posting")

        first.service.delivery.deliver = died  # type: ignore[method-assign]
        spawned = await first.service.spawn(first.request(task="answer here", reply=True))
        await first.settle()
        assert first.sink.posts == []
        await first.close()  # no clean-up: its leases are not given back
        await first.database.close()
        await clock.advance(first.service.delivery.leases.ttl.total_seconds())

        second = await harness(await open_store(), clock, lambda _m: Step(text="again"))
        try:
            await second.service.start()
            await second.settle()
            await second.service.start()  # a second start does nothing more
            await second.settle()
            assert second.sink.fallback == [(CHANNEL.conversation_id, "the answer")]
            assert second.provider.calls == []  # the task is not run again
            statuses = await second.database.run(repository.delivery_statuses)
            assert list(statuses.values()) == ["delivered"]
            assert await second.service.list() == []
            record = await second.service.get(spawned.record.session_key)
            assert record.reply
            assert record.state == "completed"
        finally:
            await second.close()

    @pytest.mark.parametrize("posted", [True, False])
    async def test_killed_mid_post_the_restart_looks_before_posting(
        self, open_store: StoreFactory, clock: FakeClock, posted: bool
    ) -> None:
        """Died after the post may have reached the channel: posted already, it is not
        posted again; not posted, it is posted now."""
        first = await harness(await open_store(), clock, lambda _m: Step(text="the answer"))
        real_post = first.sink.post_to

        async def post_then_die(conversation: Any, content: str) -> Any:
            if posted:
                await real_post(conversation, content)
            raise RuntimeError("process killed mid-post")

        first.sink.post_to = post_then_die  # type: ignore[method-assign]
        await first.service.spawn(first.request(task="answer here", reply=True))
        await first.settle()
        statuses = await first.database.run(repository.delivery_statuses)
        assert list(statuses.values()) == ["sending"]
        await first.close()
        await first.database.close()
        await clock.advance(first.service.delivery.leases.ttl.total_seconds())
        first.sink.post_to = real_post  # type: ignore[method-assign]

        second = await harness(await open_store(), clock, sink=first.sink)
        try:
            await second.service.start()
            await second.settle()
            assert first.sink.fallback == [(CHANNEL.conversation_id, "the answer")]
            statuses = await second.database.run(repository.delivery_statuses)
            assert list(statuses.values()) == ["delivered"]
        finally:
            await second.close()

    async def test_killed_while_it_ran_the_restart_answers_without_running_it_again(
        self, open_store: StoreFactory, clock: FakeClock
    ) -> None:
        """Cut off mid-task: the restart answers that the task failed, and why, instead of
        leaving the person who asked waiting forever (or posting half an answer as whole)."""
        long_sleep = ToolCall(id="s3", name="sleep", arguments='{"seconds": 100}')
        first = await harness(await open_store(), clock, [Step(tool_calls=(long_sleep,))])
        await first.service.spawn(first.request(task="answer here", reply=True))
        await clock.wait_for_sleepers()
        await first.close()
        await first.database.close()
        await clock.advance(first.service.delivery.leases.ttl.total_seconds())

        second = await harness(await open_store(), clock, sink=first.sink)
        try:
            await second.service.start()
            await second.settle()
            ((where, said),) = first.sink.fallback
            assert where == CHANNEL.conversation_id
            assert said.startswith("❌ **Subagent** failed. Reason: the bot stopped")
            assert second.provider.calls == []
        finally:
            await second.close()


async def test_a_replys_life_is_three_transactions_beside_the_session_log(
    database: Database, clock: FakeClock, store_units: list[str]
) -> None:
    """Its row, already running, with its session's lease; at the end the row, the
    completion recorded and claimed; the delivered mark. No thread, so nothing between."""
    units = store_units
    h = await harness(
        database, clock, lambda _m: Step(text="done"), leases=Leases(database, clock=clock)
    )
    try:
        units.clear()  # what starting the services read
        await h.service.spawn(h.request(reply=True))
        await h.settle()
        assert h.sink.fallback == [(CHANNEL.conversation_id, "done")]
        assert len(units) == 3, units
    finally:
        await h.close()
