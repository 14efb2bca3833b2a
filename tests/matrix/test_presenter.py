"""adapters.matrix.presenter against a real Synapse: a session's answer shows in its thread.

The bot runs the real services with the scripted model; a person writes in a thread
bound to a session, and reads the answer with their own client: the first words as a
message in the thread, the rest as ``m.replace`` edits of it, the last one whole.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from mautrix.client import Client
from mautrix.types import PaginationDirection, RoomID

from adapters.matrix.ids import thread_of
from adapters.matrix.presenter import ThreadPresenter
from core.agent.events import FileShown, TextDelta, TurnCancelled, TurnInterrupted
from core.agent.shown import CUT_OFF
from core.bindings.records import BindingMetadata, BindingPersona
from core.clock import SystemClock
from core.providers.scripted import ScriptedProvider, Step, split_text
from tests.matrix.bots import WAIT, Bot, a_person, room_with, send, services_bot
from tests.matrix.synapse import Synapse

SESSION = "agent:matrix-presenter"
ANSWER = "The web tier is fine; the database answers slowly under load. Look at its indexes."


@pytest.fixture
async def person(synapse: Synapse) -> AsyncIterator[Client]:
    async with a_person(synapse) as client:
        yield client


def relation(event: Mapping[str, Any]) -> Mapping[str, Any]:
    return (event.get("content") or {}).get("m.relates_to") or {}


async def bot_events_until(
    person: Client, room_id: RoomID, bot: Bot, done: Any, *, notices: bool = False
) -> list[Mapping[str, Any]]:
    """The bot's messages in the room, oldest first, as the person's client reads them, once
    ``done(events)`` holds (a long-poll of the person's ``/sync`` between looks). Its
    notices (a thread's intro) are the bot speaking, not the agent: left out unless
    ``notices``."""
    since = None
    async with asyncio.timeout(WAIT):
        while True:
            page = await person.get_messages(room_id, PaginationDirection.BACKWARD, limit=200)
            events = [
                e.serialize()
                for e in reversed(page.events)
                if str(e.sender) == bot.user.user_id and str(e.type) == "m.room.message"
            ]
            if not notices:
                events = [e for e in events if e["content"].get("msgtype") != "m.notice"]
            if done(events):
                return events
            since = (await person.sync(since=since, timeout=5_000))["next_batch"]


class TestPresenter:
    async def test_an_answer_shows_in_the_thread_posted_then_edited_whole(
        self, synapse: Synapse, tmp_path: Path, person: Client
    ) -> None:
        """The model's first words post a message in the bound thread under the persona's
        name; the rest arrive as edits of it, the last holding the whole answer."""
        gate = asyncio.Event()
        provider = ScriptedProvider([Step(text=ANSWER, chunks=3, gate=gate)])
        first_words = split_text(ANSWER, 3)[0]
        async with services_bot(synapse, tmp_path, provider=provider) as bot:
            room_id = await room_with(bot, person)
            root = await send(person, room_id, "🧵 the work")
            async with bot.running() as watched:
                await watched.wait_batches(1)
                await bot.services.bindings.bind(
                    SESSION,
                    "session",
                    thread_of("default", room_id, root),
                    metadata=BindingMetadata(persona=BindingPersona(name="Scout")),
                    scope=room_id,
                )
                await send(person, room_id, "how is the service doing?", thread=root)
                posted = await bot_events_until(person, room_id, bot, bool)
                gate.set()  # the model says the rest
                whole = f"**Scout**\n{ANSWER}"
                events = await bot_events_until(
                    person,
                    room_id,
                    bot,
                    lambda found: any(
                        (e["content"].get("m.new_content") or {}).get("body") == whole
                        for e in found
                    ),
                )
        assert len(posted) == 1
        first = posted[0]
        assert first["content"]["body"] == f"**Scout**\n{first_words}"
        assert relation(first)["rel_type"] == "m.thread"
        assert relation(first)["event_id"] == root
        messages = [e for e in events if relation(e).get("rel_type") != "m.replace"]
        assert [e["event_id"] for e in messages] == [first["event_id"]]
        edits = [e for e in events if relation(e).get("rel_type") == "m.replace"]
        assert edits
        assert all(relation(e)["event_id"] == first["event_id"] for e in edits)
        assert edits[-1]["content"]["m.new_content"]["body"] == whole


class TestWhatATurnShows:
    async def test_a_cut_a_file_and_an_interruption_show_as_on_discord(
        self, synapse: Synapse, tmp_path: Path, person: Client
    ) -> None:
        """Words a cancel cut off carry the mark naming who; a file the agent shows is
        uploaded into the thread (its caption above it, its bytes downloadable); a turn a
        crash cut off is told by the bot in a notice; each in order."""
        async with services_bot(synapse, tmp_path) as bot:
            room_id = await room_with(bot, person)
            root = await send(person, room_id, "🧵 the work")
            async with bot.running() as watched:
                await watched.wait_batches(1)
                record = await bot.services.bindings.bind(
                    SESSION,
                    "session",
                    thread_of("default", room_id, root),
                    metadata=BindingMetadata(persona=BindingPersona(name="Scout")),
                    scope=room_id,
                )
                assert bot.account is not None
                presenter = ThreadPresenter(
                    bot.account.sender, record, clock=SystemClock(), min_edit_interval=0.1
                )
                for event in (
                    TextDelta(SESSION, "t1", 0, "Half an answ"),
                    TurnCancelled(SESSION, "t1", by_user_id="1", by_name="alice"),
                    FileShown(SESSION, "t2", "change.diff", b"+ one line\n", "📎 The diff"),
                    TurnInterrupted(SESSION, "t2", stopping=False),
                ):
                    presenter.on_event(event)
                await presenter.drain()
                events = await bot_events_until(
                    person, room_id, bot, lambda found: len(found) >= 4, notices=True
                )
        said = [e for e in events if relation(e).get("rel_type") != "m.replace"]
        last = {
            relation(e)["event_id"]: e["content"]["m.new_content"]["body"]
            for e in events
            if relation(e).get("rel_type") == "m.replace"
        }
        shown = [last.get(e["event_id"], e["content"]["body"]) for e in said]
        cut = CUT_OFF.format(why="cancelled by @alice")
        assert shown[-4] == f"**Scout**\nHalf an answ\n\n{cut}"
        assert shown[-3] == "📎 The diff"
        file = said[-2]["content"]
        assert file["msgtype"] == "m.file"
        assert file["body"] == "change.diff"
        assert await person.download_media(file["url"]) == b"+ one line\n"
        assert shown[-1].startswith("⚠️ The bot stopped unexpectedly while **Scout** was working")
        assert all(relation(e).get("event_id") == root for e in said)
