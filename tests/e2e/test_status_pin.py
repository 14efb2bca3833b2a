"""The status line is pinned where a conversation goes on: the real client over the fake."""

from __future__ import annotations

from core.providers.scripted import Step
from fakediscord.permissions import BOT_DEFAULT, PIN_MESSAGES
from tests.e2e.conftest import StartBot
from tests.e2e.helpers import done, spawn


def pin_requests(bot) -> list:  # type: ignore[no-untyped-def]
    return [r for r in bot.fake.requests if r.method == "PUT" and "/pins/" in r.path]


async def test_a_session_threads_status_line_is_pinned_a_run_threads_is_not(
    start_bot: StartBot,
) -> None:
    bot = await start_bot(lambda _messages: Step(text="done"))
    bot.fake.set_bot_permissions(bot.world.guild, bot.world.bot, BOT_DEFAULT | PIN_MESSAGES)
    await spawn(bot, "one task", mode="run")
    await done(bot)
    assert pin_requests(bot) == []  # one task, let go when done: nothing to keep in view

    await spawn(bot, "a conversation", mode="session")
    await done(bot)
    (record,) = bot.services.bindings.live()
    thread = int(record.conversation.conversation_id)
    (pinned,) = [m for m in bot.fake.messages_in(thread) if m.pinned]
    assert pinned.content.startswith("Status:")
    assert len(pin_requests(bot)) == 1
