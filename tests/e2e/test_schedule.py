"""``/schedule`` end to end: the real client, the fake Discord, the scheduler on a fake clock.

The scheduler's loop is not running here: each test moves the clock and calls
:meth:`ScheduleRunner.tick` itself, so what is due, and when, is the test's to say.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from structlog.testing import capture_logs

from core.providers.scripted import Step
from core.providers.types import ToolCall
from core.scheduler import repository
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import (
    TIMEOUT,
    bound_thread,
    content,
    contents,
    done,
    ephemeral,
    handlers_done,
    run,
    settle,
)

FAST = {"min_interval_seconds": 5}


def answer_with_last(messages: list) -> Step:
    """The model answers each turn with the words it was given last."""
    return Step(text=f"done: {messages[-1].content}")


async def tick(bot: Bot, seconds: float = 0) -> int:
    """Move the clock on and let the scheduler claim and start what is due."""
    if seconds:
        await bot.clock.advance(seconds)
    claimed = await bot.services.scheduler.tick()
    async with asyncio.timeout(TIMEOUT):
        await bot.services.scheduler.wait_started()
    return claimed


async def says(bot: Bot, thread_id: int, text: str) -> None:
    """Alice writes in the thread, and the bot has handled it."""
    await bot.fake.user_says(thread_id, bot.world.alice, text)
    await bot.fake.sync(bot.world.bot)
    await handlers_done("message")


async def jobs(bot: Bot) -> list:
    return await bot.services.database.run(repository.list_jobs, str(bot.world.guild.id), None)


async def runs(bot: Bot, job_id: str) -> list:
    return await bot.services.database.run(repository.runs_of, job_id)


class TestInABoundThread:
    async def test_a_one_shot_is_a_new_turn_announced_in_the_thread(
        self, start_bot: StartBot
    ) -> None:
        """``in 20m`` in a bound thread: confirmed in one sentence; 20 minutes later the
        thread says ⏰ Scheduled and the session gets the task word for word, once."""
        bot = await start_bot(answer_with_last)
        record, thread_id = await bound_thread(bot)
        reply = await run(
            bot,
            bot.world.alice,
            "schedule add",
            thread_id,
            when="in 20m",
            task="summarise the overnight issues",
            name="digest",
        )
        text = content(reply)
        assert not ephemeral(reply)
        (job,) = await jobs(bot)
        assert text == (
            f"⏰ Scheduled “digest”. Runs once in 20 minutes, at Thu 1 Jan 00:20 UTC. "
            f"Job `{job.job_id}`."
        )
        assert await tick(bot, 19 * 60) == 0
        assert await tick(bot, 60) == 1
        await settle(bot, record.target_session_key)
        shown = contents(bot, thread_id)
        assert "⏰ Scheduled: digest" in shown
        assert shown[-1].endswith("done: summarise the overnight issues")
        assert await tick(bot, 1) == 0  # never twice
        (run_row,) = await runs(bot, job.job_id)
        assert run_row.status == "finished"
        assert not await jobs(bot)  # a one-shot that ran is done

    async def test_an_archived_thread_is_reopened_by_its_run(self, start_bot: StartBot) -> None:
        """As when a person speaks in it: the run's line reopens the thread, the turn runs."""
        bot = await start_bot(answer_with_last)
        record, thread_id = await bound_thread(bot)
        await run(bot, bot.world.alice, "schedule add", thread_id, when="in 5m", task="wake")
        await bot.fake.archive_thread(thread_id)
        await tick(bot, 300)
        await settle(bot, record.target_session_key)
        assert bot.fake.channel(thread_id).archived is False
        assert contents(bot, thread_id)[-1].endswith("done: wake")

    async def test_a_run_waits_behind_a_running_turn_as_a_follow_up(
        self, start_bot: StartBot
    ) -> None:
        """A run falling due mid-turn is queued behind it, never a steer."""
        sleep = ToolCall(id="s1", name="sleep", arguments='{"seconds": 250}')

        def script(messages: list) -> Step:
            last = messages[-1]
            if last.role == "user" and "work long" in str(last.content):
                return Step(tool_calls=(sleep,))
            return Step(text=f"done: {last.content if last.role == 'user' else 'long work'}")

        bot = await start_bot(script)
        record, thread_id = await bound_thread(bot)
        await run(bot, bot.world.alice, "schedule add", thread_id, when="in 1m", task="ping")
        await says(bot, thread_id, "work long")
        async with asyncio.timeout(TIMEOUT):
            await bot.clock.wait_for_sleepers()
        await tick(bot, 60)
        agent = await bot.services.runtime.get(record.target_session_key)
        assert [m.text for m in agent.snapshot().follow_up_queue] == ["ping"]
        await bot.clock.advance(250)
        await settle(bot, record.target_session_key)
        assert contents(bot, thread_id)[-1].endswith("done: ping")


class TestInAChannel:
    async def test_a_recurring_job_spawns_a_run_thread_each_time(self, start_bot: StartBot) -> None:
        """``every 5m`` in a plain channel: each run is a subagent in a new thread there,
        announced once in the channel; a reply in that thread continues that run."""
        bot = await start_bot(answer_with_last, scheduler=FAST)
        channel = bot.world.channel.id
        reply = await run(
            bot,
            bot.world.alice,
            "schedule add",
            when="every 5m",
            task="check the deploy",
            name="deploy",
        )
        assert "Runs every 5 minutes" in content(reply)
        (job,) = await jobs(bot)
        assert await tick(bot, 300) == 1
        await done(bot)
        assert await tick(bot, 300) == 1
        await done(bot)
        threads = [b for b in bot.services.bindings.live()]
        await tick(bot, 1)  # the runs that ended are seen to
        announced = [c for c in contents(bot, channel) if c.startswith("⏰ “deploy” is done")]
        started = [c for c in contents(bot, channel) if c.startswith("⏰ Scheduled: deploy")]
        assert len(started) == 2
        assert len(announced) == 2
        assert all(run.status in ("working", "finished") for run in await runs(bot, job.job_id))
        del threads

    async def test_a_reply_in_a_run_thread_continues_that_run(self, start_bot: StartBot) -> None:
        """The run's thread stays bound after its task: a reply there is a new turn of the
        run's own session, with its context."""
        bot = await start_bot(answer_with_last)
        await run(bot, bot.world.alice, "schedule add", when="in 1h", task="weekly numbers")
        await tick(bot, 3600)
        await done(bot)
        (binding,) = bot.services.bindings.live()
        thread_id = int(binding.conversation.conversation_id)
        assert (await bot.services.subagents.get(binding.target_session_key)).state == "completed"
        await says(bot, thread_id, "and last week's?")
        await settle(bot, binding.target_session_key)
        assert contents(bot, thread_id)[-1].endswith("done: and last week's?")
        agent = await bot.services.runtime.get(binding.target_session_key)
        said = [m.content for m in agent.derive_messages() if m.role == "user"]
        assert said[0] == "weekly numbers"

    async def test_a_run_that_cannot_start_says_so_where_it_runs(self, start_bot: StartBot) -> None:
        """Discord refuses the run's thread: the run is recorded failed and the channel is
        told why, once; the next run tries again."""
        bot = await start_bot(answer_with_last)
        channel = bot.world.channel.id
        await run(bot, bot.world.alice, "schedule add", when="every 1h", task="t", name="hourly")
        bot.fake.fail_next("POST", f"/channels/{channel}/threads", 403, code=50013)
        await tick(bot, 3600)
        (job,) = await jobs(bot)
        (failed,) = await runs(bot, job.job_id)
        assert failed.status == "failed"
        (said,) = [c for c in contents(bot, channel) if c.startswith("⚠️ ⏰ “hourly” did not run:")]
        assert job.last_result is not None
        assert job.last_result.startswith("failed: could not start:")
        assert said.endswith(".")
        assert not said.endswith("..")
        await tick(bot, 3600)
        await done(bot)
        assert [r.status for r in await runs(bot, job.job_id)][1] == "working"


class TestRules:
    async def test_a_bad_spec_is_refused_and_nothing_saved(self, start_bot: StartBot) -> None:
        bot = await start_bot()
        reply = await run(bot, bot.world.alice, "schedule add", when="tomorrow", task="x")
        assert ephemeral(reply)
        assert content(reply).startswith('"tomorrow" is not a schedule')
        assert not await jobs(bot)

    async def test_limits_are_refused_naming_them(self, start_bot: StartBot) -> None:
        bot = await start_bot(scheduler={"max_jobs_per_user": 1, "min_interval_seconds": 600})
        alice = bot.world.alice
        short = await run(bot, alice, "schedule add", when="every 5m", task="x")
        assert "minimum of 10 minutes" in content(short)
        zone = await run(bot, alice, "schedule add", when="0 9 * * *", task="x", tz="Mars/Base")
        assert "Mars/Base" in content(zone)
        await run(bot, alice, "schedule add", when="every 1h", task="first")
        over = await run(bot, alice, "schedule add", when="every 1h", task="second")
        assert ephemeral(over)
        assert "already have 1 scheduled jobs" in content(over)
        assert [j.task for j in await jobs(bot)] == ["first"]

    async def test_a_non_owner_cannot_remove_a_job(self, start_bot: StartBot) -> None:
        bot = await start_bot()
        bob = bot.fake.add_member(bot.world.guild, "bob")
        await run(bot, bot.world.alice, "schedule add", when="every 1h", task="x")
        (job,) = await jobs(bot)
        refused = await run(bot, bob, "schedule remove", id=job.job_id)
        assert ephemeral(refused)
        assert "only its owner or an administrator" in content(refused)
        assert len(await jobs(bot)) == 1
        removed = await run(bot, bot.world.admin, "schedule remove", id=job.job_id)
        assert content(removed).startswith("Removed")
        assert not await jobs(bot)

    async def test_the_flag_off_refuses_and_stops_firing(self, start_bot: StartBot) -> None:
        bot = await start_bot(answer_with_last)
        await run(bot, bot.world.alice, "schedule add", when="every 1h", task="x")
        await run(bot, bot.world.admin, "config set", key="scheduledTasks", value="off")
        refused = await run(bot, bot.world.alice, "schedule add", when="every 1h", task="y")
        assert "scheduledTasks" in content(refused)
        with capture_logs() as logs:
            assert await tick(bot, 3600) == 1
        (job,) = await jobs(bot)
        (skipped,) = await runs(bot, job.job_id)
        assert skipped.status == "skipped"
        assert [e["event"] for e in logs if e["event"].startswith("scheduler.run")] == [
            "scheduler.run.skipped"
        ]
        assert not [c for c in contents(bot, bot.world.channel.id) if "⏰ Scheduled:" in c]


class TestOverlapDowntimeAndLoss:
    async def test_a_run_due_while_the_last_one_works_is_skipped(self, start_bot: StartBot) -> None:
        sleep = ToolCall(id="s1", name="sleep", arguments='{"seconds": 250}')

        def script(messages: list) -> Step:
            if messages[-1].role == "user" and "slow" in str(messages[-1].content):
                return Step(tool_calls=(sleep,))
            return Step(text="ok")

        bot = await start_bot(script, scheduler=FAST)
        record, thread_id = await bound_thread(bot)
        await run(bot, bot.world.alice, "schedule add", thread_id, when="every 1m", task="slow")
        (job,) = await jobs(bot)
        with capture_logs() as logs:
            await tick(bot, 60)
            await tick(bot, 60)
        statuses = [r.status for r in await runs(bot, job.job_id)]
        assert statuses == ["working", "skipped"]
        (skip,) = [e for e in logs if e["event"] == "scheduler.run.skipped"]
        assert skip["reason"] == "the previous run was still working"
        await bot.clock.advance(200)  # the sleep ends; so does the run's turn
        await settle(bot, record.target_session_key)
        await bot.services.scheduler.tick()  # (a catch-up run fell due meanwhile, too)
        assert [r.status for r in await runs(bot, job.job_id)][:2] == ["finished", "skipped"]

    async def test_three_missed_slots_run_once_with_one_line(self, start_bot: StartBot) -> None:
        bot = await start_bot(answer_with_last, scheduler=FAST)
        record, thread_id = await bound_thread(bot)
        await run(
            bot,
            bot.world.alice,
            "schedule add",
            thread_id,
            when="every 5m",
            task="digest",
            name="digest",
        )
        (job,) = await jobs(bot)
        await bot.clock.advance(15 * 60 + 30)  # the bot "was down" for three slots
        assert await tick(bot) == 1
        await settle(bot, record.target_session_key)
        lines = contents(bot, thread_id)
        downtime = (
            "⏰ While the bot was offline, 3 runs of “digest” were due; ran the latest once now."
        )
        assert lines.count(downtime) == 1
        assert lines.count("⏰ Scheduled: digest") == 1
        (only,) = await runs(bot, job.job_id)
        assert only.due_count == 3

    async def test_runs_older_than_the_grace_are_recorded_missed(self, start_bot: StartBot) -> None:
        bot = await start_bot(answer_with_last, scheduler={**FAST, "misfire_grace_seconds": 60})
        _, thread_id = await bound_thread(bot)
        await run(
            bot, bot.world.alice, "schedule add", thread_id, when="every 1h", task="d", name="d"
        )
        (job,) = await jobs(bot)
        await bot.clock.advance(2 * 3600 + 600)
        with capture_logs() as logs:
            await tick(bot)
        (missed,) = await runs(bot, job.job_id)
        assert (missed.status, missed.due_count) == ("missed", 2)
        assert [e["event"] for e in logs if e["event"].startswith("scheduler.run")] == [
            "scheduler.run.missed"
        ]
        assert any("none ran" in c for c in contents(bot, thread_id))
        assert "⏰ Scheduled: d" not in contents(bot, thread_id)

    async def test_a_deleted_thread_pauses_the_job_and_tells_its_owner_once(
        self, start_bot: StartBot
    ) -> None:
        bot = await start_bot(answer_with_last, scheduler=FAST)
        record, thread_id = await bound_thread(bot)
        await run(
            bot, bot.world.alice, "schedule add", thread_id, when="every 5m", task="d", name="d"
        )
        await bot.fake.delete_channel(thread_id)
        await bot.fake.sync(bot.world.bot)
        await handlers_done("raw_thread_delete")
        await done(bot)
        await tick(bot, 300)
        await tick(bot, 300)
        (job,) = await jobs(bot)
        assert job.state == "paused"
        notices = [
            m for m in bot.fake.messages_in(bot.world.channel.id) if "is paused" in m.content
        ]
        assert len(notices) == 1
        assert notices[0].content.startswith(f"<@{bot.world.alice.id}> ⏰ Your scheduled job “d”")
        mentions = [
            r.json.get("allowed_mentions")
            for r in bot.fake.requests_matching(
                "POST", f"/channels/{bot.world.channel.id}/messages"
            )
            if "is paused" in (r.json or {}).get("content", "")
        ]
        assert mentions == [{"parse": [], "users": [bot.world.alice.id]}]
        del record

    async def test_a_run_claimed_by_a_dead_process_is_started_once(
        self, start_bot: StartBot
    ) -> None:
        """A claim whose process died before it posted: the next process's pick-up starts
        it, once; picking up again finds nothing."""
        bot = await start_bot(answer_with_last)
        record, thread_id = await bound_thread(bot)
        await run(
            bot,
            bot.world.alice,
            "schedule add",
            thread_id,
            when="in 1m",
            task="later",
            name="later",
        )
        (job,) = await jobs(bot)
        await bot.clock.advance(60)
        scheduler = bot.services.scheduler
        dead = "elsewhere/1/dead"
        now = bot.clock.now()
        claimed = await bot.services.database.run(
            lambda conn: repository.claim_due(
                conn,
                now,
                plan=lambda j: repository.Planned(
                    due_at=j.next_run_at,
                    due_count=1,
                    missed=False,
                    late=False,
                    next_run_at=None,
                ),
                owner=dead,
                lease_until=now - timedelta(seconds=1),  # already lapsed: the owner is gone
                shards=bot.services.shards,
            )
        )
        assert len(claimed) == 1
        await scheduler.pick_up()
        await bot.clock.advance(1)
        async with asyncio.timeout(TIMEOUT):
            await scheduler.wait_started()
        await settle(bot, record.target_session_key)
        await scheduler.pick_up()
        await scheduler.wait_started()
        await settle(bot, record.target_session_key)
        lines = contents(bot, thread_id)
        assert lines.count("⏰ Scheduled: later") == 1
        assert sum(1 for c in lines if c.endswith("done: later")) == 1
        assert [r.status for r in await runs(bot, job.job_id)] == ["working"]


class TestWakeup:
    async def test_an_agent_queues_one_later_turn_in_its_own_session(
        self, start_bot: StartBot
    ) -> None:
        wake = ToolCall(
            id="w1", name="schedule_wakeup", arguments='{"in": "20m", "note": "check the deploy"}'
        )

        def script(messages: list) -> Step:
            last = messages[-1]
            if (
                last.role == "user"
                and "deploy" in str(last.content)
                and "check" not in str(last.content)
            ):
                return Step(tool_calls=(wake,))
            if last.role == "tool":
                return Step(text="I will check back in 20 minutes.")
            return Step(text=f"done: {last.content}")

        bot = await start_bot(script)
        record, thread_id = await bound_thread(bot)
        await says(bot, thread_id, "deploy")
        await settle(bot, record.target_session_key)
        (job,) = await jobs(bot)
        assert (job.kind, job.owner_id, job.task) == (
            "wakeup",
            str(bot.world.alice.id),
            "check the deploy",
        )
        listed = await run(bot, bot.world.alice, "schedule list")
        assert job.job_id in content(listed)
        await tick(bot, 20 * 60)
        await settle(bot, record.target_session_key)
        assert contents(bot, thread_id)[-1].endswith("done: check the deploy")


class TestListAndButtons:
    async def test_the_list_is_yours_an_admin_sees_all_and_a_button_pauses(
        self, start_bot: StartBot
    ) -> None:
        bot = await start_bot(answer_with_last)
        bob = bot.fake.add_member(bot.world.guild, "bob")
        await run(bot, bot.world.alice, "schedule add", when="every 1h", task="a", name="mine")
        await run(
            bot, bob, "schedule add", when="0 9 * * 1-5", task="b", name="bobs", tz="Europe/Paris"
        )
        (alice_job,) = [j for j in await jobs(bot) if j.name == "mine"]

        mine = await run(bot, bot.world.alice, "schedule list")
        assert ephemeral(mine)
        assert "**mine**" in content(mine)
        assert "bobs" not in content(mine)
        assert "every 1h (UTC)" in content(mine)
        assert "last: not run yet" in content(mine)
        everyone = await run(bot, bot.world.admin, "schedule list")
        assert "**bobs**" in content(everyone)
        assert f"owner <@{bob.id}>" in content(everyone)
        assert "0 9 * * 1-5 (Europe/Paris)" in content(everyone)

        pause = f"tb:schedule:pause:{alice_job.job_id}"
        refused = await bot.fake.click_button(mine.message_id, pause, bob)
        async with asyncio.timeout(TIMEOUT):
            answer = await refused.wait_response()
        assert "only its owner or an administrator" in content(answer)
        pressed = await bot.fake.click_button(mine.message_id, pause, bot.world.alice)
        async with asyncio.timeout(TIMEOUT):
            answer = await pressed.wait_response()
        assert content(answer).startswith("Paused “mine”")
        assert [j.state for j in await jobs(bot) if j.name == "mine"] == ["paused"]
        assert await tick(bot, 3600) == 0  # a paused job does not run

        resumed = await run(bot, bot.world.alice, "schedule resume", id=alice_job.job_id)
        assert "Next run Thu 1 Jan 02:00 (in 1 hour)" in content(resumed)

    async def test_a_job_whose_owner_left_is_paused(self, start_bot: StartBot) -> None:
        bot = await start_bot(answer_with_last)
        bob = bot.fake.add_member(bot.world.guild, "bob")
        await run(bot, bob, "schedule add", when="every 1h", task="b", name="bobs")
        del bot.fake.state.guilds[bot.world.guild.id].members[bob.id]
        with capture_logs() as logs:
            await tick(bot, 3600)
        (job,) = await bot.services.database.run(
            repository.list_jobs, str(bot.world.guild.id), str(bob.id)
        )
        assert (job.state, job.paused_reason) == ("paused", "its owner is no longer in the server")
        (skip,) = [e for e in logs if e["event"] == "scheduler.run.skipped"]
        assert skip["reason"] == "its owner left the server"


async def test_catch_up_runs_start_a_second_apart(start_bot: StartBot) -> None:
    """After a downtime, runs that fell due start one by one, never in a burst at start-up."""
    bot = await start_bot(answer_with_last, scheduler=FAST)
    for name in ("first", "second"):
        await run(bot, bot.world.alice, "schedule add", when="every 5m", task=name, name=name)
    channel = bot.world.channel.id
    await bot.clock.advance(16 * 60)  # the bot "was down": three slots of each job passed
    assert await bot.services.scheduler.tick() == 2

    def started() -> list[str]:
        return [c for c in contents(bot, channel) if "⏰ Scheduled:" in c]

    async with asyncio.timeout(TIMEOUT):
        await bot.fake.wait_for_message(channel, lambda m: "⏰ Scheduled:" in m.content)
    await done(bot)
    assert len(started()) == 1  # the second waits for its turn on the clock
    await bot.clock.advance(1)
    async with asyncio.timeout(TIMEOUT):
        await bot.services.scheduler.wait_started()
    await done(bot)
    assert len(started()) == 2
