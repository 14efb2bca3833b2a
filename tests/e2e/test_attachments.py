"""Files attached in a bound thread, end to end over the fake Discord.

The fake serves the files from its own address, so the bot downloads them as it
would from Discord's CDN; the scripted model shows what reached it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from core.providers.scripted import Step
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import TIMEOUT, settle, spawn

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
VISION = {"eyes": {"base_url": "http://127.0.0.1:9/v1", "model": "seer", "vision": True}}
BLIND = {"plain": {"base_url": "http://127.0.0.1:9/v1", "model": "reader"}}


def replies(_messages: Any) -> Step:
    return Step(text="got it")


async def session(bot: Bot) -> tuple[str, int]:
    await spawn(bot, "read what I send", mode="session")
    record = bot.binding()
    await settle(bot, record.target_session_key)
    return record.target_session_key, int(record.conversation.conversation_id)


async def send(bot: Bot, thread: int, key: str, text: str, files: list, *, answered: bool) -> Any:
    calls = len(bot.provider.calls)
    message = await bot.fake.user_says(thread, bot.world.alice, text, files=files)
    if answered:
        async with asyncio.timeout(TIMEOUT):
            await bot.provider.wait_calls(calls + 1)
    await settle(bot, key)
    return message


def replies_to(bot: Bot, thread: int, message: Any) -> list[str]:
    return [
        m.content
        for m in bot.fake.messages_in(thread)
        if (m.message_reference or {}).get("message_id") in (message.id, str(message.id))
    ]


async def test_a_text_file_reaches_the_model_with_its_name(start_bot: StartBot) -> None:
    bot = await start_bot(replies, providers=BLIND)
    key, thread = await session(bot)

    await send(
        bot,
        thread,
        key,
        "see attached",
        [("plan.md", b"# Plan\nship on Friday", None)],
        answered=True,
    )

    read = bot.provider.calls[-1][-1].content or ""
    assert read.startswith("see attached")
    assert '<attachment name="plan.md">\n# Plan\nship on Friday\n</attachment>' in read
    agent = await bot.services.runtime.get(key)
    said = [e for e in agent.tree.events if e.type == "user_message"][-1]
    (record,) = said.payload["attachments"]
    assert (record["name"], record["kind"], record["text"]) == (
        "plan.md",
        "text",
        "# Plan\nship on Friday",
    )


async def test_an_attachment_only_message_works(start_bot: StartBot) -> None:
    bot = await start_bot(replies, providers=BLIND)
    key, thread = await session(bot)
    await send(bot, thread, key, "", [("data.csv", b"a,b\n1,2", "text/csv")], answered=True)
    assert (
        bot.provider.calls[-1][-1].content
        == '<attachment name="data.csv">\na,b\n1,2\n</attachment>'
    )


async def test_an_image_reaches_a_vision_model_and_a_copy_is_kept(
    start_bot: StartBot, tmp_path: Path
) -> None:
    bot = await start_bot(replies, providers=VISION)
    key, thread = await session(bot)

    await send(bot, thread, key, "what is this?", [("cat.png", PNG, "image/png")], answered=True)

    message = bot.provider.calls[-1][-1]
    assert len(message.images) == 1
    assert message.images[0].mime == "image/png"
    stored = list((tmp_path / "attachments").iterdir())
    assert len(stored) == 1
    assert stored[0].read_bytes() == PNG


async def test_refused_files_get_one_reply_and_the_rest_goes_through(
    start_bot: StartBot,
) -> None:
    bot = await start_bot(
        replies, providers=BLIND, agent_settings={"attachment_text_max_bytes": 16}
    )
    key, thread = await session(bot)
    files = [
        ("cat.png", PNG, "image/png"),
        ("long.txt", b"x" * 17, "text/plain"),
        ("tool.zip", b"PK\x03\x04", "application/zip"),
        ("ok.txt", b"short", "text/plain"),
    ]
    message = await send(bot, thread, key, "a mixed bag", files, answered=True)

    read = bot.provider.calls[-1][-1].content or ""
    assert read.startswith("a mixed bag")
    assert '<attachment name="ok.txt">' in read
    assert "long.txt" not in read
    assert "cat.png" not in read
    (reply,) = replies_to(bot, thread, message)
    assert reply.startswith("These attachments did not reach the model:")
    assert "`cat.png`: this session's model does not read images" in reply
    assert "`long.txt`: text files may be 16 bytes at most" in reply
    assert "`tool.zip`: only text files (UTF-8) and images" in reply


async def test_a_message_with_only_refused_files_starts_nothing(start_bot: StartBot) -> None:
    bot = await start_bot(replies, providers=BLIND)
    key, thread = await session(bot)
    calls = len(bot.provider.calls)
    message = await send(bot, thread, key, "", [("cat.png", PNG, "image/png")], answered=False)
    async with asyncio.timeout(TIMEOUT):
        reply = await bot.fake.wait_for_message(thread, lambda m: m.message_reference is not None)
    await settle(bot, key)
    assert len(bot.provider.calls) == calls
    assert reply.content.startswith("These attachments did not reach the model:")
    assert "does not read images" in reply.content
    assert replies_to(bot, thread, message) == [reply.content]
