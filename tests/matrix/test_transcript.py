"""A Matrix answer a dead process left cut is finished by the next one, against a real Synapse.

A subagent's answer streams into its thread; the model finishes, the presenter records
the final text as owed, and the process goes before the homeserver has the final edit
(its sends from then on fail, as they do once the connection is gone, and nothing it
still had to send is sent). A new bot over the same store and account starts: the
person's client reads the whole answer once, in the message that was cut (no second
copy), before the task's announcement under the thread's root.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from mautrix.client import Client
from mautrix.types import PaginationDirection, RoomID

from adapters.matrix.ids import room_of
from adapters.matrix.sending import MatrixSender
from core.bindings.records import SessionBindingRecord
from core.errors import DeliveryError
from core.providers.scripted import ScriptedProvider, Step
from core.subagents.delivery import Posted
from core.subagents.service import SpawnRequest
from core.transcript import ThreadMessage, Transcript
from tests.matrix.bots import WAIT, Bot, a_person, room_with, services_bot
from tests.matrix.synapse import Synapse

FIRST = "The web tier is fine. "
ANSWER = FIRST + "The database answers slowly under load; look at its indexes first."
LONG = "x" * 1_800
LONG_ANSWER = f"{FIRST}{LONG}\n\n{LONG} and the last words."
"""Over one Matrix message's 3,000 characters: the answer takes two."""
ANNOUNCED = "completed its task."

Found = list[Mapping[str, Any]]


@pytest.fixture
async def person(synapse: Synapse) -> AsyncIterator[Client]:
    async with a_person(synapse) as client:
        yield client


class Dying:
    """The bot's sends while its process goes: from :meth:`hold` on, its edits (and, with
    ``posts_land``, its posts once the homeserver took them) wait for the end; once
    :meth:`die` is called, every send fails as it does when the connection is gone."""

    def __init__(self, sender: MatrixSender, *, posts_land: bool = False) -> None:
        self._send = sender.send
        self._posts_land = posts_land
        self._holding = False
        self._dead = asyncio.Event()
        self.held = asyncio.Event()
        """Set once a send waits for the end."""
        sender.send = self.send  # type: ignore[method-assign]

    def hold(self) -> None:
        self._holding = True

    def die(self) -> None:
        self._dead.set()

    async def send(
        self, room_id: str, content: Mapping[str, Any], /, *, txn: str, event_type: str = ""
    ) -> str:
        if self._dead.is_set():
            raise DeliveryError("the connection is gone", path="bot")
        edit = (content.get("m.relates_to") or {}).get("rel_type") == "m.replace"
        if self._holding and edit:
            self.held.set()
            await self._dead.wait()
            raise DeliveryError("the connection is gone", path="bot")
        event_id = await self._send(room_id, content, txn=txn, event_type=event_type)
        if self._holding and self._posts_land:  # made; nobody is left to read its id
            self.held.set()
            await self._dead.wait()
            raise DeliveryError("the connection is gone", path="bot")
        return event_id


def owe_seen(bot: Bot, text: str) -> asyncio.Event:
    """Set once the presenter has recorded ``text`` as owed (a spy on the real method)."""
    seen = asyncio.Event()
    transcript: Transcript = bot.services.transcript
    original = transcript.owe

    async def owe(message: ThreadMessage) -> None:
        await original(message)
        if message.content.get("text") == text:
            seen.set()

    transcript.owe = owe  # type: ignore[method-assign]
    return seen


def announcement_tried(bot: Bot) -> asyncio.Event:
    """Set once the account has tried to post an announcement (a spy on the real method)."""
    tried = asyncio.Event()
    assert bot.account is not None
    completions = bot.account.completions
    original = completions.post_bound

    async def post_bound(binding: SessionBindingRecord, content: str) -> Posted:
        try:
            return await original(binding, content)
        finally:
            tried.set()

    completions.post_bound = post_bound  # type: ignore[method-assign]
    return tried


def relation(event: Mapping[str, Any]) -> Mapping[str, Any]:
    return (event.get("content") or {}).get("m.relates_to") or {}


def is_text(event: Mapping[str, Any]) -> bool:
    return (event.get("content") or {}).get("msgtype") == "m.text"


def body(event: Mapping[str, Any]) -> str:
    return str((event.get("content") or {}).get("body") or "")


def shown_in_thread(events: Found, root: str) -> list[tuple[str, str]]:
    """Each persona message in the thread (edits folded in; the bot's notices left out),
    oldest first, as a client shows it: its id, and the body of its newest edit by its
    sender, else its own."""
    shown: dict[str, tuple[str, str]] = {}
    for event in events:
        in_thread = relation(event).get("rel_type") == "m.thread"
        if in_thread and relation(event)["event_id"] == root and is_text(event):
            shown[event["event_id"]] = (event["sender"], body(event))
    for event in events:
        target = str(relation(event).get("event_id"))
        edit = relation(event).get("rel_type") == "m.replace" and target in shown
        if edit and shown[target][0] == event["sender"]:
            new = event["content"].get("m.new_content") or {}
            shown[target] = (event["sender"], str(new.get("body") or ""))
    return [(event_id, text) for event_id, (_, text) in shown.items()]


async def bot_events_until(
    person: Client, room_id: RoomID, bot: Bot, done: Callable[[Found], bool]
) -> Found:
    """The bot's messages in the room (edits included), oldest first, as the person's
    client reads them, once ``done(events)`` holds."""
    since = None
    async with asyncio.timeout(WAIT):
        while True:
            page = await person.get_messages(room_id, PaginationDirection.BACKWARD, limit=200)
            events = [
                e.serialize()
                for e in reversed(page.events)
                if str(e.sender) == bot.user.user_id and str(e.type) == "m.room.message"
            ]
            if done(events):
                return events
            since = (await person.sync(since=since, timeout=5_000))["next_batch"]


def announced(events: Found, root: str) -> list[Mapping[str, Any]]:
    return [
        e
        for e in events
        if relation(e).get("m.in_reply_to", {}).get("event_id") == root
        and relation(e).get("rel_type") is None
        and ANNOUNCED in body(e)
    ]


async def cut_by_a_death(
    synapse: Synapse, tmp_path: Path, person: Client, answer: str, *, posts_land: bool
) -> tuple[Bot, RoomID, str, str, Found]:
    """A subagent's answer streams; once its final text is recorded owed, the process goes
    with the final edit held (and, with ``posts_land``, a post the homeserver made whose
    id it never learnt). Returns the dead bot, the room, the thread's root, the persona's
    name, and what the thread showed then."""
    gate = asyncio.Event()
    provider = ScriptedProvider(lambda _messages: Step(text=answer, chunks=3, gate=gate))
    flags = {"spawnSubagentSessions": True}
    async with services_bot(synapse, tmp_path, provider=provider, thread_bindings=flags) as bot:
        room_id = await room_with(bot, person)
        seen = owe_seen(bot, answer)
        async with bot.running() as watched:
            await watched.wait_batches(1)
            assert bot.account is not None
            dying = Dying(bot.account.sender, posts_land=posts_land)
            tried = announcement_tried(bot)
            spawned = await bot.services.subagents.spawn(
                SpawnRequest(
                    task="check the service",
                    thread=True,
                    mode="run",
                    requester=room_of("default", room_id),
                    scope=room_id,
                )
            )
            assert spawned.binding is not None
            root = spawned.binding.conversation.conversation_id
            name = spawned.binding.meta.persona.shown_name
            await bot_events_until(
                person, room_id, bot, lambda found: any(FIRST in body(e) for e in found)
            )
            dying.hold()
            gate.set()
            async with asyncio.timeout(WAIT):
                await seen.wait()
                await dying.held.wait()
            dying.die()
            async with asyncio.timeout(WAIT):  # the run ends; its announcement fails
                await tried.wait()
        before = await bot_events_until(person, room_id, bot, bool)
    return bot, room_id, root, name, before


class TestAnAnswerCutByADeath:
    async def test_the_next_process_finishes_it_in_place_before_the_announcement(
        self, synapse: Synapse, tmp_path: Path, person: Client
    ) -> None:
        dead, room_id, root, name, before = await cut_by_a_death(
            synapse, tmp_path, person, ANSWER, posts_land=False
        )
        whole = f"**{name}**\n{ANSWER}"
        cut = shown_in_thread(before, root)
        assert len(cut) == 1
        assert cut[0][1] != whole  # the thread shows the answer cut
        assert not announced(before, root)

        async with (
            services_bot(synapse, tmp_path, user=dead.user) as bot,
            bot.running() as watched,
        ):
            await watched.wait_batches(1)
            events = await bot_events_until(
                person, room_id, bot, lambda found: bool(announced(found, root))
            )
            assert await bot.services.transcript.settle_owed() == 0  # nothing owed now

        assert shown_in_thread(events, root) == [(cut[0][0], whole)]  # once, where it was
        final = next(
            i
            for i, e in enumerate(events)
            if relation(e).get("rel_type") == "m.replace"
            and (e["content"].get("m.new_content") or {}).get("body") == whole
        )
        announcements = announced(events, root)
        assert len(announcements) == 1
        assert final < events.index(announcements[0])

    async def test_a_part_posted_as_the_process_went_is_found_not_posted_twice(
        self, synapse: Synapse, tmp_path: Path, person: Client
    ) -> None:
        """The homeserver made the answer's second message, but the process went before
        it learnt its id: the next process edits the first to its part and keeps the
        second, never posts the part again; a third start changes nothing."""
        dead, room_id, root, name, before = await cut_by_a_death(
            synapse, tmp_path, person, LONG_ANSWER, posts_land=True
        )
        assert len(shown_in_thread(before, root)) == 2  # the second part is there already

        async with (
            services_bot(synapse, tmp_path, user=dead.user) as bot,
            bot.running() as watched,
        ):
            await watched.wait_batches(1)
            async with asyncio.timeout(WAIT):  # the announcement, and the thread let go
                await bot.services.subagents.wait_settled()
            events = await bot_events_until(
                person, room_id, bot, lambda found: bool(announced(found, root))
            )
        shown = shown_in_thread(events, root)
        assert [event_id for event_id, _ in shown] == [e for e, _ in shown_in_thread(before, root)]
        prefix = f"**{name}**\n"
        assert all(text.startswith(prefix) for _, text in shown)
        joined = "".join(text.removeprefix(prefix).strip() for _, text in shown)
        assert joined.replace("\n", "") == LONG_ANSWER.replace("\n", "")
        assert len(announced(events, root)) == 1

        async with (
            services_bot(synapse, tmp_path, user=dead.user) as again,
            again.running() as watched,
        ):
            await watched.wait_batches(1)
            assert await again.services.transcript.settle_owed() == 0
        after = await bot_events_until(person, room_id, again, bool)
        assert [(e["event_id"], body(e)) for e in after] == [
            (e["event_id"], body(e)) for e in events
        ]
