"""The brief button's life over the fake Discord: what an ending leaves, and when it comes back.

A brief is written only from a consolidation turn that ended normally; one a
stop or a ``/cancel`` cut off offers nothing, however much the agent had said
by then, and its message gets the button back. Afterwards, and after a Reject,
the thread is offered the button again once the agent's next turn ends: under
that answer, once, and by the same rule after a restart. (A real ``kill -9``,
SIGTERM and SIGINT of the bot's process: ``test_processes_inbox.py``.)
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.app import shut_down
from bot.handoffs import brief as brief_button
from bot.handoffs.brief import BRIEF_STOPPED
from core.providers.scripted import Step
from core.providers.types import ToolCall
from fakediscord import Message
from fakediscord.interactions import InteractionHandle
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import EPHEMERAL, TIMEOUT, persona_messages, settle, spawn

AGENTS: dict[str, Any] = {
    "scout": {"display_name": "Scout", "handoff_to": ["writer"], "tools": ["sleep"]},
    "writer": {"display_name": "Writer", "user_startable": False},
}
NAP = ToolCall(id="nap", name="sleep", arguments='{"seconds": 60}')
SCOUT_ANSWER = "Lisbon looks best."
PARTIAL = "## Lisbon"
"""What Scout had said of its brief when it was cut off."""
BRIEF_ANSWER = "## Lisbon trip\nThree days, trains only."
OFFERS = "offers a handoff"


# -- helpers ---------------------------------------------------------------------------


def buttons(message: Message) -> dict[str, dict[str, Any]]:
    return {
        item["custom_id"]: item
        for row in message.components
        for item in row.get("components") or ()
        if item.get("custom_id")
    }


def brief_buttons(bot: Bot, thread: int) -> list[Message]:
    """The thread's messages with a brief button, oldest first."""
    return [
        m
        for m in bot.fake.messages_in(thread)
        if any(cid.startswith("tb:brief:") for cid in buttons(m))
    ]


def offers(bot: Bot, thread: int) -> list[Message]:
    return [m for m in bot.fake.messages_in(thread) if OFFERS in m.content]


async def artifact_types(bot: Bot, session_key: str) -> list[str]:
    """The session's artifacts, as its log has them."""
    tree = await bot.services.sessions.load(session_key)
    return [e.type for e in tree.events if e.type.startswith("artifact.")]


async def scout_thread(start_bot: StartBot, steps: list[Step]) -> tuple[Bot, Any, int]:
    """Scout in a session thread, its task answered and the first brief button posted."""
    bot = await start_bot(steps, agents=AGENTS)
    await spawn(bot, "plan a trip", agent="scout", mode="session")
    record = bot.binding()
    await settle(bot, record.target_session_key)
    thread = int(record.conversation.conversation_id)
    async with asyncio.timeout(TIMEOUT):
        await bot.services.subagents.wait_settled()
        await bot.client.account.drain()
    assert len(brief_buttons(bot, thread)) == 1
    return bot, record, thread


async def says(bot: Bot, record: Any, text: str) -> Message:
    """Alice writes in the thread; returns Scout's answer, once everything it led to is shown."""
    thread = int(record.conversation.conversation_id)
    calls = len(bot.provider.calls)
    said = await bot.fake.user_says(thread, bot.world.alice, text)
    async with asyncio.timeout(TIMEOUT):
        await bot.provider.wait_calls(calls + 1)
    await settle(bot, record.target_session_key)
    answers = [m for m in persona_messages(bot.fake, thread) if m.id > said.id]
    assert answers, f"no answer to {text!r}"
    return answers[-1]


async def press(bot: Bot, message: Message, record: Any) -> InteractionHandle:
    return await bot.fake.click_button(message, f"tb:brief:{record.binding_id}", bot.world.alice)


async def brief_offered(bot: Bot, record: Any, message: Message) -> Message:
    """Press the brief button on ``message``; returns the offer it led to."""
    thread = int(record.conversation.conversation_id)
    handle = await press(bot, message, record)
    offer = await bot.fake.wait_for_message(thread, lambda m: OFFERS in m.content)
    async with asyncio.timeout(TIMEOUT):
        await handle.wait_for(lambda i: sum(r.kind == "edit_original" for r in i.responses) >= 2)
    return offer


async def stopped_cleanly(bot: Bot) -> None:
    """What SIGINT / SIGTERM run, then the services closed as the process ends."""
    async with asyncio.timeout(TIMEOUT):
        await shut_down(bot.services, [bot.client], drain_seconds=30)
    await bot.services.close()


async def restarted(bot: Bot, start_bot: StartBot, steps: list[Step]) -> Bot:
    """The bot stopped cleanly and started again on the same store; its start-up done."""
    await stopped_cleanly(bot)
    again = await start_bot(steps, agents=AGENTS)
    async with asyncio.timeout(TIMEOUT):
        await again.client.account.catch_up.wait_finished()
        await again.client.account.drain()  # whatever start-up owed the threads is posted
    return again


async def cut_off_mid_stream(bot: Bot, thread: int) -> None:
    """The brief's first words are shown in the thread; the rest never comes."""
    await bot.fake.wait_for_message(thread, lambda m: m.content.startswith(PARTIAL[:4]))


async def cut_off_in_a_tool(bot: Bot, thread: int) -> None:
    """The brief's first words are recorded, and Scout is in a 60 s tool call."""
    del thread
    async with asyncio.timeout(TIMEOUT):
        await bot.clock.wait_for_sleepers()


CUTS = {
    "mid-stream": (
        lambda gate: Step(text=PARTIAL, chunks=2, gate=gate),
        cut_off_mid_stream,
    ),
    "after-its-first-words": (
        lambda gate: Step(text=PARTIAL, tool_calls=(NAP,)),
        cut_off_in_a_tool,
    ),
}


# -- tests -----------------------------------------------------------------------------


class TestAnInterruptedBrief:
    @pytest.mark.parametrize("cut", list(CUTS))
    async def test_a_stop_offers_nothing_and_the_button_comes_back(
        self, start_bot: StartBot, cut: str
    ) -> None:
        """A clean stop while Scout writes the brief: no brief, no offer, the button back on
        its message; after the restart the next answer brings a new button under it."""
        never = asyncio.Event()
        consolidation, reach = CUTS[cut]
        bot, record, thread = await scout_thread(
            start_bot, [Step(text=SCOUT_ANSWER), consolidation(never)]
        )
        key, custom_id = record.target_session_key, f"tb:brief:{record.binding_id}"
        (first,) = brief_buttons(bot, thread)
        await press(bot, first, record)
        await reach(bot, thread)

        await stopped_cleanly(bot)
        shown = bot.fake.message(first.id)
        assert shown.content == BRIEF_STOPPED
        assert not buttons(shown)[custom_id].get("disabled")
        assert offers(bot, thread) == []

        again = await start_bot([Step(text="Porto is close too.")], agents=AGENTS)
        async with asyncio.timeout(TIMEOUT):
            await again.client.account.catch_up.wait_finished()
            await again.client.account.drain()
        assert await artifact_types(again, key) == []
        assert await again.services.handoffs.list(key) == []
        assert [m.id for m in brief_buttons(again, thread)] == [first.id]  # nothing owed yet
        answer = await says(again, record, "what about Porto?")
        latest = brief_buttons(again, thread)
        assert len(latest) == 2
        assert latest[-1].id > answer.id  # under the answer that followed
        assert not buttons(latest[-1])[custom_id].get("disabled")
        assert offers(again, thread) == []

    async def test_a_cancel_offers_nothing_and_the_next_answer_brings_the_button(
        self, start_bot: StartBot
    ) -> None:
        """/cancel while Scout writes the brief: its first words are not the brief; the
        presser is told, the message gets the button back, and so does the next answer."""
        bot, record, thread = await scout_thread(
            start_bot,
            [
                Step(text=SCOUT_ANSWER),
                Step(text=PARTIAL, tool_calls=(NAP,)),
                Step(text="Porto is close too."),
                Step(text=BRIEF_ANSWER),
            ],
        )
        key, w = record.target_session_key, bot.world
        (first,) = brief_buttons(bot, thread)
        handle = await press(bot, first, record)
        async with asyncio.timeout(TIMEOUT):
            await bot.clock.wait_for_sleepers()
        cancel = await bot.fake.invoke_command(w.guild, thread, w.alice, "cancel")
        async with asyncio.timeout(TIMEOUT):
            await cancel.wait_response()
            (told,) = await handle.wait_followups(1)
            await handle.wait_for(
                lambda i: sum(r.kind == "edit_original" for r in i.responses) >= 2
            )
        assert int(told.body.get("flags") or 0) & EPHEMERAL
        assert "Scout's turn was cancelled before the brief was finished" in told.body["content"]
        assert not buttons(bot.fake.message(first.id))[f"tb:brief:{record.binding_id}"].get(
            "disabled"
        )
        assert offers(bot, thread) == []
        assert await artifact_types(bot, key) == []

        answer = await says(bot, record, "what about Porto?")
        latest = brief_buttons(bot, thread)
        assert len(latest) == 2
        assert latest[-1].id > answer.id
        await brief_offered(bot, record, latest[-1])  # and it works
        assert await artifact_types(bot, key) == ["artifact.brief"]


class TestAfterAReject:
    async def test_the_next_answer_brings_the_button_back_once_across_restarts(
        self, start_bot: StartBot
    ) -> None:
        """Rejected, the bot restarted: Scout's next answer brings the button (once); a
        later answer, and a later restart, bring no second one."""
        bot, record, thread = await scout_thread(
            start_bot, [Step(text=SCOUT_ANSWER), Step(text=BRIEF_ANSWER)]
        )
        key, alice = record.target_session_key, bot.world.alice
        (first,) = brief_buttons(bot, thread)
        offer = await brief_offered(bot, record, first)
        (handoff,) = await bot.services.handoffs.list(key)
        reject = await bot.fake.click_button(offer, f"tb:handoff:reject:{handoff.id}", alice)
        async with asyncio.timeout(TIMEOUT):
            await reject.wait_for(lambda i: any(r.kind == "edit_original" for r in i.responses))
        assert "Scout carries on" in bot.fake.message(offer.id).content
        assert len(brief_buttons(bot, thread)) == 1  # not before Scout has said more

        second = await restarted(
            bot,
            start_bot,
            [Step(text="Porto is close too."), Step(text="Faro is sunnier.")],
        )
        assert len(brief_buttons(second, thread)) == 1  # a reject alone owes no button
        answer = await says(second, record, "what about Porto?")
        latest = brief_buttons(second, thread)
        assert len(latest) == 2
        assert latest[-1].id > answer.id
        await says(second, record, "and Faro?")
        assert len(brief_buttons(second, thread)) == 2  # once per reject, not per answer

        third = await restarted(second, start_bot, [Step(text="Braga has history.")])
        await says(third, record, "and Braga?")
        assert len(brief_buttons(third, thread)) == 2
        assert [h.status for h in await third.services.handoffs.list(key)] == ["rejected"]

    async def test_a_button_owed_when_the_bot_stopped_is_posted_at_the_next_start(
        self, start_bot: StartBot, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Rejected, Scout answered again, and the process stopped before the button went
        out: the next start posts it, from the log and the binding alone."""
        bot, record, thread = await scout_thread(
            start_bot,
            [Step(text=SCOUT_ANSWER), Step(text=BRIEF_ANSWER), Step(text="Porto is close too.")],
        )
        key, alice = record.target_session_key, bot.world.alice
        offer = await brief_offered(bot, record, brief_buttons(bot, thread)[0])
        (handoff,) = await bot.services.handoffs.list(key)
        reject = await bot.fake.click_button(offer, f"tb:handoff:reject:{handoff.id}", alice)
        async with asyncio.timeout(TIMEOUT):
            await reject.wait_for(lambda i: any(r.kind == "edit_original" for r in i.responses))

        async def nothing(*_args: Any) -> None:
            return None

        monkeypatch.setattr(brief_button, "offer_brief", nothing)  # it stops before posting
        answer = await says(bot, record, "what about Porto?")
        assert len(brief_buttons(bot, thread)) == 1
        monkeypatch.undo()

        again = await restarted(bot, start_bot, [])
        latest = brief_buttons(again, thread)
        assert len(latest) == 2
        assert latest[-1].id > answer.id
