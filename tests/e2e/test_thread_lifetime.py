"""Threads the bot opens: how long Discord keeps them open, and what reopens them."""

from __future__ import annotations

import pytest

from core.providers.scripted import Step
from tests.e2e.conftest import StartBot
from tests.e2e.test_discord_bot import settle, spawn


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
