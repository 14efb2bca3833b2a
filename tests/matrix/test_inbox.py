"""adapters.matrix.inbox against a real Synapse: a bound thread's messages reach the core inbox.

A person (a mautrix client of their own) writes in a thread bound to a session; behind
the inbox stands a real runtime with the scripted model, as in the core inbox's tests.
What the session received is read from its log; what the bot showed the person is read
from the person's own ``/sync``.
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
from mautrix.types import (
    EventID,
    EventType,
    Obj,
    PaginationDirection,
    RoomID,
    TextMessageEventContent,
)
from structlog.testing import capture_logs

from adapters.matrix import MatrixConnection
from adapters.matrix.ids import thread_of
from adapters.matrix.inbox import MatrixInbox
from core.agent import Agent, ToolRegistry
from core.attachments import AttachmentStore
from core.bindings.service import SessionBindingService
from core.clock import FakeClock
from core.inbound import InboundRouter
from core.inbox import FileRef, Inbox, InboxMessage, Outcome
from core.providers.scripted import ScriptedProvider, Step
from core.runtime import SessionRuntime
from core.sessions.log import SessionLog
from core.store import Database
from tests.fixtures.stores import store_factory
from tests.matrix.synapse import MatrixUser, Synapse, matrix_client
from tests.matrix.test_connection import matrix_config

WAIT = 30.0
SESSION = "agent:matrix-inbox"
_people = itertools.count()


@dataclass
class Watched:
    """The Matrix inbox as the core inbox and the sync loop see it, noting each outcome it
    was asked to show and each batch it finished."""

    matrix: MatrixInbox
    shown: list[tuple[str, str]] = field(default_factory=list)
    batches: int = 0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    saved: set[str] = field(default_factory=set)
    """Events whose batch was handled to the end and its position saved."""
    _batch: set[str] = field(default_factory=set)

    async def resume_from(self) -> str | None:
        return await self.matrix.resume_from()

    async def handle(self, rooms: Mapping[str, Any], /, *, since: str | None) -> None:
        self._batch = {
            event["event_id"]
            for room in (rooms.get("join") or {}).values()
            for event in (room.get("timeline") or {}).get("events") or []
            if "event_id" in event
        }
        await self.matrix.handle(rooms, since=since)

    async def handled(self, next_batch: str, /) -> None:
        await self.matrix.handled(next_batch)
        async with self.changed:
            self.batches += 1
            self.saved |= self._batch
            self.changed.notify_all()

    async def wait_saved(self, *event_ids: str) -> None:
        """Until the batches carrying ``event_ids`` were handled and their position saved
        (a stop before that reads them again, which the test of a restart must not race)."""
        async with asyncio.timeout(WAIT), self.changed:
            await self.changed.wait_for(lambda: set(event_ids) <= self.saved)

    @property
    def channel(self) -> str:
        return self.matrix.channel

    @property
    def account_id(self) -> str:
        return self.matrix.account_id

    async def fetch_file(self, file: FileRef, /) -> bytes:
        return await self.matrix.fetch_file(file)

    async def acknowledge(self, message: InboxMessage, outcome: Outcome, /) -> None:
        await self.matrix.acknowledge(message, outcome)
        async with self.changed:
            self.shown.append((message.item_id, outcome.kind))
            self.changed.notify_all()

    async def wait_for(self, *item_ids: str) -> None:
        """Until an outcome was shown for each of ``item_ids``."""
        async with asyncio.timeout(WAIT), self.changed:
            await self.changed.wait_for(lambda: set(item_ids) <= {item for item, _ in self.shown})

    async def wait_batches(self, count: int) -> None:
        """Until ``count`` sync batches were handled and their position saved."""
        async with asyncio.timeout(WAIT), self.changed:
            await self.changed.wait_for(lambda: self.batches >= count)


@dataclass
class Bot:
    """The store, the inbox and the runtime behind a Matrix account, kept across restarts."""

    synapse: Synapse
    user: MatrixUser
    database: Database
    inbox: Inbox
    bindings: SessionBindingService
    runtime: SessionRuntime
    provider: ScriptedProvider

    async def said(self) -> list[tuple[str, str | None]]:
        """(text, inbound id) of every user message in the session's log, in order."""
        agent = await self.runtime.get(SESSION)
        await asyncio.wait_for(agent.wait_idle(), WAIT)
        return [
            (e.payload["text"], e.payload.get("inbound_id"))
            for e in agent.tree.events
            if e.type == "user_message"
        ]

    @asynccontextmanager
    async def running(self, *, timeline_limit: int = 50) -> AsyncIterator[Watched]:
        """The account syncing into the inbox until the block ends (the bot stops)."""
        async with aiohttp.ClientSession() as http:
            connection = MatrixConnection.from_config(
                matrix_config(self.synapse, self.user),
                "default",
                session=http,
                timeline_limit=timeline_limit,
            )
            shown = Watched(MatrixInbox("default", connection.client, self.inbox, self.bindings))
            connection.handler = shown
            self.inbox.channels.register(shown, replace=True)
            task = asyncio.create_task(connection.run())
            try:
                yield shown
            finally:
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task


@pytest.fixture
async def bot(synapse: Synapse, tmp_path: Path) -> AsyncIterator[Bot]:
    async with store_factory("sqlite", tmp_path) as open_store:
        database = await open_store()
        clock = FakeClock()
        bindings = SessionBindingService(database, clock=clock)
        await bindings.start()
        provider = ScriptedProvider(lambda _messages: Step(text="ok"))

        def build(tree, log, on_crash):  # type: ignore[no-untyped-def]
            return Agent(tree, log, provider, ToolRegistry([]), on_crash=on_crash)

        runtime = SessionRuntime(SessionLog(database), build, clock=clock)
        inbox = Inbox(
            database,
            InboundRouter(bindings, runtime),
            bindings,
            attachments=AttachmentStore(tmp_path / "attachments"),
            text_max_bytes=10_000,
            clock=clock,
        )
        user = synapse.register(f"tb-inbox-bot-{next(_people)}")
        yield Bot(synapse, user, database, inbox, bindings, runtime, provider)


@pytest.fixture
async def person(synapse: Synapse) -> AsyncIterator[Client]:
    async with matrix_client(synapse, synapse.register(f"person-{next(_people)}")) as client:
        yield client


async def bound_thread(bot: Bot, person: Client) -> tuple[RoomID, EventID]:
    """A room with the bot in it and a thread there bound to the session: (room, root)."""
    room_id = await person.create_room(invitees=[bot.user.user_id])
    async with matrix_client(bot.synapse, bot.user) as bot_client:
        await bot_client.join_room_by_id(room_id)
    root = await person.send_text(room_id, "🧵 **Scout** — look into the logs")
    await bot.bindings.bind(SESSION, "session", thread_of("default", room_id, root), scope=room_id)
    return room_id, root


async def write(person: Client, room_id: RoomID, root: EventID, text: str) -> EventID:
    """``text`` in the thread on ``root``, as a person's client writes it."""
    content: Mapping[str, Any] = {
        "msgtype": "m.text",
        "body": text,
        "m.relates_to": {"rel_type": "m.thread", "event_id": root, "is_falling_back": True},
    }
    return await person.send_message(room_id, TextMessageEventContent.deserialize(dict(content)))


async def reactions_on(person: Client, room_id: RoomID, event_id: EventID) -> list[str]:
    """The annotations on ``event_id`` that the person's client sees."""
    page = await person.get_messages(room_id, PaginationDirection.BACKWARD, limit=100)
    return [
        e.content.relates_to.key
        for e in page.events
        if str(e.type) == "m.reaction" and e.content.relates_to.event_id == event_id
    ]


class TestWhileDown:
    async def test_messages_written_while_down_are_read_once_in_order(
        self, bot: Bot, person: Client
    ) -> None:
        """Stopped, restarted with a gap wider than one sync: every message reaches the
        session once, in the order written; a restart from an older position adds nothing."""
        room_id, root = await bound_thread(bot, person)
        async with bot.running() as shown:
            first = await write(person, room_id, root, "one")
            await shown.wait_for(first)
            await shown.wait_saved(first)
        assert await bot.said() == [("one", first)]
        assert await reactions_on(person, room_id, first) == ["▶️"]
        before_downtime = await bot.inbox.position("matrix", "default")
        assert before_downtime is not None

        written = [await write(person, room_id, root, t) for t in ("two", "three", "four", "five")]
        with capture_logs() as logs:
            async with bot.running(timeline_limit=2) as shown:  # more than one sync carries
                await shown.wait_for(*written)
        assert [e["event"] for e in logs if e["event"] == "matrix.gap_read"] == ["matrix.gap_read"]
        said = await bot.said()
        assert said == [
            ("one", first),
            *zip(["two", "three", "four", "five"], written, strict=True),
        ]

        await bot.inbox.save_position("matrix", "default", before_downtime)
        async with bot.running() as shown:  # the homeserver hands the same events again
            await shown.wait_batches(1)
        assert await bot.inbox.position("matrix", "default") != before_downtime
        # nothing acted on: the inbox knew every one (one the stop cut off before it was
        # marked done is found in the session's log: a duplicate, not a second turn)
        assert {kind for _, kind in shown.shown} <= {"duplicate"}
        assert await bot.said() == said


class TestFiles:
    async def test_a_file_in_the_thread_reaches_the_agent(self, bot: Bot, person: Client) -> None:
        """A file a person sends is downloaded through the homeserver's media API, its
        caption as the words."""
        room_id, root = await bound_thread(bot, person)
        data = b"line one of the notes\n"
        url = await person.upload_media(data, mime_type="text/plain", filename="notes.txt")
        content = {
            "msgtype": "m.file",
            "body": "have a look",
            "filename": "notes.txt",
            "url": url,
            "info": {"size": len(data), "mimetype": "text/plain"},
            "m.relates_to": {"rel_type": "m.thread", "event_id": root, "is_falling_back": True},
        }
        async with bot.running() as shown:
            sent = await person.send_message_event(room_id, EventType.ROOM_MESSAGE, Obj(**content))
            await shown.wait_for(sent)
        await bot.said()
        prompt = bot.provider.calls[-1][-1].content or ""
        assert prompt.startswith("have a look")
        assert '<attachment name="notes.txt">' in prompt
        assert "line one of the notes" in prompt
