"""A bot restart keeps bindings: the next thread message reaches the same session."""

from __future__ import annotations

import asyncio

from core.providers.scripted import Step
from core.providers.types import ToolCall
from tests.e2e.conftest import StartBot
from tests.e2e.helpers import TIMEOUT, persona_messages, settle, spawn


async def test_restart_routes_thread_message_to_the_same_session(start_bot: StartBot) -> None:
    """After a restart over the same store, a thread message continues the bound session."""
    first = await start_bot([Step(text="first answer")])
    await spawn(first, "remember the number 42", mode="session")
    record = first.binding()
    thread_id = int(record.conversation.conversation_id)
    await settle(first, record.target_session_key)
    record = first.binding()  # with what the first turn stored (the status line's id)
    await first.services.subagents.wait_settled()  # its announcement is posted, not pending
    await first.client.close()
    await first.services.close()

    second = await start_bot([Step(text="it was 42")])
    assert second.binding() == record  # rebuilt from the store
    await second.fake.user_says(thread_id, second.world.alice, "what was the number?")
    async with asyncio.timeout(TIMEOUT):
        await second.provider.wait_calls(1)
    await settle(second, record.target_session_key)

    sent = second.provider.calls[0]
    assert [m.content for m in sent if m.role == "user"] == [
        "remember the number 42",
        "what was the number?",
    ]
    assert [m.content for m in sent if m.role == "assistant"] == ["first answer"]
    assert persona_messages(second.fake, thread_id)[-1].content == "it was 42"
    # The webhook's token was never stored: it was found again, not recreated.
    assert len(second.fake.webhooks_in(second.world.channel.id)) == 1


async def test_an_agent_rebuilt_after_a_crash_still_speaks_in_its_thread(
    start_bot: StartBot,
) -> None:
    """A crash mid-turn rebuilds the agent; the follow-up it resumes is answered in the thread."""
    sleep = ToolCall(id="c1", name="sleep", arguments='{"seconds": 5}')
    bot = await start_bot(
        [
            Step(tool_calls=(sleep,)),
            Step(error=RuntimeError("a bug in the loop")),  # not a model error: the agent crashes
            Step(text="answered after the crash"),
        ]
    )
    await spawn(bot, "long job", mode="session")
    record = bot.binding()
    thread_id = int(record.conversation.conversation_id)
    async with asyncio.timeout(TIMEOUT):
        await bot.clock.wait_for_sleepers()
    await bot.fake.user_says(thread_id, bot.world.alice, ">> then this")
    await bot.fake.wait_for_request("PUT", f"/channels/{thread_id}/messages")  # its 📥
    await bot.clock.advance(5)
    async with asyncio.timeout(TIMEOUT):
        await bot.provider.wait_calls(3)
        await bot.services.runtime.wait_restarts()
    await settle(bot, record.target_session_key)
    shown = [m.content for m in persona_messages(bot.fake, thread_id)]
    assert "answered after the crash" in shown  # the failure notice may come before or after
