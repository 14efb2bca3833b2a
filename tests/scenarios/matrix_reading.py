"""What people in a Matrix room do and see: shared by the bot in this process and the
bot as a process of its own.

The owner and someone else are people with mautrix clients of their own, in one room
the owner made (so the owner is its administrator) with the bot invited. They act as
a person's client lets them: messages (a thread's are ``m.thread`` on its root),
``!`` commands answered by a reply, reactions. What they see is read with the owner's
client, the way it renders a room: a thread's messages, each at its last
``m.replace`` edit, the persona's name the bold first line of the agent's messages,
an announcement a reply to the thread's root.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar
from urllib.parse import unquote

from mautrix.client import Client
from mautrix.types import PaginationDirection, RoomID

from tests.matrix.bots import replies_to, send
from tests.scenarios.platform import ANNOUNCED, WAIT, Person, Said, Shown, Thread

__all__ = ["AGENT", "MatrixReading", "relation"]

AGENT: Final = "scout"
"""The one agent profile every scenario's sessions run as (its persona: ``PERSONA``)."""
STARTED: Final = re.compile(
    r"Started \*\*[^*]+\*\* in its thread: https://matrix\.to/#/(?P<room>[^/]+)/(?P<root>\S+)"
)
"""``!agents spawn``'s answer when the subagent got a thread of its own."""

Event = Mapping[str, Any]
T = TypeVar("T")


def relation(event: Event) -> Mapping[str, Any]:
    return (event.get("content") or {}).get("m.relates_to") or {}


class MatrixReading:
    """The room's people, and what they read in it."""

    owner: Client
    other: Client
    bot_id: str
    """The bot account's Matrix user id."""
    room: RoomID | None = None

    def person(self, by: Person) -> Client:
        return self.owner if by == "owner" else self.other

    async def open_room(self) -> RoomID:
        """The owner makes the room (its administrator), inviting the bot and the other
        person, who joins; the bot joins it on its own."""
        room = await self.owner.create_room(invitees=[self.bot_id, self.other.mxid])
        await self.other.join_room_by_id(room)
        self.room = room
        return room

    async def typed(self, text: str, *, thread: Thread | None = None, by: Person = "owner") -> str:
        """A person types ``text`` (a command) in the room or a thread; the bot's answer,
        the one reply to it."""
        assert self.room is not None, "the scenario has not started the bot"
        person = self.person(by)
        room = RoomID(thread.room) if thread is not None else self.room
        asked = await send(person, room, text, thread=thread.id if thread else None)
        (answer,) = await replies_to(person, room, asked)
        return str(answer["content"]["body"])

    async def spawn(self, task: str, *, mode: str = "session") -> Thread:
        """``!agents spawn`` in the room; the thread its answer links to."""
        assert '"' not in task, "a task is typed quoted"
        answer = await self.typed(f'!agents spawn task:"{task}" agent:{AGENT} mode:{mode}')
        found = STARTED.fullmatch(answer)
        assert found is not None, answer
        return Thread(unquote(found["root"]), unquote(found["room"]))

    async def say(self, thread: Thread, text: str, *, by: Person = "owner") -> Said:
        event_id = await send(self.person(by), RoomID(thread.room), text, thread=thread.id)
        return Said(str(event_id), thread, text)

    async def marks(self, said: Said) -> list[str]:
        def found(events: list[Event]) -> list[str] | None:
            keys = [
                relation(e)["key"]
                for e in events
                if e["type"] == "m.reaction"
                and e["sender"] == self.bot_id
                and relation(e).get("event_id") == said.id
            ]
            return keys or None

        return await self.until(RoomID(said.thread.room), found)

    async def read(self, thread: Thread) -> list[Shown]:
        return self.rendered(thread, await self.events(RoomID(thread.room)))

    async def read_until(self, thread: Thread, done: Callable[[list[Shown]], bool]) -> list[Shown]:
        def found(events: list[Event]) -> list[Shown] | None:
            shown = self.rendered(thread, events)
            return shown if done(shown) else None

        return await self.until(RoomID(thread.room), found)

    async def announcements(self, thread: Thread) -> list[str]:
        return self.announced(thread, await self.events(RoomID(thread.room)))

    def announced(self, thread: Thread, events: list[Event]) -> list[str]:
        """The bot's replies to the thread's root that announce an end."""
        return [
            str(e["content"].get("body"))
            for e in events
            if e["sender"] == self.bot_id
            and (relation(e).get("m.in_reply_to") or {}).get("event_id") == thread.id
            and any(mark in str(e["content"].get("body")) for mark in ANNOUNCED)
        ]

    def rendered(self, thread: Thread, events: list[Event]) -> list[Shown]:
        """The thread's messages, oldest first, each at its last edit."""
        latest = last_edits(events)
        return [
            self._shown(event, latest.get(event["event_id"], str(event["content"].get("body"))))
            for event in events
            if event["type"] == "m.room.message"
            and relation(event).get("rel_type") == "m.thread"
            and relation(event).get("event_id") == thread.id
        ]

    def _shown(self, event: Event, body: str) -> Shown:
        sender = event["sender"]
        if sender == self.bot_id:
            name, _, text = body.partition("\n")
            if name.startswith("**") and name.endswith("**") and len(name) > 4:
                return Shown(name[2:-2], text)
            return Shown("bot", body)
        return Shown("owner" if sender == self.owner.mxid else "other", body)

    async def events(self, room_id: RoomID) -> list[Event]:
        """The room's events, oldest first, as the owner's client reads them."""
        page = await self.owner.get_messages(room_id, PaginationDirection.BACKWARD, limit=500)
        # a NamedTuple of keyword form, which mypy does not read: its fields are unknown
        events: list[Any] = page.events  # type: ignore[attr-defined]
        return [e.serialize() for e in reversed(events)]

    async def until(self, room_id: RoomID, found: Callable[[list[Event]], T | None]) -> T:
        """``found(events)`` once it is not None, with a long-poll of the owner's
        ``/sync`` between looks."""
        since = None
        async with asyncio.timeout(WAIT):
            while True:
                result = found(await self.events(room_id))
                if result is not None:
                    return result
                since = (await self.owner.sync(since=since, timeout=5_000))["next_batch"]


def last_edits(events: list[Event]) -> dict[str, str]:
    """Each edited message's body at its last ``m.replace``, by the edited event's id."""
    latest: dict[str, str] = {}
    for event in events:
        if event["type"] == "m.room.message" and relation(event).get("rel_type") == "m.replace":
            new = event["content"].get("m.new_content") or {}
            latest[relation(event)["event_id"]] = str(new.get("body"))
    return latest
