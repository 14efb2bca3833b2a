"""The scenarios' Matrix: the real services on a real Synapse, people as mautrix clients.

The bot is :func:`tests.matrix.bots.services_bot` (the services with the scripted
model, the Matrix inbox, commands and presenters plugged in as the app will); a stop
closes its services, a start after it builds them again over the same store and
account, as a restarted process would. The owner and someone else are people of their own;
what they see is read with the owner's client, the way it renders a room: a thread's
messages (``m.thread`` on its root), each at its last ``m.replace`` edit, the
persona's name the bold first line of the agent's messages.

What the bot cannot do on Matrix yet raises :class:`Missing`: spawning (so a
session's thread is a root the owner writes, bound to a session as the tests of
``tests/matrix`` bind it, until ``!agents spawn`` lands), approvals, scheduling,
commands beyond those :data:`adapters.matrix.commands.DEFINITIONS` knows, and a
``python -m bot`` process to kill.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from mautrix.client import Client
from mautrix.types import EventID, PaginationDirection, RoomID

from adapters.matrix.commands import DEFINITIONS, PREFIX
from adapters.matrix.ids import thread_of
from bot.wiring import build_services
from core.bindings.records import BindingMetadata, BindingPersona
from core.clock import FakeClock
from core.providers.scripted import ScriptedProvider
from tests.matrix.bots import Bot, a_person, replies_to, room_with, send, services_bot
from tests.matrix.synapse import Synapse
from tests.scenarios.platform import (
    ANNOUNCED,
    PERSONA,
    WAIT,
    Answer,
    Missing,
    Model,
    Person,
    Said,
    Shown,
    Thread,
)

ACCOUNT = "default"
_sessions = itertools.count()

Event = Mapping[str, Any]
T = TypeVar("T")


def relation(event: Event) -> Mapping[str, Any]:
    return (event.get("content") or {}).get("m.relates_to") or {}


class MatrixPlatform:
    """The bot's services, running (syncing) between :meth:`start` and :meth:`stop`."""

    name = "matrix"

    def __init__(self, bot: Bot, owner: Client, other: Client, model: Model) -> None:
        self.bot = bot
        self.owner = owner
        self.other = other
        self.model = model
        self._room: RoomID | None = None
        self._running: AsyncExitStack | None = None
        self._stopped = False

    @classmethod
    @asynccontextmanager
    async def running(
        cls, synapse: Synapse, tmp_path: Path, model: Model
    ) -> AsyncIterator[MatrixPlatform]:
        provider = ScriptedProvider(model.step)
        async with (
            services_bot(synapse, tmp_path, provider=provider) as bot,
            a_person(synapse) as owner,
            a_person(synapse) as other,
        ):
            platform = cls(bot, owner, other, model)
            try:
                yield platform
            finally:
                await platform.stop()

    def person(self, by: Person) -> Client:
        return self.owner if by == "owner" else self.other

    async def start(self, answer: Answer | None = None, *, approvals: bool = False) -> None:
        if approvals:
            raise Missing("Matrix approvals by reaction are not there yet")
        if answer is not None:
            self.model.answer = answer
        if self._stopped:  # a restart: services of its own over the same store
            provider = ScriptedProvider(self.model.step)
            services = await build_services(
                self.bot.services.config, clock=FakeClock(), env={}, provider=provider
            )
            self.bot = Bot(self.bot.synapse, self.bot.user, services, provider)
            self._stopped = False
        first_ever = await self.bot.services.inbox.position("matrix", ACCOUNT) is None
        stack = AsyncExitStack()
        watched = await stack.enter_async_context(self.bot.running())
        self._running = stack
        if first_ever:  # its first sync: what came before it is history, not for the bot
            await watched.wait_batches(1)

    async def stop(self) -> None:
        """What a clean stop does here today: what the presenters queued is sent, then
        the account stops syncing."""
        if self._running is None:
            return
        if self.bot.presenters is not None:
            async with asyncio.timeout(WAIT):
                await self.bot.presenters.drain()
        running, self._running = self._running, None
        await running.aclose()
        await self.bot.services.close()
        self._stopped = True

    async def spawn(self, task: str, *, mode: str = "session") -> Thread:
        raise Missing("Matrix has no !agents spawn yet")

    async def session_thread(self, task: str) -> Thread:
        """A thread root the owner writes, bound to a session of its own under the
        persona's name; the owner's ``task`` there is its first turn."""
        if self._room is None:
            self._room = await room_with(self.bot, self.owner)
            await self.owner.invite_user(self._room, self.other.mxid)
            await self.other.join_room_by_id(self._room)
        root = await send(self.owner, self._room, f"🧵 {task}")
        await self.bot.services.bindings.bind(
            f"agent:scenario-{next(_sessions)}",
            "session",
            thread_of(ACCOUNT, self._room, root),
            metadata=BindingMetadata(persona=BindingPersona(name=PERSONA)),
            bound_by=str(self.owner.mxid),
            scope=self._room,
        )
        thread = Thread(str(root), str(self._room))
        await self.say(thread, task)
        await self.read_until(thread, lambda shown: any(s.author == PERSONA for s in shown))
        await self.settled(thread)
        return thread

    async def settled(self, thread: Thread) -> None:
        conversation = thread_of(ACCOUNT, RoomID(thread.room), EventID(thread.id))
        (record,) = [
            r
            for r in self.bot.services.bindings.live()
            if r.conversation.conversation_id == conversation.conversation_id
        ]
        agent = await self.bot.services.runtime.get(record.target_session_key)
        async with asyncio.timeout(WAIT):
            await agent.wait_idle()
            if self.bot.presenters is not None:
                await self.bot.presenters.drain()

    async def say(self, thread: Thread, text: str, *, by: Person = "owner") -> Said:
        event_id = await send(self.person(by), RoomID(thread.room), text, thread=thread.id)
        return Said(str(event_id), thread, text)

    async def command(self, thread: Thread, name: str, *, by: Person = "owner") -> str:
        if name not in {d["name"] for d in DEFINITIONS}:
            raise Missing(f"Matrix has no {PREFIX}{name} yet")
        person = self.person(by)
        asked = await send(person, RoomID(thread.room), f"{PREFIX}{name}", thread=thread.id)
        (answer,) = await replies_to(person, RoomID(thread.room), asked)
        return str(answer["content"]["body"])

    async def approve(self, thread: Thread, choice: str, *, by: Person = "owner") -> str:
        raise Missing("Matrix approvals by reaction are not there yet")

    async def schedule(self, thread: Thread, task: str, *, minutes: int) -> str:
        raise Missing("Matrix has no !schedule yet")

    async def pass_time(self, minutes: int) -> None:
        clock = self.bot.services.bindings.clock
        assert isinstance(clock, FakeClock)
        await clock.advance(minutes * 60)
        await self.bot.services.scheduler.tick()
        async with asyncio.timeout(WAIT):
            await self.bot.services.scheduler.wait_started()

    async def marks(self, said: Said) -> list[str]:
        if self.bot.services.inbox.channels.get("matrix", ACCOUNT) is None:
            raise Missing("the Matrix inbox is not the services' inbox channel yet (no marks)")

        def found(events: list[Event]) -> list[str] | None:
            keys = [
                relation(e)["key"]
                for e in events
                if e["type"] == "m.reaction"
                and e["sender"] == self.bot.user.user_id
                and relation(e).get("event_id") == said.id
            ]
            return keys or None

        return await self._until(RoomID(said.thread.room), found)

    async def read(self, thread: Thread) -> list[Shown]:
        return self._rendered(thread, await self._events(RoomID(thread.room)))

    async def read_until(self, thread: Thread, done: Callable[[list[Shown]], bool]) -> list[Shown]:
        def found(events: list[Event]) -> list[Shown] | None:
            shown = self._rendered(thread, events)
            return shown if done(shown) else None

        return await self._until(RoomID(thread.room), found)

    async def announcements(self, thread: Thread) -> list[str]:
        """The bot's replies to the thread's root that announce an end."""
        return [
            str(e["content"].get("body"))
            for e in await self._events(RoomID(thread.room))
            if e["sender"] == self.bot.user.user_id
            and (relation(e).get("m.in_reply_to") or {}).get("event_id") == thread.id
            and any(mark in str(e["content"].get("body")) for mark in ANNOUNCED)
        ]

    def _rendered(self, thread: Thread, events: list[Event]) -> list[Shown]:
        """The thread's messages, oldest first, each at its last edit."""
        latest: dict[str, str] = {}
        for event in events:
            if event["type"] == "m.room.message" and relation(event).get("rel_type") == "m.replace":
                new = event["content"].get("m.new_content") or {}
                latest[relation(event)["event_id"]] = str(new.get("body"))
        return [
            self._shown(event, latest.get(event["event_id"], str(event["content"].get("body"))))
            for event in events
            if event["type"] == "m.room.message"
            and relation(event).get("rel_type") == "m.thread"
            and relation(event).get("event_id") == thread.id
        ]

    def _shown(self, event: Event, body: str) -> Shown:
        sender = event["sender"]
        if sender == self.bot.user.user_id:
            name, _, text = body.partition("\n")
            if name.startswith("**") and name.endswith("**") and len(name) > 4:
                return Shown(name[2:-2], text)
            return Shown("bot", body)
        return Shown("owner" if sender == self.owner.mxid else "other", body)

    async def _events(self, room_id: RoomID) -> list[Event]:
        """The room's events, oldest first, as the owner's client reads them."""
        page = await self.owner.get_messages(room_id, PaginationDirection.BACKWARD, limit=500)
        # a NamedTuple of keyword form, which mypy does not read: its fields are unknown
        events: list[Any] = page.events  # type: ignore[attr-defined]
        return [e.serialize() for e in reversed(events)]

    async def _until(self, room_id: RoomID, found: Callable[[list[Event]], T | None]) -> T:
        """``found(events)`` once it is not None, with a long-poll of the owner's
        ``/sync`` between looks."""
        since = None
        async with asyncio.timeout(WAIT):
            while True:
                result = found(await self._events(room_id))
                if result is not None:
                    return result
                since = (await self.owner.sync(since=since, timeout=5_000))["next_batch"]


class MatrixProcess:
    """The bot as a process of its own on Matrix: not there yet."""

    name = "matrix"

    def __init__(self, model: Model) -> None:
        self.model = model

    async def start(self, answer: Answer | None = None) -> None:
        raise Missing("python -m bot does not run a Matrix account yet")

    async def kill(self) -> None:
        raise Missing("python -m bot does not run a Matrix account yet")

    async def session_thread(self, task: str) -> Thread:
        raise Missing("python -m bot does not run a Matrix account yet")

    async def say(self, thread: Thread, text: str, *, by: Person = "owner") -> Said:
        raise Missing("python -m bot does not run a Matrix account yet")

    async def read(self, thread: Thread) -> list[Shown]:
        raise Missing("python -m bot does not run a Matrix account yet")

    async def read_until(self, thread: Thread, done: Callable[[list[Shown]], bool]) -> list[Shown]:
        raise Missing("python -m bot does not run a Matrix account yet")

    async def announcements(self, thread: Thread) -> list[str]:
        raise Missing("python -m bot does not run a Matrix account yet")
