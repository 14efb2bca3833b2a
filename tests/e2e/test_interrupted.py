"""Work a stop cuts off is closed visibly: the real client over the fake Discord.

A clean stop (what SIGINT and SIGTERM run) stops the running turns while the
client can still post, so the thread says so and nothing looks frozen; a brief
being written gets its button back; a press a killed process was acting on is
closed at the next start. (``kill -9`` of a real process: ``test_processes_inbox.py``.)
"""

from __future__ import annotations

import asyncio
from typing import Any

from bot.app import shut_down
from bot.handoffs.brief import BRIEF_CUT_OFF, BRIEF_STOPPED
from core.inbox import InboxPress
from core.providers.scripted import Step
from core.providers.types import ToolCall
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import TIMEOUT, bound_thread, settle, status_line, text_messages
from tests.e2e.test_handoffs import AGENTS, brief_message, buttons, scout_session

SLEEP = ToolCall(id="nap", name="sleep", arguments='{"seconds": 60}')
STOPPING = "⏹️ The bot is stopping"


def works_long_when_asked(messages: Any) -> Step:
    """A message with 'long' starts a 60 s tool call; anything else is answered at once."""
    last = messages[-1]
    if last.role == "user" and "long" in (last.content or ""):
        return Step(tool_calls=(SLEEP,))
    said = [m.content for m in messages if m.role == "user"]
    return Step(text=f"answer to {said[-1]}")


async def stopped_cleanly(bot: Bot) -> None:
    async with asyncio.timeout(TIMEOUT):
        await shut_down(bot.services, [bot.client], drain_seconds=30)
    await bot.services.close()


class TestACleanStop:
    async def test_a_turn_under_way_is_cut_off_visibly_and_the_next_one_starts_clean(
        self, start_bot: StartBot
    ) -> None:
        bot = await start_bot(works_long_when_asked)
        record, thread = await bound_thread(bot)
        await bot.fake.user_says(thread, bot.world.alice, "a long job")
        async with asyncio.timeout(TIMEOUT):
            await bot.clock.wait_for_sleepers()

        await stopped_cleanly(bot)
        (notice,) = [m.content for m in text_messages(bot.fake, thread) if STOPPING in m.content]
        assert "once the bot is back, send a message to carry on" in notice
        assert "cut off by a bot restart" in status_line(bot.fake, thread)

        again = await start_bot(works_long_when_asked)
        await again.client.account.catch_up.wait_finished()
        await again.fake.user_says(thread, again.world.alice, "hello again")
        async with asyncio.timeout(TIMEOUT):
            await again.provider.wait_calls(1)
        await settle(again, record.target_session_key)
        assert status_line(again.fake, thread).startswith("Status: ✅ idle")

    async def test_a_brief_being_written_gets_its_button_back(self, start_bot: StartBot) -> None:
        """The stop cuts the consolidation turn off: no error escapes the press, the brief
        message says so and offers the button again, and it works after the restart."""
        never = asyncio.Event()  # the brief's answer stops mid-stream
        bot, record = await scout_session(
            start_bot,
            [Step(text="Lisbon looks best."), Step(text="## Lisbon", chunks=2, gate=never)],
        )
        thread = int(record.conversation.conversation_id)
        message = await brief_message(bot, thread)
        custom_id = f"tb:brief:{record.binding_id}"
        await bot.fake.click_button(message, custom_id, bot.world.alice)
        async with asyncio.timeout(TIMEOUT):
            await bot.provider.wait_calls(2)

        await stopped_cleanly(bot)
        shown = bot.fake.message(message.id)
        assert shown.content == BRIEF_STOPPED
        assert not buttons(shown)[custom_id].get("disabled")

        again = await start_bot(
            [Step(text="## Lisbon trip\nThree days, trains only.")], agents=AGENTS
        )
        handle = await again.fake.click_button(shown, custom_id, again.world.alice)
        async with asyncio.timeout(TIMEOUT):
            await handle.wait_for(lambda i: len(i.responses) >= 2)
            await again.fake.wait_for_message(thread, lambda m: "offers a handoff" in m.content)


class TestPressesCutOff:
    async def test_a_brief_a_killed_process_was_writing_is_offered_again(
        self, start_bot: StartBot
    ) -> None:
        """The store as a killed process left it: the press recorded, never finished."""
        bot, record = await scout_session(start_bot, [Step(text="Lisbon looks best.")])
        thread = int(record.conversation.conversation_id)
        message = await brief_message(bot, thread)
        await bot.client.close()
        press = InboxPress(
            conversation=record.conversation,
            item_id="1",
            seq=1,
            action="brief",
            target=record.binding_id,
            message_id=str(message.id),
            author_id=str(bot.world.alice.id),
        )
        await bot.services.inbox.record_press(press)
        await bot.services.close()

        again = await start_bot([Step(text="unused")], agents=AGENTS)
        shown = again.fake.message(message.id)
        assert shown.content == BRIEF_CUT_OFF
        assert not buttons(shown)[f"tb:brief:{record.binding_id}"].get("disabled")
        assert await again.services.inbox.pending_presses("discord", "default") == []
