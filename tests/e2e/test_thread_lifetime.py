"""Threads the bot opens: how long Discord keeps them open, and what reopens them."""

from __future__ import annotations

import asyncio

import pytest

from core.providers.scripted import Step
from tests.e2e.conftest import StartBot
from tests.e2e.helpers import TIMEOUT, persona_messages, settle, spawn


@pytest.mark.parametrize(
    ("settings", "minutes"), [({}, 10080), ({"thread_auto_archive_minutes": 60}, 60)]
)
async def test_threads_get_the_configured_auto_archive_duration(
    start_bot: StartBot, settings: dict[str, int], minutes: int
) -> None:
    """[discord] thread_auto_archive_minutes (default 7 days) goes into every thread created."""
    bot = await start_bot([Step(text="hi")], discord_settings=settings)
    await spawn(bot, "greet", mode="session")
    record = bot.binding()
    (created,) = bot.fake.requests_matching("POST", f"/channels/{bot.world.channel.id}/threads")
    assert created.json["auto_archive_duration"] == minutes
    assert (
        bot.fake.channel(int(record.conversation.conversation_id)).auto_archive_duration == minutes
    )
    await settle(bot, record.target_session_key)


async def test_an_archived_thread_still_reaches_its_agent_and_reopens(start_bot: StartBot) -> None:
    """Discord archived the thread for inactivity: a person's message there still reaches the
    agent, and the agent's answer reopens the thread."""
    bot = await start_bot([Step(text="first"), Step(text="back from the archive")])
    await spawn(bot, "greet", mode="session")
    record = bot.binding()
    thread_id = int(record.conversation.conversation_id)
    await settle(bot, record.target_session_key)
    await bot.services.subagents.wait_settled()  # the task's announcement is posted
    await bot.fake.archive_thread(thread_id)
    await bot.fake.user_says(thread_id, bot.world.alice, "still there?")
    async with asyncio.timeout(TIMEOUT):
        await bot.provider.wait_calls(2)
    await settle(bot, record.target_session_key)
    assert bot.provider.calls[1][-1].content == "still there?"
    assert persona_messages(bot.fake, thread_id)[-1].content == "back from the archive"
    assert bot.fake.channel(thread_id).archived is False
    assert bot.services.bindings.get(record.binding_id) is not None
