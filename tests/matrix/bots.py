"""A bot over the real services on the test homeserver, and a person's ways of reading it.

The bot account runs :func:`bot.wiring.build_services` (the scripted model) with its
:class:`~adapters.matrix.account.MatrixAccount` plugged in as the app plugs it. A person
types with a mautrix client of their own and reads the bot's replies as their client
would.
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

from adapters.matrix.account import MatrixAccount
from adapters.matrix.connection import TIMELINE_LIMIT, SyncHandler
from adapters.matrix.presenter import MatrixPresenters
from bot.wiring import build_services
from core.clock import FakeClock, SystemClock
from core.config import parse_config
from core.providers.scripted import ScriptedProvider, Step
from core.services import Services
from tests.matrix.synapse import MatrixUser, Synapse, matrix_client

WAIT = 30.0
TOKEN_ENV = "MATRIX_ACCESS_TOKEN"
_people = itertools.count()


@dataclass
class Watched:
    """The account's sync handler, noting each batch it finished."""

    matrix: SyncHandler
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
    provider: ScriptedProvider
    account: MatrixAccount | None = None
    """The running account (built by :meth:`running`, as the app builds it)."""

    @property
    def presenters(self) -> MatrixPresenters | None:
        return self.account.presenters if self.account is not None else None

    @asynccontextmanager
    async def running(self, *, timeline_limit: int = TIMELINE_LIMIT) -> AsyncIterator[Watched]:
        async with aiohttp.ClientSession() as http:
            # the services' clock is a fake one; sends and edits are paced in real time
            self.account = MatrixAccount(
                "default",
                self.services,
                session=http,
                clock=SystemClock(),
                min_edit_interval=0.2,
                timeline_limit=timeline_limit,
            )
            watched = Watched(self.account)
            self.account.connection.handler = watched
            task = asyncio.create_task(self.account.run())
            try:
                yield watched
            finally:
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task


@asynccontextmanager
async def services_bot(
    synapse: Synapse,
    tmp_path: Path,
    *,
    provider: ScriptedProvider | None = None,
    thread_bindings: Mapping[str, Any] | None = None,
    mcp_servers: Mapping[str, Any] | None = None,
    agent_settings: Mapping[str, Any] | None = None,
    user: MatrixUser | None = None,
    account_settings: Mapping[str, Any] | None = None,
    agents: Mapping[str, Any] | None = None,
    acp_agents: Mapping[str, Any] | None = None,
) -> AsyncIterator[Bot]:
    """A bot account of its own over the real services (a store in ``tmp_path``); its
    model answers "ok" unless ``provider`` says otherwise. ``thread_bindings``: the
    ``[channels.matrix.threadBindings]`` flags; ``mcp_servers`` and ``agent_settings``:
    the config's ``[mcp_servers]`` and ``[agent]`` tables; ``user``: an earlier bot's
    account (its store in the same ``tmp_path``), as a restart would; ``account_settings``:
    more keys of its ``[channels.matrix.accounts.default]`` table; ``agents``: the
    config's ``[agents]`` profiles (a persona's name, its tools, an external agent);
    ``acp_agents``: the ``[acp_agents]`` a profile's ``acp`` names."""
    user = user or synapse.register(f"tb-services-bot-{next(_people)}")
    account = {
        "homeserver": synapse.base_url,
        "user_id": user.user_id,
        "access_token_env": TOKEN_ENV,
        **(account_settings or {}),
    }
    config = parse_config(
        {
            "store": {"url": f"sqlite:///{tmp_path / 'bot.db'}"},
            "channels": {
                "matrix": {
                    "accounts": {"default": account},
                    "threadBindings": dict(thread_bindings or {}),
                }
            },
            "mcp_servers": dict(mcp_servers or {}),
            "agent": dict(agent_settings or {}),
            "agents": dict(agents or {}),
            "acp_agents": dict(acp_agents or {}),
        },
        config_path=tmp_path / "config.toml",
        env={TOKEN_ENV: user.access_token},
    )
    provider = provider or ScriptedProvider(lambda _messages: Step(text="ok"))
    services = await build_services(config, clock=FakeClock(), env={}, provider=provider)
    try:
        yield Bot(synapse, user, services, provider)
    finally:
        await services.close()


@asynccontextmanager
async def a_person(synapse: Synapse) -> AsyncIterator[Client]:
    """A person of their own, with their own client."""
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
