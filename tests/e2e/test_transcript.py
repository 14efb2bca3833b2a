"""A finished answer is owed to its thread: the real client over the fake Discord.

The model finishes while Discord refuses the stream's edits, and the process
goes before Discord takes them: the next process finds the message recorded as
owed, compares it with what the thread shows, and finishes it (an edit, or the
rest as new messages) once, before the task's announcement is posted under it.
(A real ``kill -9`` of ``python -m bot``: ``test_processes_inbox.py``.)
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from adapters.discord.delivery import Persona
from core.errors import DeliveryError
from core.providers.scripted import Step
from core.transcript import ThreadMessage, Transcript
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import ANNOUNCED, TIMEOUT, done, persona_messages, spawn

LONG = "x" * 1500
ANSWER = f"First words. Then {LONG} and the last words."
"""Over 2,000 characters once doubled below: the answer takes two messages."""


def owe_seen(bot: Bot) -> asyncio.Event:
    """Set once the presenter has recorded a message as owed (a spy on the real method)."""
    seen = asyncio.Event()
    transcript: Transcript = bot.services.transcript
    original = transcript.owe

    async def owe(message: ThreadMessage) -> None:
        await original(message)
        seen.set()

    transcript.owe = owe  # type: ignore[method-assign]
    return seen


async def refused_then_gone(bot: Bot, gate: asyncio.Event, seen: asyncio.Event) -> None:
    """Discord refuses every edit and post from now on; the model finishes; once the final
    text is recorded as owed, the process goes (its client and services closed, nothing
    it still had to send is sent)."""
    for method in ("PATCH", "POST"):
        bot.fake.fail_next(method, "/webhooks/*", 429, times=10_000, via_header=False)
    gate.set()
    async with asyncio.timeout(TIMEOUT):
        await seen.wait()
    await bot.client.close()
    await bot.services.close()
    for _ in range(8):  # the dead process's retries run out against a closed client
        await bot.clock.advance(60)
    bot.fake.faults.faults.clear()


async def first_words_shown(bot: Bot, thread: int) -> Any:
    async with asyncio.timeout(TIMEOUT):
        return await bot.fake.wait_for_message(
            thread, lambda m: m.webhook_id is not None and m.content.startswith("First")
        )


class TestAFinishedAnswerCutByRefusalsAndACrash:
    async def test_the_next_process_finishes_the_message_before_the_announcement(
        self, start_bot: StartBot
    ) -> None:
        gate = asyncio.Event()
        first = await start_bot([Step(text=ANSWER, chunks=3, gate=gate)])
        seen = owe_seen(first)
        await spawn(first, "write it", mode="run")
        record = first.binding()
        thread = int(record.conversation.conversation_id)
        cut = await first_words_shown(first, thread)
        assert cut.content != ANSWER
        await refused_then_gone(first, gate, seen)
        assert [m.content for m in persona_messages(first.fake, thread)] == [cut.content]

        second = await start_bot([])
        await done(second)

        said = [m.content for m in persona_messages(second.fake, thread)]
        assert said[0] == ANSWER  # the message that was cut, edited to the whole answer
        assert said.count(ANSWER) == 1
        announced = [c for c in said if ANNOUNCED in c]
        assert len(announced) == 1
        # The answer was finished before its announcement was posted.
        requests = second.fake.requests
        edit = next(
            i
            for i, r in enumerate(requests)
            if r.method == "PATCH" and str(cut.id) in r.path and r.status == 200
        )
        post = next(
            i
            for i, r in enumerate(requests)
            if r.method == "POST" and (r.json or {}).get("content", "").endswith(ANNOUNCED)
        )
        assert edit < post

    async def test_a_long_answer_gets_its_missing_part_once_and_a_second_start_adds_nothing(
        self, start_bot: StartBot
    ) -> None:
        answer = ANSWER.replace(LONG, LONG + "\n\n" + LONG)  # two messages' worth
        gate = asyncio.Event()
        first = await start_bot([Step(text=answer, chunks=3, gate=gate)])
        seen = owe_seen(first)
        await spawn(first, "write it", mode="session")
        record = first.binding()
        thread = int(record.conversation.conversation_id)
        await first_words_shown(first, thread)
        await refused_then_gone(first, gate, seen)

        second = await start_bot([])
        await done(second)
        parts = [m.content for m in persona_messages(second.fake, thread)]
        shown = [p for p in parts if ANNOUNCED not in p and not p.startswith("✅")]
        assert "".join(p.strip() for p in shown).replace("\n", "") == answer.replace("\n", "")
        assert len(shown) == 2
        await second.client.close()
        await second.services.close()

        third = await start_bot([])
        await done(third)
        assert [m.content for m in persona_messages(third.fake, thread)] == parts

    async def test_a_part_posted_as_the_process_went_is_found_not_posted_twice(
        self, start_bot: StartBot
    ) -> None:
        """Discord created the second part, but the process went before it learnt the new
        message's id: the next process finds it in the thread and edits it, never posts
        the part again."""
        answer = ANSWER.replace(LONG, LONG + "\n\n" + LONG)
        gate = asyncio.Event()
        first = await start_bot([Step(text=answer, chunks=3, gate=gate)])
        seen = owe_seen(first)
        await spawn(first, "write it", mode="session")
        thread = int(first.binding().conversation.conversation_id)
        await first_words_shown(first, thread)
        first.fake.fail_next("PATCH", "/webhooks/*", 429, times=10_000, via_header=False)
        held = first.fake.hold("POST", "/webhooks/*")
        gate.set()
        async with asyncio.timeout(TIMEOUT):
            await seen.wait()
            await held.wait_entered()
        await first.client.close()
        held.release()  # Discord makes the message; nobody is there to read its id
        async with asyncio.timeout(TIMEOUT):
            await first.fake.wait_for_message(
                thread, lambda m: m.webhook_id is not None and m.content.startswith("x")
            )
        await first.services.close()
        for _ in range(8):
            await first.clock.advance(60)
        first.fake.faults.faults.clear()
        first.fake.faults.gates.clear()

        second = await start_bot([])
        await done(second)
        parts = [m.content for m in persona_messages(second.fake, thread)]
        shown = [p for p in parts if ANNOUNCED not in p and not p.startswith("✅")]
        assert len(shown) == 2
        assert "".join(p.strip() for p in shown).replace("\n", "") == answer.replace("\n", "")


async def test_a_post_after_the_client_closed_is_a_delivery_failure(start_bot: StartBot) -> None:
    """A stream still retrying when the client closes (a stop while Discord refuses) ends
    with a DeliveryError its presenter expects, not an error nobody retrieves."""
    bot = await start_bot([Step(text="hello")])
    await spawn(bot, "write it", mode="session")
    await done(bot)
    record = bot.binding()
    await bot.client.close()
    with pytest.raises(DeliveryError, match="connection to Discord is closed"):
        await bot.client.account.delivery.send(record, Persona("Scout"), "too late")
