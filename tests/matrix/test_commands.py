"""adapters.matrix.commands against a real Synapse: ``!`` commands answered as replies.

The bot runs over the real services (:mod:`tests.matrix.bots`); a person types commands
with a mautrix client of their own and reads the bot's replies the way their client
would: the events that reply to their command.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mautrix.client import Client

from adapters.matrix.commands import INTERRUPTED
from adapters.matrix.ids import room_of, thread_of
from core.inbox import InboxPress
from tests.matrix.bots import Bot, a_person, position_of, replies_to, room_with, send, services_bot
from tests.matrix.synapse import Synapse

SESSION = "agent:matrix-commands"


@pytest.fixture
async def bot(synapse: Synapse, tmp_path: Path) -> AsyncIterator[Bot]:
    async with services_bot(synapse, tmp_path) as running:
        yield running


@pytest.fixture
async def person(synapse: Synapse) -> AsyncIterator[Client]:
    async with a_person(synapse) as client:
        yield client


class TestCommands:
    async def test_help_and_errors_are_replies_to_the_command(
        self, bot: Bot, person: Client
    ) -> None:
        """``!help`` lists the commands with ``!``; an unknown command and a bad option get
        the grammar's one-sentence errors; each answer replies to its command."""
        room_id = await room_with(bot, person)
        async with bot.running() as watched:
            await watched.wait_batches(1)  # its first sync: what came before is history
            asked = await send(person, room_id, "!help")
            unknown = await send(person, room_id, "!nope")
            extra = await send(person, room_id, "!usage now please")
            outside = await send(person, room_id, "!usage")
            (help_reply,) = await replies_to(person, room_id, asked)
            (unknown_reply,) = await replies_to(person, room_id, unknown)
            (extra_reply,) = await replies_to(person, room_id, extra)
            (outside_reply,) = await replies_to(person, room_id, outside)
        assert help_reply["sender"] == bot.user.user_id
        body = help_reply["content"]["body"]
        assert "`!help` — " in body
        assert "`!usage` — This session's tokens, cost and context." in body
        assert unknown_reply["content"]["body"] == "no command !nope; known: !help, !usage"
        assert (
            extra_reply["content"]["body"]
            == "!usage: don't know what 'now please' is for; use name:value"
        )
        assert outside_reply["content"]["body"] == (
            "This is not a session's thread; use !usage in a subagent's thread."
        )
        assert "rel_type" not in help_reply["content"]["m.relates_to"]  # the main timeline

    async def test_usage_in_a_bound_thread_answers_in_the_thread_once(
        self, bot: Bot, person: Client
    ) -> None:
        """``!usage`` in a session's thread answers there; a restart from an older position
        does not answer it again."""
        room_id = await room_with(bot, person)
        root = await person.send_text(room_id, "🧵 **Scout** — look into the logs")
        await bot.services.bindings.bind(
            SESSION, "session", thread_of("default", room_id, root), scope=room_id
        )
        async with bot.running() as watched:
            await watched.wait_batches(1)
            before = await bot.services.inbox.position("matrix", "default")
            assert before is not None
            asked = await send(person, room_id, "!usage", thread=root)
            (answer,) = await replies_to(person, room_id, asked)
        assert answer["content"]["body"].startswith("**Usage of this session**")
        relates = answer["content"]["m.relates_to"]
        assert (relates["rel_type"], relates["event_id"]) == ("m.thread", root)
        assert await bot.services.inbox.pending_presses("matrix", "default") == []

        await bot.services.inbox.save_position("matrix", "default", before)
        async with bot.running() as watched:  # the homeserver hands the command again
            await watched.wait_batches(1)
        assert len(await replies_to(person, room_id, asked)) == 1

    async def test_a_command_a_stopped_bot_began_is_closed_asking_for_it_again(
        self, bot: Bot, person: Client
    ) -> None:
        """Recorded but never finished (the bot died answering): the next start replies
        once that it was not finished, and does not act on it when it comes again."""
        room_id = await room_with(bot, person)
        await bot.services.inbox.save_position("matrix", "default", await position_of(bot))
        asked = await send(person, room_id, "!help")
        began = InboxPress(
            conversation=room_of("default", room_id),
            item_id=asked,
            seq=1,
            action="command",
            target="!help",
            message_id=room_id,
        )
        assert await bot.services.inbox.record_press(began)
        async with bot.running() as watched:
            await watched.wait_batches(1)  # the command comes again
        (reply,) = await replies_to(person, room_id, asked)
        assert reply["content"]["body"] == INTERRUPTED
        assert await bot.services.inbox.pending_presses("matrix", "default") == []

    async def test_commands_before_the_bot_ever_read_the_room_are_history(
        self, bot: Bot, person: Client
    ) -> None:
        """The first sync's recent history is not answered; what follows it is."""
        room_id = await room_with(bot, person)
        old = await send(person, room_id, "!help")
        async with bot.running() as watched:
            await watched.wait_batches(1)
            new = await send(person, room_id, "!help")
            await replies_to(person, room_id, new)
        assert await replies_to(person, room_id, old, count=0) == []
