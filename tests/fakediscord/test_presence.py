"""A bot's presence comes from its gateway connection: online while identified."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import discord

from fakediscord import FakeDiscord
from tests.fakediscord.conftest import TOKEN, WAIT, Clients, World, intents

OBSERVER = "bot-token-observer"


def statuses(fake: FakeDiscord, observer: int, about: int) -> list[str]:
    """The PRESENCE_UPDATEs about ``about`` the observer bot was sent, in order."""
    return [
        e.data["status"]
        for e in fake.events(observer, "PRESENCE_UPDATE")
        if e.data["user"]["id"] == str(about)
    ]


async def identify(http: aiohttp.ClientSession, fake: FakeDiscord) -> Any:
    """A bare gateway connection that identifies as the main bot."""
    ws = await http.ws_connect(fake.gateway_url)
    hello = await ws.receive_json()
    assert hello["op"] == 10
    await ws.send_str(json.dumps({"op": 2, "d": {"token": TOKEN, "intents": 0}}))
    return ws


class TestPresence:
    async def test_online_while_identified_offline_after_a_clean_close(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        watcher = fake.add_bot(OBSERVER, "watcher")
        watching = intents()
        watching.presences = True
        await clients.start(discord.Client(intents=watching), OBSERVER)
        assert fake.presence(world.bot) == "offline"

        client = await clients.start(discord.Client(intents=intents()), TOKEN)
        assert fake.presence(world.bot) == "online"
        await client.close()
        async with asyncio.timeout(WAIT):
            await fake.state.changed.wait_for(lambda: fake.presence(world.bot) == "offline" or None)
        await fake.sync(watcher)
        assert statuses(fake, watcher.id, world.bot.id) == ["online", "offline"]
        assert fake.events(world.bot, "PRESENCE_UPDATE") == []  # no presences intent

    async def test_a_dropped_connection_is_offline_though_its_session_may_resume(
        self, fake: FakeDiscord, world: World
    ) -> None:
        """What a killed bot leaves: no close handshake, a resumable session, offline."""
        async with aiohttp.ClientSession() as http:
            ws = await identify(http, fake)
            async with asyncio.timeout(WAIT):
                await fake.state.changed.wait_for(
                    lambda: fake.presence(world.bot) == "online" or None
                )
            await ws.close(code=4000)  # not 1000/1001: the session outlives the connection
            async with asyncio.timeout(WAIT):
                await fake.state.changed.wait_for(
                    lambda: fake.presence(world.bot) == "offline" or None
                )
            assert [s.user_id for s in fake.gateway.sessions.values()] == [world.bot.id]
