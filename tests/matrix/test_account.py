"""adapters.matrix.account against a real Synapse: one Matrix account plugged into the services.

The bot is the harness's (:mod:`tests.matrix.bots`): the real services with a scripted
model, its account built as the app builds it. What the bot showed is read with the
person's own client, as they would see it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from mautrix.client import Client
from mautrix.types import PaginationDirection, RoomID, SyncToken

from adapters.matrix.encrypted import ENCRYPTED_TEXT
from adapters.matrix.ids import room_of, thread_of
from adapters.matrix.streaming import message_content
from adapters.matrix.transcript import MatrixTranscriptSink, owed_content
from core.bindings.records import BindingMetadata, BindingPersona
from core.providers.scripted import ScriptedProvider, Step
from core.subagents.service import SpawnRequest
from core.transcript import SentPart, ThreadMessage
from tests.matrix.bots import Bot, a_person, position_of, room_with, send, services_bot
from tests.matrix.synapse import Synapse, matrix_client

WAIT = 60.0
ANSWER = "The web tier is fine; the database is slow."

Found = list[Mapping[str, Any]]


@pytest.fixture
async def person(synapse: Synapse) -> AsyncIterator[Client]:
    async with a_person(synapse) as client:
        yield client


def relation(event: Mapping[str, Any]) -> Mapping[str, Any]:
    return (event.get("content") or {}).get("m.relates_to") or {}


def body(event: Mapping[str, Any]) -> str:
    return str((event.get("content") or {}).get("body") or "")


async def bot_events_until(
    person: Client, room_id: RoomID, bot: Bot, done: Callable[[Found], bool]
) -> Found:
    """The bot's messages in the room (edits included), oldest first, as the person's
    client reads them, once ``done(events)`` holds."""
    since: SyncToken | None = None
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


async def until_synced(bot: Bot, since: str, event_id: str) -> None:
    """Long-poll the bot account's own ``/sync`` from ``since`` until ``event_id`` is in
    it: from then on a sync from ``since`` carries it (the bot's position is not moved)."""
    async with matrix_client(bot.synapse, bot.user) as client, asyncio.timeout(WAIT):
        while True:
            data = await client.sync(since=SyncToken(since), timeout=5_000)
            rooms = (data.get("rooms") or {}).get("join") or {}
            seen = {
                e.get("event_id")
                for room in rooms.values()
                for e in (room.get("timeline") or {}).get("events") or ()
            }
            if event_id in seen:
                return


class TestSpawn:
    async def test_a_spawn_answers_in_its_thread_and_is_announced_once_under_the_root(
        self, synapse: Synapse, tmp_path: Path, person: Client
    ) -> None:
        """A spawn asked in a room opens a thread on a root naming the task; the agent's
        answer is in the thread; the completion is announced once in the room's main
        timeline, as a reply to the root, after the answer."""
        provider = ScriptedProvider(lambda _messages: Step(text=ANSWER))
        flags = {"spawnSubagentSessions": True}
        async with services_bot(synapse, tmp_path, provider=provider, thread_bindings=flags) as bot:
            room_id = await room_with(bot, person)
            async with bot.running() as watched:
                await watched.wait_batches(1)
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
                events = await bot_events_until(
                    person,
                    room_id,
                    bot,
                    lambda found: any("no longer bound" in body(e) for e in found),
                )
        roots = [e for e in events if e["event_id"] == root]
        assert len(roots) == 1
        assert body(roots[0]).startswith("🧵 **")
        assert body(roots[0]).endswith(" — check the service")
        in_thread = [e for e in events if relation(e).get("rel_type") == "m.thread"]
        assert all(relation(e)["event_id"] == root for e in in_thread)
        answers = [e for e in in_thread if ANSWER in body(e)]
        assert answers
        announced = [
            e
            for e in events
            if relation(e).get("m.in_reply_to", {}).get("event_id") == root
            and relation(e).get("rel_type") is None
        ]
        assert len(announced) == 1
        assert body(announced[0]) == "✅ **Subagent** completed its task."
        order = [e["event_id"] for e in events]
        assert order.index(answers[0]["event_id"]) < order.index(announced[0]["event_id"])


class TestReplySpawn:
    async def test_with_threads_off_the_answer_is_posted_in_the_room_once(
        self, synapse: Synapse, tmp_path: Path, person: Client
    ) -> None:
        """spawnSubagentSessions off (the default): a spawn is a reply; no thread is
        opened, and the answer alone is posted in the room where it was asked, once."""
        provider = ScriptedProvider(lambda _messages: Step(text=ANSWER))
        async with services_bot(synapse, tmp_path, provider=provider) as bot:
            room_id = await room_with(bot, person)
            async with bot.running() as watched:
                await watched.wait_batches(1)
                request = bot.services.subagents.request_for(
                    room_of("default", room_id),
                    task="check the service",
                    agent=None,
                    mode="run",
                    requested_by=str(person.mxid),
                    scope=room_id,
                )
                assert not request.thread
                spawned = await bot.services.subagents.spawn(request)
                assert spawned.binding is None
                await bot.services.subagents.wait_settled()
                events = await bot_events_until(
                    person, room_id, bot, lambda found: any(ANSWER in body(e) for e in found)
                )
                await bot.services.subagents.wait_settled()  # the outbox has nothing left
                events = await bot_events_until(person, room_id, bot, bool)
        answers = [e for e in events if ANSWER in body(e)]
        assert len(answers) == 1
        assert "m.thread" not in str(relation(answers[0]))
        assert not any(body(e).startswith("🧵") for e in events)


class TestOffline:
    async def test_messages_written_while_down_are_said_once_then_go_to_the_agent(
        self, synapse: Synapse, tmp_path: Path, person: Client
    ) -> None:
        """A restart reads what was written in a bound thread while the bot was down,
        says so once in the thread with Discord's words, and hands both messages over in
        order; the same events handed again say nothing more."""
        async with services_bot(synapse, tmp_path) as bot:
            room_id = await room_with(bot, person)
            root = await send(person, room_id, "🧵 the work")
            await bot.services.bindings.bind(
                "agent:matrix-offline",
                "session",
                thread_of("default", room_id, root),
                metadata=BindingMetadata(persona=BindingPersona(name="Scout")),
                scope=room_id,
            )
            async with bot.running() as watched:
                await watched.wait_batches(1)
            before = await bot.services.inbox.position("matrix", "default")
            assert before is not None
            await send(person, room_id, "first while down", thread=root)
            second = await send(person, room_id, "second while down", thread=root)
            await until_synced(bot, before, second)  # the homeserver hands both out now
            # the long-poll the stopped bot left in flight from the same position may
            # still be cached by the homeserver, holding only "first": the restarted
            # bot's sync must not be answered from it
            async with bot.running():
                events = await bot_events_until(
                    person,
                    room_id,
                    bot,
                    lambda found: any(body(e) == "**Scout**\nok" for e in found),
                )
            notices = [e for e in events if "While the bot was offline" in body(e)]
            assert len(notices) == 1
            assert body(notices[0]).startswith(
                "📬 While the bot was offline, 2 messages were written here (from https://matrix.to/#/"
            )
            assert "they go to **Scout** now, in the order written." in body(notices[0])
            assert relation(notices[0])["event_id"] == root
            order = [e["event_id"] for e in events]
            answer = next(e for e in events if body(e) == "**Scout**\nok")
            assert order.index(notices[0]["event_id"]) < order.index(answer["event_id"])
            prompt = "\n".join(str(m.content or "") for m in bot.provider.calls[-1])
            assert prompt.index("first while down") < prompt.index("second while down")

            await bot.services.inbox.save_position("matrix", "default", before)
            async with bot.running() as watched:  # the same events, handed again
                await watched.wait_batches(1)
            events = await bot_events_until(person, room_id, bot, bool)
            assert len([e for e in events if "While the bot was offline" in body(e)]) == 1


class TestEncrypted:
    async def test_an_encrypted_room_is_told_once_across_restarts(
        self, synapse: Synapse, tmp_path: Path, person: Client
    ) -> None:
        """The bot joins an encrypted room, says once that it cannot read it, and a
        restart that sees the room's encryption again says nothing more."""
        async with services_bot(synapse, tmp_path) as bot:
            early = await position_of(bot)
            room_id = await person.create_room(
                invitees=[bot.user.user_id],
                initial_state=[
                    {
                        "type": "m.room.encryption",
                        "state_key": "",
                        "content": {"algorithm": "m.megolm.v1.aes-sha2"},
                    }
                ],
            )
            async with matrix_client(bot.synapse, bot.user) as bot_client:
                await bot_client.join_room_by_id(room_id)
            async with bot.running() as watched:
                await watched.wait_batches(1)
                events = await bot_events_until(person, room_id, bot, bool)
            assert [body(e) for e in events] == [ENCRYPTED_TEXT]
            assert events[0]["content"]["msgtype"] == "m.notice"
            await bot.services.inbox.save_position("matrix", "default", early)
            async with bot.running() as watched:  # the room's state comes again
                await watched.wait_batches(1)
            assert bot.account is not None
            assert room_id in bot.account.encrypted.told
            events = await bot_events_until(person, room_id, bot, bool)
            assert [body(e) for e in events] == [ENCRYPTED_TEXT]


class TestTranscript:
    async def test_an_owed_message_is_finished_once_whoever_settles_it(
        self, synapse: Synapse, tmp_path: Path, person: Client
    ) -> None:
        """A message a dead process left cut (its part shows the start) is edited to show
        it whole; one it never recorded as sent is posted once: settling again finds it
        in the thread and changes nothing."""
        async with services_bot(synapse, tmp_path) as bot:
            room_id = await room_with(bot, person)
            root = await send(person, room_id, "🧵 the work")
            binding = await bot.services.bindings.bind(
                "agent:matrix-owed",
                "session",
                thread_of("default", room_id, root),
                metadata=BindingMetadata(persona=BindingPersona(name="Scout")),
                scope=room_id,
            )
            async with bot.running() as watched:
                await watched.wait_batches(1)
                assert bot.account is not None
                cut = message_content("The web tier", name="Scout")
                cut["m.relates_to"] = {"rel_type": "m.thread", "event_id": root}
                shown = await bot.account.sender.send(room_id, cut, txn="cut-part")
                owed = ThreadMessage(
                    key="cut",
                    binding_id=binding.binding_id,
                    session_key=binding.target_session_key,
                    turn_id=None,
                    content=owed_content(ANSWER),
                    sent=(SentPart(shown, "bot"),),
                )
                await bot.services.transcript.owe(owed)
                assert await bot.services.transcript.settle_owed() == 1
                never = ThreadMessage(
                    key="never",
                    binding_id=binding.binding_id,
                    session_key=binding.target_session_key,
                    turn_id=None,
                    content=owed_content("Second thoughts: the cache."),
                )
                sink = MatrixTranscriptSink(
                    bot.account.connection.client, bot.account.sender, bot.account.completions
                )
                first = await sink.settle(binding, never)
                again = await sink.settle(binding, never)
                assert first is not None
                assert again is not None
                assert again.sent == first.sent
                events = await bot_events_until(
                    person,
                    room_id,
                    bot,
                    lambda found: any(
                        (e["content"].get("m.new_content") or {}).get("body")
                        == f"**Scout**\n{ANSWER}"
                        for e in found
                    ),
                )
        edits = [e for e in events if relation(e).get("rel_type") == "m.replace"]
        assert [relation(e)["event_id"] for e in edits] == [shown]
        posted = [e for e in events if body(e) == "**Scout**\nSecond thoughts: the cache."]
        assert [e["event_id"] for e in posted] == [first.sent[0].message_id]
