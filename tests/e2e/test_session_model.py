"""``/usage`` and ``/model`` in a bound thread, over the fake Discord."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from bot.commands.permissions import NOT_OWNER
from core.agent.compaction import SUMMARY_SYSTEM
from core.providers.scripted import Step
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import TIMEOUT, content, ephemeral, run, settle, spawn, status_line

# Never called: the scripted model answers in their place; they give /model its choices.
PROVIDERS: dict[str, Any] = {
    "main": {"base_url": "http://127.0.0.1:9/v1", "model": "big-model", "context_window": 8192},
    "cheap": {
        "base_url": "http://127.0.0.1:9/v1",
        "model": "small-model",
        "input_usd_per_mtok": 1.0,
        "output_usd_per_mtok": 2.0,
    },
}


def replies(_messages: Any) -> Step:
    return Step(text="noted")


async def session(bot: Bot) -> tuple[str, int]:
    await spawn(bot, "keep notes", mode="session")
    record = bot.binding()
    await settle(bot, record.target_session_key)
    return record.target_session_key, int(record.conversation.conversation_id)


async def say(bot: Bot, thread: int, key: str, text: str) -> None:
    """Alice writes in the thread; returns once the model has answered it."""
    calls = len(bot.provider.calls)
    await bot.fake.user_says(thread, bot.world.alice, text)
    async with asyncio.timeout(TIMEOUT):
        await bot.provider.wait_calls(calls + 1)
    assert bot.provider.calls[-1][-1].content == text
    await settle(bot, key)


async def test_usage_shows_tokens_cost_and_context(start_bot: StartBot) -> None:
    bot = await start_bot(replies, providers=PROVIDERS)
    _key, thread = await session(bot)

    reply = await run(bot, bot.world.alice, "usage", thread)
    text = content(reply)
    assert ephemeral(reply)
    assert text.startswith("**Usage of this session**")
    assert "in · " in text
    assert "out (≈: estimated by the bot at four characters a token" in text
    assert "Cost: unknown (no prices set)" in text
    assert "of 8,192 tokens" in text  # the first provider's window


async def test_model_switch_is_owner_only_used_next_shown_and_kept(
    start_bot: StartBot,
) -> None:
    bot = await start_bot(replies, providers=PROVIDERS)
    key, thread = await session(bot)
    mallory = bot.fake.add_member(bot.world.guild, "mallory")

    refused = await run(bot, mallory, "model", thread, name="cheap")
    assert (content(refused), ephemeral(refused)) == (NOT_OWNER, True)
    unknown = await run(bot, bot.world.alice, "model", thread, name="nope")
    assert "No provider named `nope`" in content(unknown)

    switched = await run(bot, bot.world.alice, "model", thread, name="cheap")
    assert "now uses `small-model` (cheap)" in content(switched)
    await settle(bot, key)
    assert status_line(bot.fake, thread).endswith("model small-model")
    await say(bot, thread, key, "what now?")
    assert bot.provider.models_seen[-1] == "small-model"
    agent = await bot.services.runtime.get(key)
    (changed,) = [e for e in agent.tree.events if e.type == "model.changed"]
    assert changed.payload == {
        "provider": "cheap",
        "model": "small-model",
        "by_user_id": str(bot.world.alice.id),
    }
    usage = content(await run(bot, bot.world.alice, "usage", thread))
    assert "Cost: $" in usage  # the cheap provider has prices

    await bot.client.close()
    await bot.services.close()
    second = await start_bot(replies, providers=PROVIDERS)
    shown = await run(second, second.world.alice, "model", thread)
    assert "This session's model: `small-model`" in content(shown)
    await say(second, thread, key, "still there?")
    assert second.provider.models_seen[-1] == "small-model"


async def test_model_names_are_autocompleted_from_the_config(start_bot: StartBot) -> None:
    """Typing in /model's name offers each configured provider:model containing the text."""
    bot = await start_bot(replies, providers=PROVIDERS)

    async def offered(typed: str) -> list[tuple[str, str]]:
        handle = await bot.fake.autocomplete(
            bot.world.guild,
            bot.world.channel.id,
            bot.world.alice,
            "model",
            {"name": typed},
            focused="name",
        )
        async with asyncio.timeout(TIMEOUT):
            response = await handle.wait_response()
        assert response.callback_type == 8
        return [(c["name"], c["value"]) for c in response.body["data"]["choices"]]

    assert await offered("") == [("main:big-model",) * 2, ("cheap:small-model",) * 2]
    assert await offered("SMALL") == [("cheap:small-model",) * 2]
    assert await offered("nothing") == []


def replies_and_summaries(messages: Any) -> Step:
    if messages and messages[0].content == SUMMARY_SYSTEM:
        return Step(text="Summary: the user keeps notes.")
    return Step(text="noted")


async def test_compact_on_demand_posts_a_notice_and_is_owner_only(start_bot: StartBot) -> None:
    # Only the last exchange is kept word for word, so there is something to summarise.
    bot = await start_bot(
        replies_and_summaries, providers=PROVIDERS, agent_settings={"keep_recent_tokens": 1}
    )
    key, thread = await session(bot)
    for text in ("first note", "second note"):  # long enough for a summary to be shorter
        await say(bot, thread, key, f"{text}: " + "remember this detail, " * 20)
    mallory = bot.fake.add_member(bot.world.guild, "mallory")

    refused = await run(bot, mallory, "compact", thread)
    assert (content(refused), ephemeral(refused)) == (NOT_OWNER, True)
    done = await run(bot, bot.world.alice, "compact", thread, instructions="keep the notes")
    assert content(done).startswith("Compacted: ")
    await settle(bot, key)
    notices = [m.content for m in bot.fake.messages_in(thread) if m.content.startswith("🗜️")]
    assert len(notices) == 1
    assert "asked with /compact" in notices[0]

    await say(bot, thread, key, "third note")
    read = [m for m in bot.provider.calls[-1] if m.role != "system"]
    assert "Summary: the user keeps notes." in (read[0].content or "")
    assert "keep notes" not in "".join(m.content or "" for m in read[1:])  # the task: summarised


async def test_usage_shows_the_size_compact_reported_at_once(start_bot: StartBot) -> None:
    """/usage right after /compact shows the compaction's "after", not the last call's prompt;
    the next model call's own count replaces it."""
    bot = await start_bot(
        replies_and_summaries, providers=PROVIDERS, agent_settings={"keep_recent_tokens": 1}
    )
    key, thread = await session(bot)
    for text in ("first note", "second note"):
        await say(bot, thread, key, f"{text}: " + "remember this detail, " * 20)
    before = content(await run(bot, bot.world.alice, "usage", thread))

    done = content(await run(bot, bot.world.alice, "compact", thread))
    found = re.fullmatch(r"Compacted: ([\d,]+) → ([\d,]+) tokens\.", done)
    assert found is not None, done
    after = found.group(2)
    usage = content(await run(bot, bot.world.alice, "usage", thread))
    assert f"Context: ≈{after} of 8,192 tokens" in usage
    assert "after the compaction" in usage
    assert usage != before

    await say(bot, thread, key, "third note")
    agent = await bot.services.runtime.get(key)
    counted = agent.tree.total_usage.last_prompt_tokens
    usage = content(await run(bot, bot.world.alice, "usage", thread))
    assert f"Context: {counted:,} of 8,192 tokens" in usage
    assert "at the last model call" in usage


async def test_compact_never_makes_the_context_bigger(start_bot: StartBot) -> None:
    """A summary longer than the conversation it replaces is dropped, and /compact says so."""

    def wordy(messages: Any) -> Step:
        if messages and messages[0].content == SUMMARY_SYSTEM:
            return Step(text="In summary, at great length: " + "the user keeps notes. " * 40)
        return Step(text="noted")

    bot = await start_bot(wordy, providers=PROVIDERS, agent_settings={"keep_recent_tokens": 1})
    key, thread = await session(bot)
    for text in ("first note", "second note"):
        await say(bot, thread, key, f"{text}: " + "a detail, " * 10)
    agent = await bot.services.runtime.get(key)
    events = len(agent.tree.events)

    done = await run(bot, bot.world.alice, "compact", thread)

    text = content(done)
    assert text.startswith("Nothing compacted: with the summary the context would be ")
    assert "so the summary was dropped" in text
    assert text.endswith("The session is unchanged.")
    await settle(bot, key)
    assert not [m for m in bot.fake.messages_in(thread) if m.content.startswith("🗜️")]
    assert [e.type for e in agent.tree.events[events:]] == ["usage"]  # its cost, nothing else
    nothing = await run(bot, bot.world.alice, "compact", thread)
    assert "The session is unchanged." in content(nothing)


async def test_with_two_people_in_a_thread_the_model_reads_who_speaks(
    start_bot: StartBot,
) -> None:
    bot = await start_bot(replies)
    key, thread = await session(bot)
    await say(bot, thread, key, "I'm alone here")
    assert bot.provider.calls[-1][-1].content == "I'm alone here"  # one person: no names

    bob = bot.fake.add_member(bot.world.guild, "bob")
    calls = len(bot.provider.calls)
    await bot.fake.user_says(thread, bob, "hello from bob")
    async with asyncio.timeout(TIMEOUT):
        await bot.provider.wait_calls(calls + 1)
    await settle(bot, key)

    read = [m.content for m in bot.provider.calls[-1] if m.role == "user"]
    assert read[-1] == "bob: hello from bob"
    assert read[-2] == "alice: I'm alone here"  # earlier messages get their names too
    assert read[0] == "alice: keep notes"  # the task she spawned it with
    agent = await bot.services.runtime.get(key)
    authors = [e.payload["author_id"] for e in agent.tree.events if e.type == "user_message"]
    assert authors[-1] == str(bob.id)  # the log keeps the id
