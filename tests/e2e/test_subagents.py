"""Subagents end to end over the fake Discord: where each completion lands, and how often."""

from __future__ import annotations

import asyncio
from typing import Any

from core.providers.scripted import Step
from core.providers.types import ToolCall
from core.subagents import repository
from tests.e2e.conftest import StartBot
from tests.e2e.helpers import (
    ANNOUNCED,
    TIMEOUT,
    contents,
    done,
    persona_messages,
    run,
    sleep_then_answer,
    spawn,
    status_line,
    thread_of,
)

FAREWELL = "no longer bound to its agent: the subagent finished its task"


async def test_two_concurrent_completions_land_in_their_own_threads_once(
    start_bot: StartBot,
) -> None:
    """Two subagents from one channel finish together: each result once, in its own thread."""
    bot = await start_bot(sleep_then_answer)
    threads = {task: thread_of(await spawn(bot, task)) for task in ("alpha", "beta")}
    async with asyncio.timeout(TIMEOUT):
        await bot.clock.wait_for_sleepers(2)
    await bot.clock.advance(5)  # both tools end at the same moment
    await done(bot)

    for task, thread_id in threads.items():
        said = contents(bot, thread_id)
        assert [c for c in said if ANNOUNCED in c] == ["✅ **Subagent** completed its task."]
        answers = [m.content for m in persona_messages(bot.fake, thread_id)]
        # the answer follows the compact line of its sleep call, in one message
        assert [a.split("\n")[-1] for a in answers].count(f"result of {task}") == 1
        assert FAREWELL in said[-1]  # run mode: the thread is let go after the announcement
        assert said.index(next(c for c in said if ANNOUNCED in c)) < len(said) - 1
    parent = contents(bot, bot.world.channel.id)
    assert not [c for c in parent if "result of" in c or ANNOUNCED in c]
    assert list(bot.services.bindings.live()) == []
    statuses = await bot.services.database.run(repository.delivery_statuses)
    assert sorted(statuses.values()) == ["delivered", "delivered"]
    states = sorted(r.state for r in await bot.services.subagents.list())
    assert states == ["completed", "completed"]


async def test_restart_between_completion_and_delivery_delivers_once(
    start_bot: StartBot,
) -> None:
    """The process dies after recording the completion: the next start posts it, once."""
    first = await start_bot([Step(text="the result")], db_name="restart.db")

    async def killed(*_args: Any) -> bool:
        raise RuntimeError("process killed between completion and delivery")

    first.services.subagents.delivery.deliver = killed  # type: ignore[method-assign]
    thread_id = thread_of(await spawn(first, "work"))
    await done(first)
    assert not [c for c in contents(first, thread_id) if ANNOUNCED in c]
    await first.client.close()
    await first.services.close()

    second = await start_bot([], db_name="restart.db")
    await second.services.subagents.start()  # the pick-up on_ready began, scheduled
    await done(second)
    statuses = await second.services.database.run(repository.delivery_statuses)
    assert list(statuses.values()) == ["delivered"]
    said = contents(second, thread_id)
    assert len([c for c in said if ANNOUNCED in c]) == 1
    assert FAREWELL in said[-1]


async def test_session_mode_keeps_the_thread_and_continues_with_history(
    start_bot: StartBot,
) -> None:
    """A session is announced once, stays bound, and the next message continues it."""
    bot = await start_bot([Step(text="first answer"), Step(text="second answer")])
    thread_id = thread_of(await spawn(bot, "remember 7", mode="session"))
    await done(bot)
    (announcement,) = [c for c in contents(bot, thread_id) if ANNOUNCED in c]
    assert "stays active" in announcement
    record = bot.binding()

    await bot.fake.user_says(thread_id, bot.world.alice, "what number?")
    async with asyncio.timeout(TIMEOUT):
        await bot.provider.wait_calls(2)
        agent = await bot.services.runtime.get(record.target_session_key)
        await agent.wait_idle()
    await done(bot)
    sent = bot.provider.calls[1]
    assert [m.content for m in sent if m.role == "user"] == ["remember 7", "what number?"]
    assert [m.content for m in sent if m.role == "assistant"] == ["first answer"]
    assert len([c for c in contents(bot, thread_id) if ANNOUNCED in c]) == 1  # once per task
    assert bot.binding() == record
    (subagent,) = await bot.services.subagents.list()
    assert subagent.state == "idle"


async def test_legacy_path_is_untouched_when_spawning_is_off(start_bot: StartBot) -> None:
    """Flag off: the answer alone in the channel, no thread, no subagent record, no header."""
    bot = await start_bot([Step(text="legacy answer")], spawn_threads=False)
    await spawn(bot, "answer here")
    await bot.fake.wait_for_message(bot.world.channel.id, lambda m: m.content == "legacy answer")
    await done(bot)
    assert not [c for c in contents(bot, bot.world.channel.id) if ANNOUNCED in c]
    assert await bot.services.subagents.list() == []


async def test_legacy_answer_survives_a_restart_before_it_was_posted(
    start_bot: StartBot,
) -> None:
    """Flag off, the process dies between the spawn and its answer's post: the next start
    posts the answer where it was asked, once, as the bot and without a header."""
    first = await start_bot([Step(text="legacy answer")], spawn_threads=False, db_name="r.db")

    async def killed(*_args: Any) -> bool:
        raise RuntimeError("process killed before the answer was posted")

    first.services.subagents.delivery.deliver = killed  # type: ignore[method-assign]
    (reply,) = await spawn(first, "answer here")
    assert "answer will be posted here" in reply.body["content"]
    await done(first)
    channel = first.world.channel.id
    assert "legacy answer" not in contents(first, channel)
    await first.client.close()
    await first.services.close()

    second = await start_bot([], spawn_threads=False, db_name="r.db")
    await second.services.subagents.start()  # the pick-up on_ready began, scheduled
    await done(second)
    answers = [m for m in second.fake.messages_in(channel) if m.content == "legacy answer"]
    assert len(answers) == 1
    assert answers[0].webhook_id is None
    assert second.provider.calls == []  # answered before the restart: not run again
    assert await second.services.subagents.list() == []


async def test_a_long_legacy_answer_is_posted_in_as_many_messages_as_it_needs(
    start_bot: StartBot,
) -> None:
    long = "\n".join(f"line {i} " + "x" * 60 for i in range(60))  # about 4,100 characters
    bot = await start_bot([Step(text=long)], spawn_threads=False)
    await spawn(bot, "answer at length")
    await done(bot)
    parts = [c for c in contents(bot, bot.world.channel.id) if c.startswith("line ")]
    assert len(parts) == 3
    assert all(len(part) <= 2000 for part in parts)
    assert "\n".join(parts) == long


async def test_a_long_answer_cut_short_by_a_refusal_goes_on_where_it_stopped(
    start_bot: StartBot,
) -> None:
    """Discord refuses the second part once (a rate limit): the retry posts the second and
    third parts, never the first again."""
    long = "\n".join(f"line {i} " + "x" * 60 for i in range(60))
    bot = await start_bot([Step(text=long)], spawn_threads=False)
    channel = bot.world.channel.id
    held = bot.fake.hold("POST", f"/channels/{channel}/messages")
    await spawn(bot, "answer at length")
    async with asyncio.timeout(TIMEOUT):
        await held.wait_entered(1)
    held.release(1)  # part 1 lands...
    async with asyncio.timeout(TIMEOUT):
        await held.wait_entered(2)
    bot.fake.fail_next("POST", f"/channels/{channel}/messages", 429, via_header=False)
    held.release()  # ...part 2 is refused once
    async with asyncio.timeout(TIMEOUT):
        await bot.clock.wait_for_sleepers()
    await bot.clock.advance(60)
    await done(bot)
    parts = [c for c in contents(bot, channel) if c.startswith("line ")]
    assert len(parts) == 3
    assert "\n".join(parts) == long


async def test_legacy_path_runs_the_named_agent(start_bot: StartBot) -> None:
    """Flag off, agent:<id> still runs that profile: its prompt, and agent.activated logged."""
    agents = {
        "scout": {"display_name": "Scout", "system_prompt": "You are Scout."},
        "writer": {"display_name": "Writer", "system_prompt": "You are Writer."},
    }
    bot = await start_bot([Step(text="legacy answer")], spawn_threads=False, agents=agents)
    await spawn(bot, "answer here", agent="writer")
    await bot.fake.wait_for_message(bot.world.channel.id, lambda m: m.content == "legacy answer")
    await done(bot)
    (system, *_rest) = bot.provider.calls[0]
    assert system.content == "You are Writer."
    (key,) = bot.services.runtime.resident()
    tree = await bot.services.sessions.load(key)
    assert [e.payload["agent"] for e in tree.events if e.type == "agent.activated"] == ["writer"]


async def test_thread_deleted_mid_run_falls_back_to_the_requester(start_bot: StartBot) -> None:
    """The thread disappears under a running subagent: the result goes to the channel, logged."""
    bot = await start_bot(sleep_then_answer)
    thread_id = thread_of(await spawn(bot, "gamma"))
    async with asyncio.timeout(TIMEOUT):
        await bot.clock.wait_for_sleepers()
    await bot.fake.delete_channel(thread_id)
    await bot.clock.advance(5)
    await done(bot)
    (fallback,) = [c for c in contents(bot, bot.world.channel.id) if ANNOUNCED in c]
    assert fallback.endswith("result of gamma")
    assert list(bot.services.bindings.live()) == []


async def test_agents_list_shows_states_threads_and_usage(start_bot: StartBot) -> None:
    """/agents list: a completed run and an idle session, each with its usage."""
    bot = await start_bot([Step(text="one"), Step(text="two")])
    await spawn(bot, "run task")
    await done(bot)
    session_thread = thread_of(await spawn(bot, "session task", mode="session"))
    await done(bot)
    w = bot.world
    handle = await bot.fake.invoke_command(w.guild, w.channel, w.alice, "agents list")
    async with asyncio.timeout(TIMEOUT):
        reply = await handle.wait_response()
    text = reply.body["data"]["content"]
    lines = text.splitlines()
    (session_line,) = [line for line in lines if f"<#{session_thread}>" in line]
    (run_line,) = [line for line in lines if "no thread" in line]
    assert " idle" in session_line
    assert " completed" in run_line
    assert all("tokens" in line for line in lines)


async def test_restart_after_the_post_but_before_it_was_recorded_posts_nothing_more(
    start_bot: StartBot,
) -> None:
    """The announcement reached the thread, then the process died: the restart finds it there."""
    first = await start_bot([Step(text="the result")], db_name="midpost.db")

    async def died(*_args: Any) -> None:
        raise RuntimeError("process killed after the post, before recording it")

    first.services.subagents.delivery._mark = died  # type: ignore[method-assign]
    thread_id = thread_of(await spawn(first, "work"))
    await done(first)
    assert len([c for c in contents(first, thread_id) if ANNOUNCED in c]) == 1
    await first.client.close()
    await first.services.close()

    second = await start_bot([], db_name="midpost.db")
    await second.services.subagents.start()  # the pick-up on_ready began, scheduled
    await done(second)
    said = contents(second, thread_id)
    assert len([c for c in said if ANNOUNCED in c]) == 1
    statuses = await second.services.database.run(repository.delivery_statuses)
    assert list(statuses.values()) == ["delivered"]
    assert FAREWELL in said[-1]


async def test_a_spawn_from_a_bound_thread_reports_to_that_session(start_bot: StartBot) -> None:
    """/agents spawn inside a session's thread: that session is the parent and is told."""
    bot = await start_bot([Step(text="parent here"), Step(text="child result")])
    parent_thread = thread_of(await spawn(bot, "be the parent", mode="session"))
    await done(bot)
    parent = bot.binding()
    w = bot.world
    handle = await bot.fake.invoke_command(
        w.guild, parent_thread, w.alice, "agents spawn", {"task": "help out"}
    )
    async with asyncio.timeout(TIMEOUT):
        (reply,) = await handle.wait_followups(1)
    child_thread = thread_of([reply])
    await done(bot)
    assert child_thread != parent_thread
    agent = await bot.services.runtime.get(parent.target_session_key)
    (told,) = [e for e in agent.tree.events if e.type == "subagent.child_finished"]
    assert told.payload["result"] == "child result"
    assert len([c for c in contents(bot, child_thread) if ANNOUNCED in c]) == 1
    assert not [c for c in contents(bot, parent_thread) if "child result" in c]


async def test_a_parent_agent_spawns_a_child_in_its_own_thread(start_bot: StartBot) -> None:
    """spawn_subagent(thread=true) from a session: a new thread, the result there and to the
    parent, nothing in the parent's thread or the channel."""
    child_call = ToolCall(
        id="s1", name="spawn_subagent", arguments='{"task": "dig deeper", "thread": true}'
    )

    def script(messages: Any) -> Step:
        last = messages[-1]
        if last.role == "user" and last.content == "plan it":
            return Step(tool_calls=(child_call,))
        if last.role == "user" and last.content == "dig deeper":
            return Step(text="deep result")
        return Step(text="parent carries on")

    bot = await start_bot(script)
    parent_thread = thread_of(await spawn(bot, "plan it", mode="session"))
    await done(bot)
    parent = next(
        r
        for r in bot.services.bindings.live()
        if r.conversation.conversation_id == str(parent_thread)
    )
    (child,) = [
        r
        for r in await bot.services.subagents.list()
        if r.parent_session_key == parent.target_session_key
    ]
    assert child.thread
    threads = [c for c in bot.fake.state.channels.values() if c.parent_id == bot.world.channel.id]
    assert len(threads) == 2  # the parent's and the child's, both under the channel
    (child_thread,) = [t.id for t in threads if t.id != parent_thread]
    assert [c for c in contents(bot, child_thread) if ANNOUNCED in c] == [
        "✅ **Subagent** completed its task."
    ]
    assert "deep result" in [m.content for m in persona_messages(bot.fake, child_thread)]
    assert not [c for c in contents(bot, parent_thread) if "deep result" in c]
    assert not [c for c in contents(bot, bot.world.channel.id) if "deep result" in c]
    agent = await bot.services.runtime.get(parent.target_session_key)
    (told,) = [e for e in agent.tree.events if e.type == "subagent.child_finished"]
    assert told.payload["result"] == "deep result"


def announcements(said: list[str]) -> list[str]:
    """The completion announcements among a thread's messages (by their first mark)."""
    return [c for c in said if c.startswith(("✅", "❌", "⏱️", "⏹️", "⛔"))]


async def test_a_persons_cancel_is_announced_as_theirs_not_as_a_failure(
    start_bot: StartBot,
) -> None:
    """/cancel of a run-mode subagent: the announcement, the farewell, the tool line it cut
    and the status line name who cancelled; nothing says "failed"."""
    bot = await start_bot(sleep_then_answer)
    thread_id = thread_of(await spawn(bot, "long job"))
    async with asyncio.timeout(TIMEOUT):
        await bot.clock.wait_for_sleepers(1)
    await run(bot, bot.world.alice, "cancel", thread_id)
    await done(bot)

    said = contents(bot, thread_id)
    assert announcements(said) == ["⏹️ **Subagent** stopped. Cancelled by @alice"]
    assert "no longer bound to its agent: the subagent's task was cancelled" in said[-1]
    assert not [c for c in said if "failed" in c]
    assert any(c.endswith("· ⏹️ cancelled by @alice") for c in said)  # the sleep call's line
    assert status_line(bot.fake, thread_id).startswith("Status: ⏹️ Cancelled by @alice")
    (record,) = await bot.services.subagents.list()
    assert (record.state, record.outcome_reason) == ("cancelled", "Cancelled by @alice")


async def test_the_bots_own_timeout_names_no_person(start_bot: StartBot) -> None:
    """A task cancelled because its time ran out is announced timed out, and the thread
    does not name anyone as having cancelled it."""
    bot = await start_bot(sleep_then_answer, subagent_timeout=30)
    thread_id = thread_of(await spawn(bot, "long job"))
    async with asyncio.timeout(TIMEOUT):
        await bot.clock.wait_for_sleepers(2)  # the tool's sleep and the task's timeout
    await bot.clock.advance(30)
    await done(bot)

    said = contents(bot, thread_id)
    assert announcements(said) == ["⏱️ **Subagent** timed out. Reason: no result within 30s"]
    assert not [c for c in said if "@" in c]
    assert any(c.endswith("· ⏹️ cancelled: no result in time") for c in said)
