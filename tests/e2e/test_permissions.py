"""Who may change a session from Discord, and that nothing the bot says pings anyone.

A member who neither started a session nor administers the server is refused,
only to themselves, by every command that changes it; the owner and an
administrator are not. Plain messages in the thread stay open to everyone.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.commands.focus import NOT_OWNER
from core.agent.agent import Agent
from core.providers.scripted import Step
from core.providers.types import ToolCall
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import (
    TIMEOUT,
    assert_pings_nobody,
    bound_thread,
    content,
    ephemeral,
    run,
    settle,
    spawn,
)

SLEEP = ToolCall(id="c1", name="sleep", arguments='{"seconds": 5}')


async def running_thread(bot: Bot, task: str = "research") -> tuple[int, Agent]:
    """Alice spawns a session whose first turn sleeps in a tool; its thread id and agent."""
    await spawn(bot, task, mode="session")
    record = bot.binding()
    async with asyncio.timeout(TIMEOUT):
        await bot.clock.wait_for_sleepers()
    agent = await bot.services.runtime.get(record.target_session_key)
    return int(record.conversation.conversation_id), agent


def queued(agent: Agent) -> list[str]:
    snapshot = agent.snapshot()
    return [m.text for m in (*snapshot.steering_queue, *snapshot.follow_up_queue)]


async def refused(bot: Bot, user: Any, command: str, channel: int, **options: str) -> None:
    reply = await run(bot, user, command, channel, **options)
    assert (content(reply), ephemeral(reply)) == (NOT_OWNER, True), command


class TestRunningTurn:
    async def test_member_cannot_steer_queue_or_cancel_but_may_talk(
        self, start_bot: StartBot
    ) -> None:
        """mallory's /steer, /followup and /cancel are refused; her plain message still steers."""
        bot = await start_bot([Step(tool_calls=(SLEEP,)), Step(text="done")])
        thread, agent = await running_thread(bot)
        mallory = bot.fake.add_member(bot.world.guild, "mallory")

        await refused(bot, mallory, "steer", thread, message="stop that")
        await refused(bot, mallory, "followup", thread, message="and then this")
        await refused(bot, mallory, "cancel", thread)

        assert agent.running
        assert queued(agent) == []
        said = await bot.fake.user_says(thread, mallory, "a word from the audience")
        async with asyncio.timeout(TIMEOUT):
            await bot.fake.wait_for_request(
                "PUT", f"/channels/{thread}/messages/{said.id}/reactions"
            )
        assert queued(agent) == ["a word from the audience"]
        await bot.clock.advance(5)
        await settle(bot, agent.session_key)

    async def test_admin_may_cancel_the_owners_turn(self, start_bot: StartBot) -> None:
        """An administrator's /cancel stops someone else's turn, publicly."""
        bot = await start_bot([Step(tool_calls=(SLEEP,)), Step(text="done")])
        thread, agent = await running_thread(bot)

        reply = await run(bot, bot.world.admin, "cancel", thread)

        assert content(reply) == "Cancelled."
        assert not ephemeral(reply)
        assert not agent.running
        await settle(bot, agent.session_key)


class TestIdleSession:
    @pytest.mark.parametrize(
        ("command", "options"),
        [
            ("rewind", {"node": "FIRST"}),
            ("bookmark", {"node": "FIRST", "label": "mine"}),
            ("steer", {"message": "start over"}),
            ("followup", {"message": "start over"}),
            ("session mode", {"default": "follow_up"}),
            ("session idle", {"duration": "1h"}),
            ("unfocus", {}),
        ],
    )
    async def test_member_changes_nothing(
        self, start_bot: StartBot, command: str, options: dict[str, str]
    ) -> None:
        """Each changing command by mallory is refused; head, bookmarks, binding and log stay."""
        bot = await start_bot([Step(text="hi")])
        record, thread = await bound_thread(bot)
        async with asyncio.timeout(TIMEOUT):  # the task's completion is recorded too
            await bot.services.subagents.wait_settled()
        agent = await bot.services.runtime.get(record.target_session_key)
        first = agent.tree.path()[0].node_id
        before = (agent.tree.head_id, dict(agent.tree.bookmarks), len(agent.tree.events))
        mallory = bot.fake.add_member(bot.world.guild, "mallory")
        given = {k: first[:8] if v == "FIRST" else v for k, v in options.items()}

        await refused(bot, mallory, command, thread, **given)

        after = (agent.tree.head_id, dict(agent.tree.bookmarks), len(agent.tree.events))
        assert after == before
        assert not agent.running
        assert bot.binding() == record

    async def test_member_may_read_and_admin_may_rewind_and_bookmark(
        self, start_bot: StartBot
    ) -> None:
        """Reading stays open to mallory; an administrator bookmarks and rewinds alice's session."""
        bot = await start_bot([Step(text="hi")])
        record, thread = await bound_thread(bot)
        agent = await bot.services.runtime.get(record.target_session_key)
        answer = agent.tree.path()[1].node_id
        mallory = bot.fake.add_member(bot.world.guild, "mallory")

        shown = await run(bot, mallory, "tree", thread)
        assert record.target_session_key in content(shown)
        admin = bot.world.admin
        marked = await run(bot, admin, "bookmark", thread, node=answer[:8], label="kept")
        rewound = await run(bot, admin, "rewind", thread, node="kept")

        assert "Bookmarked" in content(marked)
        assert "Rewound" in content(rewound)
        assert agent.tree.bookmarks == {"kept": answer}
        assert agent.tree.head_id == answer


class TestFocus:
    async def test_member_cannot_focus_someone_elses_session(self, start_bot: StartBot) -> None:
        """mallory's /focus of alice's session key in her own thread is refused; nothing binds."""
        bot = await start_bot([Step(text="hi")])
        record, _ = await bound_thread(bot)
        mallory = bot.fake.add_member(bot.world.guild, "mallory")
        hers = bot.fake.add_thread(bot.world.channel, "mine now", owner=mallory)
        await bot.fake.sync(bot.world.bot)

        await refused(bot, mallory, "focus", hers.id, target=record.target_session_key)

        assert list(bot.services.bindings.live()) == [record]

    async def test_owner_refocuses_after_unfocus_and_admin_may_focus(
        self, start_bot: StartBot
    ) -> None:
        """With no thread left, the starter still owns the session; an admin may bind it too."""
        bot = await start_bot([Step(text="hi")])
        record, thread = await bound_thread(bot)
        key = record.target_session_key
        await run(bot, bot.world.alice, "unfocus", thread)
        assert bot.services.bindings.list_by_session(key) == ()
        again = bot.fake.add_thread(bot.world.channel, "again", owner=bot.world.alice)
        other = bot.fake.add_thread(bot.world.channel, "admin's")
        await bot.fake.sync(bot.world.bot)

        mine = await run(bot, bot.world.alice, "focus", again.id, target=key)
        theirs = await run(bot, bot.world.admin, "focus", other.id, target=key)

        assert "now bound" in content(mine)
        assert "now bound" in content(theirs)
        bound = {r.conversation.conversation_id for r in bot.services.bindings.list_by_session(key)}
        assert bound == {str(again.id), str(other.id)}


class TestNobodyIsPinged:
    async def test_echoed_user_text_and_everything_else_pings_nobody(
        self, start_bot: StartBot
    ) -> None:
        """@everyone in a task, a steer, a follow-up, a bookmark label: no message pings."""
        bot = await start_bot(
            [Step(tool_calls=(SLEEP,)), Step(text="@everyone done"), Step(text="@here again")]
        )
        thread, agent = await running_thread(bot, task="@everyone research")
        alice = bot.world.alice

        steered = await run(bot, alice, "steer", thread, message="@everyone look")
        await run(bot, alice, "followup", thread, message="<@&1> and @here later")
        cancelled = await run(bot, alice, "cancel", thread)
        started = await run(bot, alice, "followup", thread, message="@everyone go on")
        await settle(bot, agent.session_key)
        node = agent.tree.path()[0].node_id[:8]
        await run(bot, alice, "bookmark", thread, node=node, label="@everyone")
        await run(bot, alice, "tree", thread)
        await run(bot, alice, "rewind", thread, node=node)
        await run(bot, alice, "unfocus", thread)
        await bot.fake.wait_for_message(thread, lambda m: "no longer bound" in m.content)

        assert content(steered) == "Steering: @everyone look"
        assert "@everyone look" in content(cancelled)
        assert content(started) == "Started a turn with: @everyone go on"
        checked = assert_pings_nobody(bot.fake)
        paths = {r.path.split("/")[1] for r in checked}
        assert paths == {"channels", "webhooks", "interactions"}
