"""Nothing said to the bot is lost across a real ``kill -9`` or SIGTERM of ``python -m bot``.

The bot runs as a process of its own (``tests/fixtures/shard_processes.py``):
killed, it does no clean-up at all. Each test checks what a person in the
thread sees after the restart: a message written right after it is answered
at once (the dead process's leases are taken over, not waited out); messages
written while the bot was down are answered, in order, once, and a second
restart answers nothing twice; a turn or a brief the stop cut off is closed
visibly, and the next turn starts clean.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.handoffs.brief import BRIEF_CUT_OFF, BRIEF_STOPPED
from fakediscord import FakeDiscord
from fakediscord.models import Message
from tests.e2e.helpers import tool_lines
from tests.fixtures.acp import SCRIPTED
from tests.fixtures.shard_processes import (
    ANSWER,
    BotProcess,
    ShardWorld,
    TaskLLM,
    announcements,
    running_shard_world,
    wait_until,
)
from tests.fixtures.stores import PG_URL, pg_schema, require_postgres

LONG_LEASE = 600.0
"""Longer than any test: a lease of the dead process that is taken over was proved dead."""
OFFLINE = "📬 While the bot was offline"
BRIEF_PROMPT = "Write the brief for"
AGENTS = """
[agents.scout]
display_name = "Scout"
handoff_to = ["writer"]
[agents.writer]
display_name = "Writer"
user_startable = false
"""


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[ShardWorld]:
    async with running_shard_world(tmp_path) as built:
        yield built


def sqlite_store(world: ShardWorld) -> dict[str, Any]:
    return {"url": f"sqlite:///{world.tmp / 'bot.db'}", "lease_seconds": LONG_LEASE}


def one_process(world: ShardWorld, store: dict[str, Any], extra: str = "") -> str:
    return world.config(store, shard_ids=None, shard_count=None, extra=extra)


async def session_thread(world: ShardWorld, task: str, **options: str) -> int:
    """A session-mode subagent's thread, once its task is announced there."""
    handle = await world.fake.invoke_command(
        world.guilds[0],
        world.channels[0],
        world.members[0],
        "agents spawn",
        {"task": task, "mode": "session", **options},
    )
    async with asyncio.timeout(60):
        (followup,) = await handle.wait_followups(1)
    thread = int(str(followup.body["content"]).split("<#", 1)[1].split(">", 1)[0])
    await wait_until(world.fake, lambda: True if announcements(world.fake, thread) else None)
    return thread


def answers_after(fake: FakeDiscord, thread: int, message_id: int) -> list[Message]:
    """The agent's answers in the thread after a given message."""
    return [
        m
        for m in fake.messages_in(thread)
        if m.id > message_id and m.webhook_id is not None and ANSWER in m.content
    ]


async def answered(world: ShardWorld, thread: int, message_id: int) -> Message:
    def probe() -> Message | None:
        found = answers_after(world.fake, thread, message_id)
        return found[0] if found else None

    return await wait_until(world.fake, probe)


def people_in_requests(llm: TaskLLM) -> list[list[str]]:
    """Per model request, the user messages it carried."""
    return [
        [str(m.get("content")) for m in r.json.get("messages", []) if m["role"] == "user"]
        for r in llm.requests
    ]


async def stop(process: BotProcess, how: str) -> None:
    """``kill`` (-9), ``term`` (SIGTERM) or ``int`` (SIGINT, Ctrl-C)."""
    if how == "kill":
        await process.kill()
    else:
        assert await process.stop(signal.SIGINT if how == "int" else signal.SIGTERM) == 0


class TestARestart:
    async def test_after_kill_9_a_message_is_answered_at_once(self, world: ShardWorld) -> None:
        """SQLite: the file lock proves the predecessor dead; its lease is not waited out."""
        bot = await world.run("bot", one_process(world, sqlite_store(world)), [0])
        thread = await session_thread(world, "say hello")
        await bot.kill()
        await world.restart(bot, [0])
        said = await world.fake.user_says(thread, world.members[0], "are you back?")
        await answered(world, thread, said.id)
        assert people_in_requests(world.llm)[-1][-1] == "are you back?"

    @pytest.mark.postgres
    async def test_after_kill_9_a_message_is_answered_at_once_on_postgresql(
        self, world: ShardWorld
    ) -> None:
        """PostgreSQL: the dead process's advisory lock died with its connection."""
        await require_postgres()
        async with pg_schema() as schema:
            store = {"url": PG_URL, "schema": schema, "lease_seconds": LONG_LEASE}
            bot = await world.run("bot", one_process(world, store), [0])
            thread = await session_thread(world, "say hello")
            await bot.kill()
            await world.restart(bot, [0])
            said = await world.fake.user_says(thread, world.members[0], "are you back?")
            await answered(world, thread, said.id)
            await world.stop_all()

    @pytest.mark.parametrize("how", ["kill", "term"])
    async def test_messages_written_while_down_are_answered_in_order_once(
        self, world: ShardWorld, how: str
    ) -> None:
        config = one_process(world, sqlite_store(world))
        bot = await world.run("bot", config, [0])
        thread = await session_thread(world, "say hello")
        await stop(bot, how)
        alice = world.members[0]
        first = await world.fake.user_says(thread, alice, "first while you were away")
        await world.fake.user_says(thread, alice, "second while you were away")

        await world.restart(bot, [0])
        await answered(world, thread, first.id)

        def both_given() -> bool | None:
            latest = people_in_requests(world.llm)[-1]
            return True if "second while you were away" in latest[-1] else None

        await wait_until(world.fake, both_given)
        latest = people_in_requests(world.llm)[-1]
        away = [text for text in latest if "while you were away" in text]
        assert len(away) == 2
        assert away[0] == "first while you were away"
        assert "second while you were away" in away[1]  # as a steer it comes tagged
        notices = [m.content for m in world.fake.messages_in(thread) if OFFLINE in m.content]
        assert len(notices) == 1
        assert notices[0].startswith(f"{OFFLINE}, 2 messages were written here")

        # A second restart answers nothing twice: a new message, held until the thread's
        # catch-up is over, is the only new words the model gets.
        asked = len(world.llm.requests)
        await stop(bot, how)
        await world.restart(bot, [0])
        again = await world.fake.user_says(thread, alice, "and now?")
        await answered(world, thread, again.id)
        new_words = {text for request in people_in_requests(world.llm)[asked:] for text in request}
        assert not any("while you were away" in text for text in new_words - set(latest))
        assert [r[-1] for r in people_in_requests(world.llm)[asked:]][-1] == "and now?"
        assert len([m for m in world.fake.messages_in(thread) if OFFLINE in m.content]) == 1

    async def test_a_turn_cut_off_by_kill_9_is_closed_visibly_and_the_next_starts_clean(
        self, world: ShardWorld
    ) -> None:
        bot = await world.run("bot", one_process(world, sqlite_store(world)), [0])
        thread = await session_thread(world, "say hello")
        await world.fake.user_says(thread, world.members[0], "HOLD: think about it")
        await wait_until(world.fake, lambda: True if world.llm.held >= 1 else None)
        await bot.kill()

        await world.restart(bot, [0])
        notice = await wait_until(
            world.fake,
            lambda: next(
                (m for m in world.fake.messages_in(thread) if "stopped unexpectedly" in m.content),
                None,
            ),
        )
        assert "Send a message to carry on." in notice.content
        said = await world.fake.user_says(thread, world.members[0], "hello again")
        await answered(world, thread, said.id)
        assert people_in_requests(world.llm)[-1][-1] == "hello again"


def owed_rows(world: ShardWorld, text: str) -> int | None:
    """How many messages with ``text`` the bot's store records (owed to their thread, or
    shown with a line still open); None: none."""
    with contextlib.closing(sqlite3.connect(world.tmp / "bot.db")) as db:
        (count,) = db.execute(
            "SELECT count(*) FROM thread_messages WHERE content LIKE ?", (f"%{text}%",)
        ).fetchone()
    return count or None


class TestAFinishedAnswerCutByACrash:
    async def test_the_next_process_finishes_the_answer_discord_refused_once(
        self, world: ShardWorld
    ) -> None:
        """The model finishes while Discord refuses the stream's edits; kill -9: the next
        process edits the message to the whole answer, once."""
        bot = await world.run("bot", one_process(world, sqlite_store(world)), [0])
        thread = await session_thread(world, "say hello")
        said = await world.fake.user_says(thread, world.members[0], "HOLD: write it all")
        cut = await wait_until(
            world.fake,
            lambda: next(
                (m for m in world.fake.messages_in(thread) if m.content == "working… "), None
            ),
        )
        world.fake.fail_next("PATCH", "/webhooks/*", 429, times=100_000, via_header=False)
        world.llm.release()
        await wait_until(world.fake, lambda: owed_rows(world, "working"))  # recorded, not shown
        await bot.kill()
        assert world.fake.message(cut.id).content == "working… "
        world.fake.faults.faults.clear()

        await world.restart(bot, [0])
        await wait_until(
            world.fake,
            lambda: True if world.fake.message(cut.id).content == "working… " + ANSWER else None,
        )
        answers = [m for m in answers_after(world.fake, thread, said.id)]
        assert [m.id for m in answers] == [cut.id]


class TestAnExternalAgentsRequestAcrossAKill:
    async def test_its_tool_line_says_withdrawn_in_place_once(self, world: ShardWorld) -> None:
        """An external agent asked for permission; kill -9: the next start withdraws the
        request, and the tool line that said "waiting" says so in its message, once."""
        coder = (
            "[acp_agents.scripted]\n"
            f"command = {json.dumps([sys.executable, str(SCRIPTED)])}\n"
            '[agents.coder]\ndisplay_name = "Coder"\nacp = "scripted"\n'
        )
        bot = await world.run("bot", one_process(world, sqlite_store(world), coder), [0])
        handle = await world.fake.invoke_command(
            world.guilds[0],
            world.channels[0],
            world.members[0],
            "agents spawn",
            {"task": "ask me", "mode": "session", "agent": "coder"},
        )
        async with asyncio.timeout(60):
            (followup,) = await handle.wait_followups(1)
        thread = int(str(followup.body["content"]).split("<#", 1)[1].split(">", 1)[0])
        waiting = await wait_until(
            world.fake,
            lambda: next(
                (
                    m
                    for m in world.fake.messages_in(thread)
                    if m.webhook_id is not None and "waiting for approval" in m.content
                ),
                None,
            ),
        )
        await wait_until(world.fake, lambda: owed_rows(world, "waiting"))
        await bot.kill()

        await world.restart(bot, [0])
        shown = await wait_until(
            world.fake,
            lambda: (
                world.fake.message(waiting.id)
                if "withdrawn" in world.fake.message(waiting.id).content
                else None
            ),
        )
        assert "waiting for approval" not in shown.content
        assert len(tool_lines(world.fake, thread)) == 1


class TestABriefCutOff:
    @pytest.mark.parametrize("how", ["kill", "term", "int"])
    async def test_the_brief_message_says_so_and_offers_the_button_again(
        self, world: ShardWorld, how: str
    ) -> None:
        """Cut off by kill -9, SIGTERM or SIGINT: nothing is offered, the brief's message
        gets the button back, and the next answer brings a new one."""
        world.llm.hold_words = (BRIEF_PROMPT,)
        bot = await world.run("bot", one_process(world, sqlite_store(world), AGENTS), [0])
        thread = await session_thread(world, "plan a trip", agent="scout")
        button = await wait_until(world.fake, lambda: brief_button(world.fake, thread))
        custom_id = _brief_id(button)
        await world.fake.click_button(button, custom_id, world.members[0])
        await wait_until(world.fake, lambda: True if world.llm.held >= 1 else None)

        await stop(bot, how)
        if how != "kill":
            assert world.fake.message(button.id).content == BRIEF_STOPPED
            assert "Session is closed" not in bot.output()
            assert "Traceback" not in bot.output()
        await world.restart(bot, [0])
        wanted = BRIEF_CUT_OFF if how == "kill" else BRIEF_STOPPED
        shown = await wait_until(
            world.fake,
            lambda: (
                world.fake.message(button.id)
                if world.fake.message(button.id).content == wanted
                else None
            ),
        )
        assert not _components(shown)[custom_id].get("disabled")
        assert not _offers(world.fake, thread)  # the words cut off are no brief

        # The next answer brings the button again, under it; that one works.
        said = await world.fake.user_says(thread, world.members[0], "what about Porto?")
        answer = await answered(world, thread, said.id)
        fresh = await wait_until(
            world.fake,
            lambda: next(
                (m for m in world.fake.messages_in(thread) if m.id > answer.id and _brief_ids(m)),
                None,
            ),
        )
        assert not _offers(world.fake, thread)
        world.llm.release()
        await world.fake.click_button(fresh, custom_id, world.members[0])
        await wait_until(
            world.fake,
            lambda: next(
                (m for m in world.fake.messages_in(thread) if "offers a handoff" in m.content),
                None,
            ),
        )


def _offers(fake: FakeDiscord, thread: int) -> list[Message]:
    return [m for m in fake.messages_in(thread) if "offers a handoff" in m.content]


def brief_button(fake: FakeDiscord, thread: int) -> Message | None:
    return next((m for m in fake.messages_in(thread) if _brief_ids(m)), None)


def _components(message: Message) -> dict[str, dict[str, Any]]:
    return {
        item["custom_id"]: item
        for row in message.components
        for item in row.get("components") or ()
        if item.get("custom_id")
    }


def _brief_ids(message: Message) -> list[str]:
    return [cid for cid in _components(message) if cid.startswith("tb:brief:")]


def _brief_id(message: Message) -> str:
    (custom_id,) = _brief_ids(message)
    return custom_id
