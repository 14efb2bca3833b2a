"""Every word lands: a streamed answer survives what Discord does wrong mid-stream.

Each case spawns a session-mode subagent whose answer streams in several pieces,
injects one fault once the first piece is posted (the message then grows by
edits), lets the model finish, and checks that the thread shows the whole final
text, and nothing reached the parent channel. Retries wait on the bot's fake
clock, which the test advances: no case sleeps.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
import pytest
from structlog.testing import capture_logs

from adapters.discord.delivery import Persona
from adapters.discord.pacing import newest_text
from adapters.discord.retry import DEFAULT_POLICY
from adapters.discord.text import split_message
from core.canary import build_report
from core.errors import DeliveryError, ProviderError
from core.providers.scripted import Step
from core.subagents.delivery import Posted
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import TIMEOUT, persona_messages, settle, spawn, status_line

ANSWER = "SURVIVED " + " ".join(f"w{i}" for i in range(60))
EDIT = "/webhooks/*/*/messages/*"


@dataclass
class Streaming:
    bot: Bot
    thread_id: int
    session_key: str
    gate: asyncio.Event
    parent_count: int

    def parent_messages(self) -> list:
        return self.bot.fake.messages_in(self.bot.world.channel.id)[self.parent_count :]

    def shown(self) -> list[str]:
        return [m.content for m in persona_messages(self.bot.fake, self.thread_id)]


async def streaming(start_bot: StartBot, answer: str = ANSWER, chunks: int = 6) -> Streaming:
    """A subagent whose answer has its first piece posted and waits for ``gate``."""
    gate = asyncio.Event()
    bot = await start_bot([Step(text=answer, chunks=chunks, gate=gate)])
    await spawn(bot, "say it all", mode="session")
    record = bot.binding()
    thread_id = int(record.conversation.conversation_id)
    await bot.fake.wait_for_message(thread_id, lambda m: m.webhook_id is not None)  # 1st piece
    parent_count = len(bot.fake.messages_in(bot.world.channel.id))
    return Streaming(bot, thread_id, record.target_session_key, gate, parent_count)


async def finish(s: Streaming, *, retries: int = 0) -> None:
    """Let the model finish; advance the clock through ``retries`` backoff waits."""
    s.gate.set()
    for _ in range(retries):
        async with asyncio.timeout(TIMEOUT):
            await s.bot.clock.wait_for_sleepers()
        await s.bot.clock.advance(60)
    await settle(s.bot, s.session_key)


Fault = Callable[[Streaming], Awaitable[None]]


async def rate_limited_without_via(s: Streaming) -> None:
    s.bot.fake.fail_next("PATCH", EDIT, 429, via_header=False)


async def rate_limited_with_via(s: Streaming) -> None:
    s.bot.fake.fail_next("PATCH", EDIT, 429, retry_after=0.001)


async def archived(s: Streaming) -> None:
    await s.bot.fake.archive_thread(s.thread_id)


async def message_deleted(s: Streaming) -> None:
    (first,) = persona_messages(s.bot.fake, s.thread_id)
    s.bot.fake.ops.delete_message(first)
    await s.bot.fake.gateway.drain()


async def webhook_deleted(s: Streaming) -> None:
    (hook,) = s.bot.fake.webhooks_in(s.bot.world.channel.id)
    s.bot.fake.ops.delete_webhook(hook)
    await s.bot.fake.gateway.drain()


@pytest.mark.parametrize(
    ("fault", "retries"),
    [
        (rate_limited_without_via, 1),
        (rate_limited_with_via, 0),
        (archived, 0),
        (message_deleted, 0),
        (webhook_deleted, 0),
    ],
)
async def test_the_whole_answer_lands_despite_a_fault_mid_stream(
    start_bot: StartBot, fault: Fault, retries: int
) -> None:
    s = await streaming(start_bot)
    await fault(s)
    await finish(s, retries=retries)
    assert ANSWER in s.shown()
    assert s.bot.services.bindings.get(s.bot.binding().binding_id) is not None
    assert [m.content for m in s.parent_messages()] == []


async def test_a_repost_carries_the_newest_words_its_edit_was_carrying(
    start_bot: StartBot,
) -> None:
    """The bug: an edit that waited its turn sends the stream's newest words and the
    stream counts them shown; when that edit found its message deleted, the new message
    carried the older words it was asked with, and the final text never came (a
    flaky ``message_deleted`` case under load, where the edit waits)."""
    s = await streaming(start_bot)
    (first,) = persona_messages(s.bot.fake, s.thread_id)
    s.bot.fake.ops.delete_message(first)
    await s.bot.fake.gateway.drain()
    delivery = s.bot.client.account.delivery
    with newest_text(lambda: "the newest words"):
        moved = await delivery.edit(
            s.bot.binding(), Posted(str(first.id), "webhook"), Persona("Scout"), "older words"
        )
    assert moved.message_id != str(first.id)
    assert "the newest words" in s.shown()
    assert "older words" not in s.shown()
    await finish(s)


async def test_server_errors_are_waited_out_on_the_clock(start_bot: StartBot) -> None:
    """A 503 discord.py raises at once (the bot's REST path): our backoff waits it out.

    (A 5xx on a webhook call is first retried by discord.py itself, after real
    pauses of a second or more; tests/e2e/test_discord_bot.py covers that one.)
    """
    s = await streaming(start_bot)
    s.bot.fake.fail_next("PATCH", f"/channels/{s.thread_id}/messages/*", 503, times=2)
    await finish(s, retries=2)
    assert ANSWER in s.shown()
    assert "✅ idle" in status_line(s.bot.fake, s.thread_id)
    assert s.parent_messages() == []


async def test_a_locked_thread_ends_the_binding_and_the_answer_falls_back(
    start_bot: StartBot,
) -> None:
    """Locked mid-stream: one delivery.failed, the binding ends, the result goes to the parent."""
    s = await streaming(start_bot)
    record = s.bot.binding()
    await s.bot.fake.archive_thread(s.thread_id, locked=True)
    with capture_logs() as logs:
        await finish(s)
        await s.bot.services.subagents.wait_settled()
    assert s.bot.services.bindings.get(record.binding_id) is None
    failed = [e for e in logs if e["event"] == "delivery.failed"]
    assert [e["code"] for e in failed][:1] == [50083]
    fallback = [m.content for m in s.parent_messages()]
    assert any(ANSWER in content for content in fallback)


async def test_retries_that_never_succeed_end_in_an_explicit_failure(start_bot: StartBot) -> None:
    """A rate limit that never lifts: bounded retries, then delivery.failed; nothing hangs."""
    s = await streaming(start_bot)
    s.bot.fake.fail_next("PATCH", EDIT, 429, via_header=False, times=1000)
    s.bot.fake.fail_next("POST", "/webhooks/*", 429, via_header=False, times=1000)
    with capture_logs() as logs:
        s.gate.set()
        agent = await s.bot.services.runtime.get(s.session_key)
        async with asyncio.timeout(TIMEOUT):
            await agent.wait_idle()
            while not [e for e in logs if e["event"] == "delivery.failed"]:
                await s.bot.clock.wait_for_sleepers()
                await s.bot.clock.advance(60)
    (failed, *_) = [e for e in logs if e["event"] == "delivery.failed"]
    assert failed["path"] == "webhook"
    assert failed["retryable"] is False


async def test_a_long_answer_with_code_arrives_whole_and_in_order(start_bot: StartBot) -> None:
    """7,000 characters with code blocks: every part, in order, each within Discord's limit."""
    block = "```python\n" + "\n".join(f"print({i})  # line {i}" for i in range(120)) + "\n```\n"
    answer = ("Intro paragraph.\n\n" + block + "\nMiddle text. " * 40 + "\n\n" + block)[:7000]
    s = await streaming(start_bot, answer, chunks=20)
    s.bot.fake.fail_next("PATCH", EDIT, 429, via_header=False)
    await finish(s, retries=1)
    parts = split_message(answer)
    assert len(parts) >= 4
    shown = s.shown()
    start = shown.index(parts[0])
    assert shown[start : start + len(parts)] == parts
    assert all(len(part) <= 2000 for part in parts)


async def test_without_manage_webhooks_the_bot_speaks_in_the_thread(start_bot: StartBot) -> None:
    """No webhook can be made (403): the answer and announcement are the bot's, in the thread."""
    bot = await start_bot([Step(text=ANSWER)])
    bot.fake.fail_next("POST", "/channels/*/webhooks", 403, code=50013, times=10)
    with capture_logs() as logs:
        await spawn(bot, "say it all", mode="session")
        record = bot.binding()
        thread_id = int(record.conversation.conversation_id)
        await settle(bot, record.target_session_key)
        await bot.services.subagents.wait_settled()
    stamp = "2026-01-01T12:00:00Z"
    lines = [json.dumps({**e, "level": e["log_level"], "timestamp": stamp}) for e in logs]
    (failure,) = build_report(lines, since_ts=None).webhook_failures  # the canary sees it
    assert (failure.binding_id, failure.guild) == (record.binding_id, str(bot.world.guild.id))
    by_bot = [m.content for m in bot.fake.messages_in(thread_id) if m.webhook_id is None]
    assert f"**Subagent**: {ANSWER}" in by_bot
    assert any("✅" in content for content in by_bot)
    assert persona_messages(bot.fake, bot.world.channel.id) == []


async def test_a_model_failure_is_shown_and_the_next_message_works(start_bot: StartBot) -> None:
    """The provider fails mid-stream: one clear notice, a failed status, then a working turn."""
    bot = await start_bot(
        [
            Step(text="partial", error=ProviderError("upstream answered HTTP 502")),
            Step(text="works now"),
        ]
    )
    await spawn(bot, "try", mode="session")
    record = bot.binding()
    thread_id = int(record.conversation.conversation_id)
    await settle(bot, record.target_session_key)
    notices = [c for c in (m.content for m in persona_messages(bot.fake, thread_id)) if "⚠️" in c]
    assert notices == [
        "⚠️ This turn failed: the model could not answer: upstream answered HTTP 502. "
        "Your next message starts a new turn."
    ]
    assert "last turn failed" in status_line(bot.fake, thread_id)

    await bot.fake.user_says(thread_id, bot.world.alice, "again please")
    async with asyncio.timeout(TIMEOUT):
        await bot.provider.wait_calls(2)
    await settle(bot, record.target_session_key)
    assert "works now" in [m.content for m in persona_messages(bot.fake, thread_id)]
    assert "✅ idle" in status_line(bot.fake, thread_id)


async def test_a_dropped_connection_ends_in_a_delivery_error(
    start_bot: StartBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection Discord keeps dropping (not an OSError in aiohttp) is retried, then
    reported as a DeliveryError the stream can handle, never raised raw into it."""
    bot = await start_bot([Step(text="hi")])
    await spawn(bot, "greet", mode="session")
    record = bot.binding()
    await settle(bot, record.target_session_key)
    delivery = bot.client.account.delivery

    async def dropped(*_args: object, **_kwargs: object) -> None:
        raise aiohttp.ServerDisconnectedError()

    monkeypatch.setattr(delivery, "_post", dropped)
    sending = asyncio.ensure_future(delivery.send(record, Persona("Scout"), "anyone?"))
    async with asyncio.timeout(TIMEOUT):
        for _ in range(DEFAULT_POLICY.attempts - 1):  # each failed call but the last waits
            await bot.clock.wait_for_sleepers()
            await bot.clock.advance(60)
        with pytest.raises(DeliveryError, match="ServerDisconnectedError"):
            await sending
