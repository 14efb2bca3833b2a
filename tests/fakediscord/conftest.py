"""Fixtures: a fake Discord with discord.py pointed at it, and real clients connected to it.

Teardown order matters: clients close first (so they do not try to reconnect to a
stopped server), then the server stops, then discord.py's two globals are restored.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import discord
import pytest
import yarl

from fakediscord import Channel, FakeDiscord, Guild, User

WAIT = 5.0
TOKEN = "bot-token-main"


@asynccontextmanager
async def running_fake(**options: Any) -> AsyncIterator[FakeDiscord]:
    """A running fake Discord (``options`` as for FakeDiscord) that discord.py talks to."""
    base, gateway = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    async with FakeDiscord(wait_timeout=WAIT, **options) as server:
        discord.http.Route.BASE = f"{server.base_url}/api/v10"
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(server.gateway_url)
        try:
            yield server
        finally:
            discord.http.Route.BASE = base
            discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = gateway


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    """A running fake Discord; discord.py talks to it for the duration of the test."""
    async with running_fake() as server:
        yield server


class Clients:
    """Starts discord.py clients against the fake and closes them all at teardown."""

    def __init__(self, fake: FakeDiscord) -> None:
        self._fake = fake
        self._running: list[tuple[discord.Client, asyncio.Task[None]]] = []

    async def start(self, client: discord.Client, token: str) -> discord.Client:
        """Log in and connect; return once the client has parsed its GUILD_CREATEs."""
        run = asyncio.create_task(client.start(token))
        self._running.append((client, run))
        user_id = self._fake.state.bots[token].user_id
        # re-raises why the client stopped (LoginFailure, ...)
        if await self._fake.wait_ready_or_stopped(user_id, run) is None:
            raise AssertionError("the client stopped before becoming ready")
        return client

    async def close_all(self) -> None:
        for client, run in reversed(self._running):
            await client.close()
            async with asyncio.timeout(WAIT):
                await asyncio.gather(run, return_exceptions=True)


@pytest.fixture
async def clients(fake: FakeDiscord, caplog: pytest.LogCaptureFixture) -> AsyncIterator[Clients]:
    """Connected clients; the test fails if discord.py logged an error it swallowed.

    discord.py catches exceptions in parsers, event handlers and views and only logs
    them, so a payload the fake got wrong would otherwise pass unnoticed.
    """
    caplog.set_level(logging.WARNING, logger="discord")
    runner = Clients(fake)
    try:
        yield runner
    finally:
        await runner.close_all()
    records = [r for when in ("setup", "call", "teardown") for r in caplog.get_records(when)]
    errors = [r for r in records if r.name.startswith("discord") and r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]


@dataclass
class World:
    """A small guild: one bot account, one member, one admin, one text channel."""

    bot: User
    guild: Guild
    channel: Channel
    alice: User
    admin: User


@pytest.fixture
def world(fake: FakeDiscord) -> World:
    bot = fake.add_bot(TOKEN, "threadbound")
    guild = fake.add_guild("Test guild")
    channel = fake.add_text_channel(guild, "general")
    alice = fake.add_member(guild, "alice")
    admin = fake.add_member(guild, "root", admin=True)
    return World(bot=bot, guild=guild, channel=channel, alice=alice, admin=admin)


def intents(*, content: bool = True) -> discord.Intents:
    value = discord.Intents.default()
    value.message_content = content
    return value
