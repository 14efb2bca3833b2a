"""What Discord refuses or takes away: no webhook permission, a thread deleted or locked.

Each case keeps the promise of a bound thread: the agent's words land in its
thread (as the bot if no persona webhook can be had), a thread that is gone
ends its binding at once, and a fallback never claims a thread the session
no longer has.
"""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from core.providers.scripted import Step
from core.providers.types import ToolCall
from fakediscord import Message
from tests.e2e.conftest import TOKEN, Bot, StartBot
from tests.e2e.helpers import (
    ANNOUNCED,
    TIMEOUT,
    contents,
    done,
    handlers_done,
    persona_messages,
    settle,
    spawn,
    thread_of,
)

SCOUT = {"scout": {"display_name": "Scout"}}
ANSWER = "Findings: " + " ".join(f"point{i}" for i in range(40))
MISSING_PERMISSIONS = 50013


def by_the_bot(bot: Bot, channel_id: int) -> list[Message]:
    """What the bot account itself (not a webhook) posted there."""
    return [
        m
        for m in bot.fake.messages_in(channel_id)
        if m.webhook_id is None and m.author_id == bot.world.bot.id
    ]


class TestNoManageWebhooks:
    @pytest.mark.parametrize("refused", ["GET", "POST"])
    async def test_the_bot_speaks_for_the_persona_in_the_thread(
        self, start_bot: StartBot, refused: str
    ) -> None:
        """Webhooks refused (listing or creating, 403 50013): the whole streamed answer and the
        announcement are the bot's, in the thread, named; one warning; nothing in the parent."""
        bot = await start_bot([Step(text=ANSWER, chunks=5)], agents=SCOUT)
        parent = bot.world.channel.id
        bot.fake.fail_next(refused, f"/channels/{parent}/webhooks", 403, code=MISSING_PERMISSIONS)
        with capture_logs() as logs:
            thread_id = thread_of(await spawn(bot, "report", agent="scout", mode="session"))
            await done(bot)

        said = by_the_bot(bot, thread_id)
        (answer,) = [m for m in said if m.content.startswith("**Scout**: ")]
        assert answer.content == f"**Scout**: {ANSWER}"
        assert bot.fake.requests_matching("PATCH", f"/channels/{thread_id}/messages/{answer.id}")
        (announcement,) = [m for m in said if ANNOUNCED in m.content]
        assert announcement.content.startswith("✅ **Scout** completed its task.")
        assert all(m.allowed_mentions == {"parse": []} for m in (answer, announcement))
        assert persona_messages(bot.fake, thread_id) == []
        assert not [c for c in contents(bot, parent) if "point1" in c or ANNOUNCED in c]

        (warned,) = [e for e in logs if e["log_level"] == "warning"]  # once, not per message
        assert (warned["event"], warned["path"]) == ("delivery.failed", "webhook")
        assert (warned["code"], warned["retryable"]) == (MISSING_PERMISSIONS, True)
        assert "Manage Webhooks" in warned["error"]
        assert TOKEN not in repr(logs)
        asked = bot.fake.requests_matching(refused, f"/channels/{parent}/webhooks")
        assert len(asked) == 1  # the refusal is remembered, not asked again per message


class TestThreadDeletedWhileIdle:
    async def test_the_binding_ends_thread_deleted_without_a_farewell(
        self, start_bot: StartBot
    ) -> None:
        """An idle session's thread is deleted: the gateway event ends its binding at once."""
        bot = await start_bot([Step(text="ready")])
        thread_id = thread_of(await spawn(bot, "wait for me", mode="session"))
        await done(bot)
        record = bot.binding()
        posts_before = len(bot.fake.requests_matching("POST", f"/channels/{thread_id}/"))

        with capture_logs() as logs:
            await bot.fake.delete_channel(thread_id)
            await bot.fake.sync(bot.world.bot)
            await handlers_done("raw_thread_delete")
            await done(bot)

        assert bot.services.bindings.get(record.binding_id) is None
        (ended,) = [e for e in logs if e["event"] == "binding.unbound"]
        assert (ended["binding_id"], ended["reason"]) == (record.binding_id, "thread-deleted")
        assert len(bot.fake.requests_matching("POST", f"/channels/{thread_id}/")) == posts_before
        assert bot.client.account.presenter(record.binding_id) is None


class TestLockedThreadFallback:
    async def test_the_fallback_does_not_say_the_session_stays_active(
        self, start_bot: StartBot
    ) -> None:
        """Locked while the session works: its binding ends, and the requester is told so."""
        sleep = ToolCall(id="c1", name="sleep", arguments='{"seconds": 5}')
        bot = await start_bot([Step(tool_calls=(sleep,)), Step(text="the result")])
        thread_id = thread_of(await spawn(bot, "dig", mode="session"))
        async with asyncio.timeout(TIMEOUT):
            await bot.clock.wait_for_sleepers()
        record = bot.binding()
        await bot.fake.archive_thread(thread_id, locked=True)
        await bot.clock.advance(5)
        await settle(bot, record.target_session_key)
        await done(bot)

        assert bot.services.bindings.get(record.binding_id) is None
        (fallback,) = [c for c in contents(bot, bot.world.channel.id) if ANNOUNCED in c]
        assert "stays active" not in fallback
        assert "binding has ended" in fallback
        assert fallback.endswith("the result")
