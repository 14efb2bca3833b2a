"""A session's thread taken away while its task runs, end to end.

A deleted thread ends its binding when the gateway says so, not when the bot
next tries to write there: a session waiting in a long tool call sends
nothing to its thread, so without the event its binding would stay live on a
thread that is gone until the task's announcement failed. (The plain idle
case, a session that finished its task, is in
``test_discord_refusals.TestThreadDeletedWhileIdle``.) Whatever ended the
binding, the result then falls back to the channel and says only what is true.
"""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from core.subagents import repository as _repository
from fakediscord.recording import RecordedRequest
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import (
    ANNOUNCED,
    TIMEOUT,
    contents,
    done,
    handlers_done,
    sleep_then_answer,
    spawn,
    thread_of,
)


async def delete_thread(bot: Bot, thread_id: int) -> None:
    """Delete the thread in the fake and wait until the bot has handled the gateway event."""
    await bot.fake.delete_channel(thread_id)
    await bot.fake.sync(bot.world.bot)
    await handlers_done("raw_thread_delete")


def touching(bot: Bot, thread_id: int, since: int) -> list[RecordedRequest]:
    """Requests since index ``since`` aimed at the thread (its routes, or a webhook's
    ``thread_id``)."""
    return [
        r
        for r in bot.fake.requests[since:]
        if f"/channels/{thread_id}" in r.path or r.query.get("thread_id") == str(thread_id)
    ]


async def waiting_session(bot: Bot, task: str) -> int:
    """Spawn a session-mode subagent and return its thread once it waits in its tool."""
    thread_id = thread_of(await spawn(bot, task, mode="session"))
    async with asyncio.timeout(TIMEOUT):
        await bot.clock.wait_for_sleepers()
        await bot.client.account.drain()
    return thread_id


async def test_a_quiet_thread_deleted_mid_task_unbinds_at_once_and_the_result_falls_back(
    start_bot: StartBot,
) -> None:
    """Deleted while its session sleeps in a tool: the binding ends on the event (thread-deleted,
    no farewell, nothing more tried there); the result then reaches the channel and says the
    binding ended."""
    bot = await start_bot(sleep_then_answer)
    thread_id = await waiting_session(bot, "delta")
    record = bot.binding()
    since = len(bot.fake.requests)

    with capture_logs() as logs:
        await delete_thread(bot, thread_id)
        # Before the task ends: only the gateway event can have ended the binding.
        assert bot.services.bindings.get(record.binding_id) is None
        await bot.clock.advance(5)
        await done(bot)

    (ended,) = [e for e in logs if e["event"] == "binding.unbound"]
    assert (ended["binding_id"], ended["reason"]) == (record.binding_id, "thread-deleted")
    assert touching(bot, thread_id, since) == []  # no farewell, no answer, no announcement
    (fallback,) = [e for e in logs if e["event"] == "delivery.fallback"]
    assert fallback["reason"] == "no-active-binding"
    (announcement,) = [c for c in contents(bot, bot.world.channel.id) if ANNOUNCED in c]
    assert "stays active" not in announcement
    assert "binding has ended" in announcement
    assert announcement.endswith("result of delta")
    statuses = await bot.services.database.run(_repository.delivery_statuses)
    assert list(statuses.values()) == ["delivered"]


async def test_deleting_one_thread_leaves_the_other_bindings_alone(start_bot: StartBot) -> None:
    """Two sessions: the event ends the deleted thread's binding only; the other completes in
    its own thread as before."""
    bot = await start_bot(sleep_then_answer)
    gone = await waiting_session(bot, "one")
    kept = thread_of(await spawn(bot, "two", mode="session"))
    async with asyncio.timeout(TIMEOUT):
        await bot.clock.wait_for_sleepers(2)

    await delete_thread(bot, gone)
    (live,) = bot.services.bindings.live()
    assert live.conversation.conversation_id == str(kept)
    await bot.clock.advance(5)
    await done(bot)

    (announcement,) = [c for c in contents(bot, kept) if ANNOUNCED in c]
    assert "stays active" in announcement  # bound, in its thread
    (fallback,) = [c for c in contents(bot, bot.world.channel.id) if ANNOUNCED in c]
    assert fallback.endswith("result of one")
    assert bot.services.bindings.get(live.binding_id) is not None  # still bound


async def test_a_thread_unfocused_mid_task_is_not_called_unreachable(start_bot: StartBot) -> None:
    """/unfocus while the session works: the result falls back and says the binding ended,
    without claiming the thread (still there to read) is gone or unreachable."""
    bot = await start_bot(sleep_then_answer)
    thread_id = await waiting_session(bot, "epsilon")
    w = bot.world
    handle = await bot.fake.invoke_command(w.guild, thread_id, w.alice, "unfocus")
    async with asyncio.timeout(TIMEOUT):
        await handle.wait_followups(1)
    assert list(bot.services.bindings.live()) == []
    await bot.clock.advance(5)
    await done(bot)

    (announcement,) = [c for c in contents(bot, w.channel.id) if ANNOUNCED in c]
    assert "binding has ended" in announcement
    assert "stays active" not in announcement
    assert "reached" not in announcement
    assert announcement.endswith("result of epsilon")
