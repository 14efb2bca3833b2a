"""A streamed answer in a thread on a real Synapse, as a person's client reads it."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from mautrix.client import Client
from mautrix.types import PaginationDirection, RoomID

from adapters.matrix.sending import MatrixSender
from adapters.matrix.streaming import MatrixStream
from core.text import split_message
from tests.matrix.bots import WAIT, a_person, send
from tests.matrix.synapse import Synapse, matrix_client


async def room_events(person: Client, room_id: RoomID) -> list[Mapping[str, Any]]:
    page = await person.get_messages(room_id, PaginationDirection.BACKWARD, limit=200)
    return [event.serialize() for event in reversed(page.events)]


def relation(event: Mapping[str, Any]) -> Mapping[str, Any]:
    return (event.get("content") or {}).get("m.relates_to") or {}


class TestMatrixStream:
    async def test_an_answer_is_posted_then_edited_and_lands_whole(self, synapse: Synapse) -> None:
        """The first words post a message in the thread under the persona's name; later
        ones are m.replace edits of it; the last edit shows the final text whole."""
        bot = synapse.register("tb-stream-bot")
        async with a_person(synapse) as person, matrix_client(synapse, bot) as bot_client:
            room_id = await person.create_room(invitees=[bot.user_id])
            await bot_client.join_room_by_id(room_id)
            root = await send(person, room_id, "🧵 the root")
            stream = MatrixStream(
                MatrixSender(bot_client), room_id, root, key="s1", name="Scout", min_interval=0.2
            )
            async with asyncio.timeout(WAIT):
                stream.append("Hello")
                await stream.flush()
                stream.append(", world")
                await stream.flush()
                stream.append(". Done.")
                ids = await stream.close()
            events = await room_events(person, room_id)
        assert len(ids) == 1
        first = next(e for e in events if e["event_id"] == ids[0])
        assert first["content"]["body"] == "**Scout**\nHello"
        assert relation(first)["rel_type"] == "m.thread"
        assert relation(first)["event_id"] == root
        edits = [e for e in events if relation(e).get("rel_type") == "m.replace"]
        assert [relation(e)["event_id"] for e in edits] == [ids[0], ids[0]]
        assert edits[-1]["content"]["m.new_content"]["body"] == "**Scout**\nHello, world. Done."
        assert "<strong>Scout</strong>" in edits[-1]["content"]["m.new_content"]["formatted_body"]

    async def test_a_long_answer_is_split_into_messages_each_whole(self, synapse: Synapse) -> None:
        """An answer over the part limit continues in a second message in the thread; the
        messages together hold the whole text, in order."""
        bot = synapse.register("tb-stream-long")
        words = [f"word{i}" for i in range(400)]
        async with a_person(synapse) as person, matrix_client(synapse, bot) as bot_client:
            room_id = await person.create_room(invitees=[bot.user_id])
            await bot_client.join_room_by_id(room_id)
            root = await send(person, room_id, "🧵 the root")
            stream = MatrixStream(
                MatrixSender(bot_client), room_id, root, key="s2", limit=1_000, min_interval=0.2
            )
            async with asyncio.timeout(WAIT):
                stream.append(" ".join(words))
                ids = await stream.close()
            events = {e["event_id"]: e for e in await room_events(person, room_id)}
        assert len(ids) == len(split_message(" ".join(words), 1_000)) > 1
        bodies = [events[i]["content"]["body"] for i in ids]
        assert all(len(b) <= 1_000 for b in bodies)
        assert " ".join(bodies).split() == words
        assert all(relation(events[i])["event_id"] == root for i in ids)
