"""adapters.matrix.commands against a real Synapse: ``!`` commands answered as replies.

The bot runs over the real services (:func:`bot.wiring.build_services`, the scripted
model); a person types commands with a mautrix client of their own and reads the bot's
replies the way their client would: the events that reply to their command.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from mautrix.client import Client
from mautrix.types import EventID, PaginationDirection, RoomID, TextMessageEventContent

from adapters.matrix import MatrixConnection
from adapters.matrix.commands import INTERRUPTED, MatrixCommands
from adapters.matrix.ids import room_of, thread_of
from adapters.matrix.inbox import MatrixInbox
from bot.wiring import build_services
from core.clock import FakeClock
from core.config import parse_config
from core.inbox import InboxPress
from core.providers.scripted import ScriptedProvider, Step
from core.services import Services
from core.usecases import UseCases
from tests.matrix.synapse import MatrixUser, Synapse, matrix_client

WAIT = 30.0
TOKEN_ENV = "MATRIX_ACCESS_TOKEN"
SESSION = "agent:matrix-commands"
_people = itertools.count()


@dataclass
class Watched:
    """The account's sync handler, noting each batch it finished."""

    matrix: MatrixInbox
    batches: int = 0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def resume_from(self) -> str | None:
        return await self.matrix.resume_from()

    async def handle(self, rooms: Mapping[str, Any], /, *, since: str | None) -> None:
        await self.matrix.handle(rooms, since=since)

    async def handled(self, next_batch: str, /) -> None:
        await self.matrix.handled(next_batch)
        async with self.changed:
            self.batches += 1
            self.changed.notify_all()

    async def wait_batches(self, count: int) -> None:
        async with asyncio.timeout(WAIT), self.changed:
            await self.changed.wait_for(lambda: self.batches >= count)


@dataclass
class Bot:
    synapse: Synapse
    user: MatrixUser
    services: Services

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Watched]:
        config = self.services.config
        async with aiohttp.ClientSession() as http:
            connection = MatrixConnection.from_config(config, "default", session=http)
            commands = MatrixCommands("default", connection.client, UseCases.of(self.services))
            matrix = MatrixInbox(
                "default",
                connection.client,
                self.services.inbox,
                self.services.bindings,
                commands=commands,
            )
            watched = Watched(matrix)
            connection.handler = watched
            task = asyncio.create_task(connection.run())
            try:
                yield watched
            finally:
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task


@pytest.fixture
async def bot(synapse: Synapse, tmp_path: Path) -> AsyncIterator[Bot]:
    user = synapse.register(f"tb-commands-bot-{next(_people)}")
    account = {
        "homeserver": synapse.base_url,
        "user_id": user.user_id,
        "access_token_env": TOKEN_ENV,
    }
    config = parse_config(
        {
            "store": {"url": f"sqlite:///{tmp_path / 'bot.db'}"},
            "channels": {"matrix": {"accounts": {"default": account}}},
        },
        config_path=tmp_path / "config.toml",
        env={TOKEN_ENV: user.access_token},
    )
    provider = ScriptedProvider(lambda _messages: Step(text="ok"))
    services = await build_services(config, clock=FakeClock(), env={}, provider=provider)
    try:
        yield Bot(synapse, user, services)
    finally:
        await services.close()


@pytest.fixture
async def person(synapse: Synapse) -> AsyncIterator[Client]:
    async with matrix_client(synapse, synapse.register(f"typist-{next(_people)}")) as client:
        yield client


async def room_with(bot: Bot, person: Client) -> RoomID:
    room_id = await person.create_room(invitees=[bot.user.user_id])
    async with matrix_client(bot.synapse, bot.user) as bot_client:
        await bot_client.join_room_by_id(room_id)
    return room_id


async def position_of(bot: Bot) -> str:
    """The bot account's sync position now, as its own client reads it."""
    async with matrix_client(bot.synapse, bot.user) as client:
        return str((await client.sync(timeout=0))["next_batch"])


async def send(person: Client, room_id: RoomID, text: str, *, thread: str | None = None) -> EventID:
    content: dict[str, Any] = {"msgtype": "m.text", "body": text}
    if thread is not None:
        content["m.relates_to"] = {"rel_type": "m.thread", "event_id": thread}
    return await person.send_message(room_id, TextMessageEventContent.deserialize(content))


async def replies_to(
    person: Client, room_id: RoomID, event_id: EventID, *, count: int = 1
) -> list[Mapping[str, Any]]:
    """The events replying to ``event_id`` as the person's client reads the room, once
    ``count`` are there (a long-poll of their ``/sync`` between looks)."""
    since = None
    async with asyncio.timeout(WAIT):
        while True:
            page = await person.get_messages(room_id, PaginationDirection.BACKWARD, limit=100)
            found = [
                e.serialize()
                for e in page.events
                if (e.serialize().get("content") or {})
                .get("m.relates_to", {})
                .get("m.in_reply_to", {})
                .get("event_id")
                == event_id
            ]
            if len(found) >= count:
                return found
            since = (await person.sync(since=since, timeout=5_000))["next_batch"]


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
