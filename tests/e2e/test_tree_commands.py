"""``/tree``, ``/rewind``, ``/bookmark`` and ``/export`` in a bound thread (fake Discord)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.commands.bound import NOT_BOUND
from core.providers.scripted import Step
from core.providers.types import ToolCall
from fakediscord.models import InteractionResponse
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import TIMEOUT, settle, spawn

EPHEMERAL = 64


async def start(start_bot: StartBot, steps: Any) -> Bot:
    return await start_bot(steps)


async def command(
    bot: Bot, name: str, channel_id: int, **options: str
) -> tuple[InteractionResponse, int]:
    """Run ``/name`` as alice; the callback and the interaction id."""
    w = bot.world
    handle = await bot.fake.invoke_command(w.guild, channel_id, w.alice, name, options)
    async with asyncio.timeout(TIMEOUT):
        return await handle.wait_response(), handle.id


def data(response: InteractionResponse) -> dict[str, Any]:
    body: dict[str, Any] = response.body["data"]
    return body


async def two_turns(bot: Bot) -> tuple[int, str]:
    """Spawn with 'one', then say 'two' in the thread; the thread id and session key."""
    await spawn(bot, "one", mode="session")
    record = bot.binding()
    thread_id = int(record.conversation.conversation_id)
    await settle(bot, record.target_session_key)
    await say(bot, thread_id, record.target_session_key, "two")
    return thread_id, record.target_session_key


async def say(bot: Bot, thread_id: int, session_key: str, text: str) -> None:
    """Alice writes in the thread; returns once the agent has answered."""
    message = await bot.fake.user_says(thread_id, bot.world.alice, text)
    async with asyncio.timeout(TIMEOUT):  # the mark comes after delivery
        await bot.fake.wait_for_request(
            "PUT", f"/channels/{thread_id}/messages/{message.id}/reactions"
        )
    await settle(bot, session_key)


def conversation(bot: Bot, session_key: str) -> list:
    agent = bot.services.runtime.peek(session_key)
    assert agent is not None
    return [e for e in agent.tree.events if e.advances]


class TestTree:
    async def test_tree_shows_active_path_and_bookmark(self, start_bot: StartBot) -> None:
        """/tree lists the active path with 8-character ids, the head and bookmark labels."""
        bot = await start(start_bot, [Step(text="answer A"), Step(text="answer B")])
        thread_id, key = await two_turns(bot)
        user1, answer_a, _user2, answer_b = conversation(bot, key)
        await command(bot, "bookmark", thread_id, node=answer_a.node_id[:8], label="checkpoint")

        reply, _ = await command(bot, "tree", thread_id)

        text = data(reply)["content"]
        assert data(reply)["flags"] & EPHEMERAL
        assert f"▶ {user1.node_id[:8]} user: one" in text
        assert f"▶ {answer_a.node_id[:8]} assistant: answer A  🔖 checkpoint" in text
        assert f"▶ {answer_b.node_id[:8]} assistant: answer B ← head" in text
        assert answer_a.node_id not in text  # ids are shortened
        assert len(text) <= 2000

    async def test_side_branch_is_summarised_after_a_rewind(self, start_bot: StartBot) -> None:
        """After editing a message, the old version shows as a side branch under its fork."""
        bot = await start(start_bot, lambda _messages: Step(text="ok"))
        thread_id, key = await two_turns(bot)
        user2 = conversation(bot, key)[2]
        await command(bot, "rewind", thread_id, node=user2.node_id[:8])
        await say(bot, thread_id, key, "two, edited")

        reply, _ = await command(bot, "tree", thread_id)

        text = data(reply)["content"]
        assert f"  └ {user2.node_id[:8]} user: two (+1 more)" in text
        assert "user: two, edited" in text

    async def test_long_tree_is_truncated_with_a_note(self, start_bot: StartBot) -> None:
        """A tree longer than one message keeps the newest lines and says what was dropped."""
        bot = await start(start_bot, lambda _messages: Step(text="x" * 200))
        await spawn(bot, "start", mode="session")
        record = bot.binding()
        thread_id, key = int(record.conversation.conversation_id), record.target_session_key
        await settle(bot, key)
        for n in range(20):
            await say(bot, thread_id, key, f"message {n} " + "y" * 100)

        reply, _ = await command(bot, "tree", thread_id)

        text = data(reply)["content"]
        assert len(text) <= 2000
        assert "earlier line(s) not shown" in text
        assert "← head" in text


class TestBookmarkAndRewind:
    async def test_bookmark_then_rewind_to_the_label(self, start_bot: StartBot) -> None:
        """A bookmarked node can be rewound to by its label; the head moves there."""
        bot = await start(start_bot, [Step(text="answer A"), Step(text="answer B")])
        thread_id, key = await two_turns(bot)
        answer_a = conversation(bot, key)[1]

        marked, _ = await command(
            bot, "bookmark", thread_id, node=answer_a.node_id[:8], label="checkpoint"
        )
        rewound, _ = await command(bot, "rewind", thread_id, node="checkpoint")

        assert "Bookmarked" in data(marked)["content"]
        assert f"Rewound to `{answer_a.node_id[:8]}`" in data(rewound)["content"]
        agent = await bot.services.runtime.get(key)
        assert agent.tree.bookmarks == {"checkpoint": answer_a.node_id}
        assert agent.tree.head_id == answer_a.node_id

    async def test_rewind_user_message_returns_text_and_next_message_is_sibling(
        self, start_bot: StartBot
    ) -> None:
        """Rewinding to a user message shows its text; the next message forks beside it."""
        bot = await start(start_bot, lambda _messages: Step(text="ok"))
        thread_id, key = await two_turns(bot)
        _user1, answer_a, user2, _answer_b = conversation(bot, key)

        rewound, _ = await command(bot, "rewind", thread_id, node=user2.node_id[:8])
        await say(bot, thread_id, key, "two, edited")

        assert "```\ntwo\n```" in data(rewound)["content"]
        agent = await bot.services.runtime.get(key)
        siblings = [e.payload["text"] for e in agent.tree.children(answer_a.node_id)]
        assert siblings == ["two", "two, edited"]
        assert [e.node_id for e in agent.tree.path()][:2] == [_user1.node_id, answer_a.node_id]
        assert len(agent.tree.branches) == 2

    async def test_rewind_while_running_is_refused(self, start_bot: StartBot) -> None:
        """While a turn runs, /rewind says to /cancel first and the head does not move."""
        sleep = ToolCall(id="c1", name="sleep", arguments='{"seconds": 5}')
        bot = await start(start_bot, [Step(tool_calls=(sleep,)), Step(text="done")])
        await spawn(bot, "research", mode="session")
        record = bot.binding()
        thread_id, key = int(record.conversation.conversation_id), record.target_session_key
        async with asyncio.timeout(TIMEOUT):
            await bot.clock.wait_for_sleepers()
        agent = await bot.services.runtime.get(key)
        head = agent.tree.head_id
        first = conversation(bot, key)[0]

        refused, _ = await command(bot, "rewind", thread_id, node=first.node_id[:8])

        assert "/cancel" in data(refused)["content"]
        assert data(refused)["flags"] & EPHEMERAL
        assert agent.tree.head_id == head
        await bot.clock.advance(5)
        await settle(bot, key)

    @pytest.mark.parametrize(
        ("ref", "expected"), [("zzzz", "no node or bookmark"), ("", "no node or bookmark")]
    )
    async def test_unknown_ref_is_an_ephemeral_error(
        self, start_bot: StartBot, ref: str, expected: str
    ) -> None:
        """An id prefix or label that matches nothing is explained only to the caller."""
        bot = await start(start_bot, [Step(text="hi")])
        await spawn(bot, "one", mode="session")
        record = bot.binding()
        await settle(bot, record.target_session_key)

        refused, _ = await command(
            bot, "rewind", int(record.conversation.conversation_id), node=ref or " "
        )

        assert expected in data(refused)["content"]
        assert data(refused)["flags"] & EPHEMERAL

    async def test_bad_label_is_an_ephemeral_error(self, start_bot: StartBot) -> None:
        """A label that looks like a node id is refused with the store's explanation."""
        bot = await start(start_bot, [Step(text="hi")])
        await spawn(bot, "one", mode="session")
        record = bot.binding()
        key = record.target_session_key
        await settle(bot, key)
        node = conversation(bot, key)[0].node_id

        refused, _ = await command(
            bot, "bookmark", int(record.conversation.conversation_id), node=node, label=node
        )

        assert "not usable" in data(refused)["content"]
        assert data(refused)["flags"] & EPHEMERAL


class TestExport:
    async def test_export_attaches_an_html_file(self, start_bot: StartBot) -> None:
        """/export answers with the session's HTML page as an attachment."""
        bot = await start(start_bot, [Step(text="hello there")])
        await spawn(bot, "one", mode="session")
        record = bot.binding()
        key = record.target_session_key
        await settle(bot, key)

        reply, interaction_id = await command(
            bot, "export", int(record.conversation.conversation_id)
        )

        (attachment,) = data(reply)["attachments"]
        filename = key.replace(":", "_") + ".html"
        assert attachment["filename"] == filename
        (request,) = bot.fake.requests_matching("POST", f"/interactions/{interaction_id}/")
        (file,) = request.files
        assert file.filename == filename
        assert b"hello there" in file.data
        assert b"<html" in file.data.lower()
        # the answer message keeps the file, served as a page (Discord types files by name)
        answer = bot.fake.message(bot.fake.state.interactions[interaction_id].original_message_id)
        (stored,) = answer.attachments
        assert (stored.filename, stored.content_type) == (filename, "text/html")
        assert stored.data == file.data


class TestUnbound:
    @pytest.mark.parametrize(
        ("name", "options"),
        [
            ("tree", {}),
            ("rewind", {"node": "x"}),
            ("bookmark", {"node": "x", "label": "y"}),
            ("export", {}),
        ],
    )
    async def test_command_in_an_unbound_channel(
        self, start_bot: StartBot, name: str, options: dict[str, str]
    ) -> None:
        """Outside a bound thread every tree command says so, only to the caller."""
        bot = await start(start_bot, [])

        reply, _ = await command(bot, name, bot.world.channel.id, **options)

        assert data(reply)["content"] == NOT_BOUND
        assert data(reply)["flags"] & EPHEMERAL
