"""Nothing said to the bot is lost: the real client over the fake Discord, restarted.

Messages written while the bot is down are read back at its next start and
answered in order, once; a new gateway session (READY, not RESUMED) is caught
up the same way; a failure leaves a message queued with a visible warning; a
file that cannot be downloaded costs only itself. (Real processes killed with
``kill -9`` or stopped with SIGTERM: ``test_processes_inbox.py``.)
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from core.errors import ProviderError
from core.providers.scripted import Step
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import TIMEOUT, bound_thread, persona_messages, settle, text_messages

OFFLINE = "📬 While the bot was offline"


def echo(messages: Any) -> Step:
    """Answers every turn by quoting the people's words it was given."""
    said = [m.content for m in messages if m.role == "user"]
    return Step(text=f"heard: {said[-1]}")


async def stop(bot: Bot) -> None:
    """A clean stop: the client disconnects, the services close (the store keeps everything)."""
    await bot.client.close()
    await bot.services.close()


async def caught_up(bot: Bot, count: int = 1) -> None:
    async with asyncio.timeout(TIMEOUT):
        await bot.client.account.catch_up.wait_finished(count)


def people_said(bot: Bot) -> list[str]:
    """What the model was given as people's words, over every call, each once."""
    seen: list[str] = []
    for call in bot.provider.calls:
        for message in call:
            if message.role == "user" and message.content not in seen:
                seen.append(message.content or "")
    return seen


def replying_to(message: Any, message_id: int) -> bool:
    return (message.message_reference or {}).get("message_id") in (message_id, str(message_id))


def reactions(bot: Bot, message_id: int) -> list[str]:
    return [r.emoji_name for r in bot.fake.message(message_id).reactions]


def notices(bot: Bot, thread: int) -> list[str]:
    return [m.content for m in text_messages(bot.fake, thread) if m.content.startswith(OFFLINE)]


async def started_with_a_thread(start_bot: StartBot, **options: Any) -> tuple[Bot, str, int]:
    bot = await start_bot(echo, **options)
    record, thread = await bound_thread(bot)
    await bot.services.subagents.wait_settled()
    await settle(bot, record.target_session_key)
    return bot, record.target_session_key, thread


class TestDowntime:
    async def test_messages_written_while_down_are_answered_in_order_once(
        self, start_bot: StartBot
    ) -> None:
        first, key, thread = await started_with_a_thread(start_bot)
        await stop(first)
        world = first.world
        a = await first.fake.user_says(thread, world.alice, "first while away")
        b = await first.fake.user_says(thread, world.alice, ">> second while away")

        second = await start_bot(echo)
        await caught_up(second)
        await settle(second, key)
        assert people_said(second)[-2:] == ["first while away", "second while away"]
        (notice,) = notices(second, thread)
        assert notice.startswith(f"{OFFLINE}, 2 messages were written here (from ")
        assert str(a.id) in notice
        assert str(b.id) in notice
        assert reactions(second, a.id) == ["▶️"]
        assert reactions(second, b.id) in (["📥"], ["▶️"])  # queued, or its own turn
        answers = [m.content for m in persona_messages(second.fake, thread)]
        assert "heard: first while away" in answers
        await stop(second)

        third = await start_bot(echo)  # a second restart answers nothing twice
        await caught_up(third)
        await third.client.account.drain()
        assert third.provider.calls == []
        assert len(notices(third, thread)) == 1

    async def test_at_most_the_limit_is_read_back_and_the_thread_says_where_it_stopped(
        self, start_bot: StartBot
    ) -> None:
        limit = {"catch_up_max_messages": 2}
        first, key, thread = await started_with_a_thread(start_bot, discord_settings=limit)
        await stop(first)
        said = [
            await first.fake.user_says(thread, first.world.alice, f"note {i}") for i in range(4)
        ]

        second = await start_bot(echo, discord_settings=limit)
        await caught_up(second)
        await settle(second, key)
        assert [s for s in people_said(second) if s.startswith("note")] == ["note 0", "note 1"]
        (notice,) = notices(second, thread)
        assert "2 messages were written here" in notice
        assert "Only the first 2 were read back (`[discord] catch_up_max_messages`)" in notice
        assert f"/{thread}/{said[2].id} on did not reach" in notice
        await stop(second)

        third = await start_bot(echo, discord_settings=limit)
        await caught_up(third)
        await third.client.account.drain()
        assert third.provider.calls == []  # what was cut is not replayed later

    async def test_threads_with_nothing_new_cost_no_history_request(
        self, start_bot: StartBot
    ) -> None:
        first, _, thread = await started_with_a_thread(start_bot)
        await first.fake.user_says(thread, first.world.alice, "one more")
        await first.provider.wait_calls(2)
        await settle(first, first.binding().target_session_key)
        await stop(first)
        before = len(first.fake.requests)

        second = await start_bot(echo)
        await caught_up(second)
        reads = [
            r
            for r in second.fake.requests[before:]
            if r.method == "GET" and r.path == f"/channels/{thread}/messages"
        ]
        assert reads == []
        assert second.client.account.catch_up.reports[0].threads == 1

    async def test_bot_and_webhook_messages_are_not_read_as_peoples(
        self, start_bot: StartBot
    ) -> None:
        first, key, thread = await started_with_a_thread(start_bot)
        await stop(first)
        other_bot = first.fake.add_bot("another-bot-token", "otherbot")
        await first.fake.user_says(thread, other_bot, "a bot talking")
        await first.fake.user_says(thread, first.world.alice, "a person talking")

        second = await start_bot(echo)
        await caught_up(second)
        await settle(second, key)
        assert "a bot talking" not in people_said(second)
        assert people_said(second)[-1] == "a person talking"


class TestSystemMessages:
    async def test_a_pin_while_the_bot_was_down_is_not_counted_as_a_message(
        self, start_bot: StartBot
    ) -> None:
        """Discord's "pinned a message" line is authored by whoever pinned, with no text:
        neither that nor any other system line is something a person said to the agent."""
        first, key, thread = await started_with_a_thread(start_bot)
        await stop(first)
        (answer, *_) = persona_messages(first.fake, thread)
        await first.fake.pin(answer, first.world.admin)
        said = await first.fake.user_says(thread, first.world.alice, "a person talking")

        second = await start_bot(echo)
        await caught_up(second)
        await settle(second, key)
        assert people_said(second)[-1] == "a person talking"
        (notice,) = notices(second, thread)
        assert notice.startswith(f"{OFFLINE}, 1 message was written here")
        assert str(said.id) in notice
        (pin_line,) = [m for m in second.fake.messages_in(thread) if m.type == 6]
        assert not pin_line.reactions


class TestCatchUpOrder:
    async def test_a_live_message_during_the_catch_up_waits_for_the_older_ones(
        self, start_bot: StartBot
    ) -> None:
        first, key, thread = await started_with_a_thread(start_bot)
        await stop(first)
        missed = await first.fake.user_says(thread, first.world.alice, "written while down")
        reading = first.fake.hold("GET", f"/channels/{thread}/messages")

        second = await start_bot(echo)
        await reading.wait_entered()
        live = await second.fake.user_says(thread, second.world.alice, "written after the start")
        await second.fake.sync(second.world.bot.id)
        assert second.provider.calls == []  # held: the older message goes first
        reading.release()
        await caught_up(second)
        await settle(second, key)
        assert people_said(second)[-2:] == ["written while down", "written after the start"]
        assert reactions(second, missed.id) == ["▶️"]
        assert reactions(second, live.id) in (["🧭"], ["▶️"])

    async def test_a_new_gateway_session_is_caught_up_like_a_restart(
        self, start_bot: StartBot
    ) -> None:
        """READY instead of RESUMED: what was written in the gap is read back."""
        bot, key, thread = await started_with_a_thread(start_bot)

        async def no_pause(shard_id: int | None, *, initial: bool = False) -> None:
            """The fake has no identify rate limit: no 5 s pause before a new IDENTIFY."""

        bot.client.before_identify_hook = no_pause  # type: ignore[method-assign]
        done = len(bot.client.account.catch_up.reports)
        bot.fake.gateway.lose_sessions(bot.world.bot.id)
        await bot.fake.user_says(thread, bot.world.alice, "said in the gap")
        await caught_up(bot, done + 1)
        await settle(bot, key)
        assert people_said(bot)[-1] == "said in the gap"
        assert len(notices(bot, thread)) == 1


class TestFailures:
    async def test_a_failed_hand_over_warns_once_and_goes_with_the_next_message(
        self, start_bot: StartBot, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        bot, key, thread = await started_with_a_thread(start_bot)
        runtime = bot.services.runtime
        await runtime.close()  # the agent must be built again for the next message
        real = runtime._factory

        def broken(*args: Any) -> Any:
            raise ProviderError("the model server is not configured right")

        monkeypatch.setattr(runtime, "_factory", broken)
        lost = await bot.fake.user_says(thread, bot.world.alice, "are you there?")
        async with asyncio.timeout(TIMEOUT):
            reply = await bot.fake.wait_for_message(thread, lambda m: replying_to(m, lost.id))
        assert reply.content.startswith("⚠️ This message could not be passed to **")
        assert "the model server is not configured right" in reply.content
        assert "It stays queued" in reply.content
        assert reactions(bot, lost.id) == ["⚠️"]

        monkeypatch.setattr(runtime, "_factory", real)
        await bot.fake.user_says(thread, bot.world.alice, "hello again")
        async with asyncio.timeout(TIMEOUT):
            await bot.provider.wait_calls(2)
        await settle(bot, key)
        assert people_said(bot)[-2:] == ["are you there?", "hello again"]
        warnings = [m for m in text_messages(bot.fake, thread) if m.content.startswith("⚠️")]
        assert len(warnings) == 1  # told once


PLAIN = {"plain": {"base_url": "http://127.0.0.1:9/v1", "model": "reader"}}


class TestAttachments:
    @pytest.mark.parametrize("failure", ["error", "timeout", "unresolvable"])
    async def test_a_file_that_cannot_be_downloaded_costs_only_itself(
        self, start_bot: StartBot, failure: str
    ) -> None:
        bot, key, thread = await started_with_a_thread(start_bot, providers=PLAIN)
        reason = {
            "error": "Discord's file server answered 503",
            "timeout": "no answer within 30 seconds",
            "unresolvable": "could not be reached",
        }[failure]
        gate = None
        if failure == "error":
            bot.fake.fail_next("GET", "/attachments/*", 503)
        elif failure == "timeout":
            gate = bot.fake.hold("GET", "/attachments/*")
        else:
            bot.fake.state.cdn_base_url = "http://cdn.threadbound.invalid"
        message = await bot.fake.user_says(
            thread, bot.world.alice, "read my notes", files=[("notes.txt", b"buy milk", None)]
        )
        if gate is not None:
            await gate.wait_entered()
            await bot.clock.wait_for_sleepers()
            await bot.clock.advance(30)
        async with asyncio.timeout(TIMEOUT):
            await bot.provider.wait_calls(2)
        await settle(bot, key)
        if gate is not None:
            gate.release()

        given = bot.provider.calls[-1][-1].content or ""
        assert given.startswith("read my notes")
        assert "“notes.txt” could not be read" in given
        assert reason in given
        replies = [m.content for m in bot.fake.messages_in(thread) if replying_to(m, message.id)]
        (reply,) = replies
        assert "`notes.txt`: it could not be downloaded" in reply
        assert reason in reply
        assert reactions(bot, message.id) == ["▶️"]
