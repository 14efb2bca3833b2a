"""Gateway shards with real ``discord.AutoShardedClient``s: who gets which guild's events.

Two clients of one bot, ``shard_ids=[0]`` and ``[1]`` of ``shard_count=2``, stand in for
two bot processes; two guilds, one on each shard. Discord's rule (guild ``g`` on shard
``(g >> 22) % count``) decides where every event and interaction goes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import discord
import pytest
from discord import app_commands

from fakediscord import Channel, FakeDiscord, Guild, User
from fakediscord.snowflake import shard_of
from tests.fakediscord.conftest import TOKEN, WAIT, Clients, intents, running_fake

COUNT = 2


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    """The conftest's fake, but ``GET /gateway/bot`` recommends two shards."""
    async with running_fake(shards=COUNT) as server:
        yield server


@dataclass
class Shards:
    """One bot, a guild per shard (index = shard id), a channel and a member in each."""

    bot: User
    guilds: list[Guild]
    channels: list[Channel]
    members: list[User]


@pytest.fixture
def shards(fake: FakeDiscord) -> Shards:
    bot = fake.add_bot(TOKEN, "threadbound")
    guilds = [fake.add_guild(f"guild-{i}", shard=(i, COUNT)) for i in range(COUNT)]
    channels = [fake.add_text_channel(g, "general") for g in guilds]
    members = [fake.add_member(g, "alice") for g in guilds]
    return Shards(bot, guilds, channels, members)


class ShardBot(discord.AutoShardedClient):
    """A sharded client with ``/ping`` (answered with a button) that records what it saw."""

    def __init__(
        self, *, shard_count: int | None = None, shard_ids: list[int] | None = None
    ) -> None:
        if shard_ids is None:
            super().__init__(intents=intents(), shard_count=shard_count)
        else:
            super().__init__(intents=intents(), shard_count=shard_count, shard_ids=shard_ids)
        self.tree = app_commands.CommandTree(self)
        self.messages: list[int] = []
        """Guild ids of the messages it received."""
        self.pings: list[int] = []
        self.presses: list[int] = []

        @self.tree.command(name="ping", description="Which shard answers")
        async def ping(interaction: discord.Interaction) -> None:
            assert interaction.guild_id is not None
            self.pings.append(interaction.guild_id)
            await interaction.response.send_message("pong", view=Press(self.presses))

    async def setup_hook(self) -> None:
        self.add_view(Press(self.presses))
        await self.tree.sync()

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """No 5 s pause between a process's shards: the fake has no identify rate limit."""

    async def on_message(self, message: discord.Message) -> None:
        if message.guild is not None:
            self.messages.append(message.guild.id)


class Press(discord.ui.View):
    def __init__(self, presses: list[int]) -> None:
        super().__init__(timeout=None)
        self.presses = presses

    @discord.ui.button(label="Press", custom_id="shards:press")
    async def press(self, interaction: discord.Interaction, _: discord.ui.Button[Press]) -> None:
        assert interaction.guild_id is not None
        self.presses.append(interaction.guild_id)
        await interaction.response.edit_message(content="pressed", view=None)


async def start_shard(fake: FakeDiscord, clients: Clients, shard_id: int) -> ShardBot:
    """A client of shard ``shard_id`` of :data:`COUNT`, once that shard is ready."""
    since = len(fake.gateway.identifies)
    client = ShardBot(shard_count=COUNT, shard_ids=[shard_id])
    await clients.start(client, TOKEN)  # returns at any ready shard of the bot
    bot = fake.state.bots[TOKEN].user_id
    await fake.wait_shards_ready(bot, [shard_id], since=since)
    return client


async def two_shards(fake: FakeDiscord, clients: Clients) -> list[ShardBot]:
    return [await start_shard(fake, clients, i) for i in range(COUNT)]


class TestGuildsOnShards:
    def test_a_guild_lands_on_the_shard_asked_for(self, fake: FakeDiscord) -> None:
        """``add_guild(shard=(id, count))`` mints an id of that shard, still in id order."""
        guilds = [fake.add_guild(f"g{i}", shard=(i % 4, 4)) for i in (3, 1, 0, 2, 3)]

        assert [shard_of(g.id, 4) for g in guilds] == [3, 1, 0, 2, 3]
        assert [g.id for g in guilds] == sorted(g.id for g in guilds)

    def test_a_shard_outside_the_count_is_a_mistake(self, fake: FakeDiscord) -> None:
        """Shard ids run from 0 to count - 1; anything else is refused, not looped on."""
        with pytest.raises(ValueError, match="must be in 0"):
            fake.add_guild("nowhere", shard=(2, 2))


class TestIdentify:
    async def test_each_client_identifies_its_shard_and_gets_only_its_guilds(
        self, fake: FakeDiscord, shards: Shards, clients: Clients
    ) -> None:
        """IDENTIFY carries ``[id, count]``; READY and GUILD_CREATE hold that shard's guilds."""
        first, second = await two_shards(fake, clients)

        assert [i["shard"] for i in fake.gateway.identifies] == [[0, COUNT], [1, COUNT]]
        assert fake.gateway.ready_shards(shards.bot.id) == {0, 1}
        for shard_id, client in enumerate((first, second)):
            assert [g.id for g in client.guilds] == [shards.guilds[shard_id].id]
            assert client.get_guild(shards.guilds[shard_id].id) is not None
            (ready,) = fake.events(shards.bot, "READY", shard_id=shard_id)
            assert ready.data["shard"] == [shard_id, COUNT]
            assert [g["id"] for g in ready.data["guilds"]] == [str(shards.guilds[shard_id].id)]
        assert {shard_of(g.id, COUNT) for g in shards.guilds} == {0, 1}

    async def test_gateway_bot_answers_the_configured_shard_count(
        self, fake: FakeDiscord, shards: Shards, clients: Clients
    ) -> None:
        """Without a shard count the client asks ``GET /gateway/bot`` and opens every shard."""
        client = ShardBot()
        await clients.start(client, TOKEN)

        assert await fake.wait_shards_ready(shards.bot, range(COUNT)) == {0, 1}
        assert fake.requests_matching("GET", "/gateway/bot")
        assert client.shard_count == COUNT
        assert sorted(i["shard"] for i in fake.gateway.identifies) == [[0, COUNT], [1, COUNT]]
        assert {g.id for g in client.guilds} == {g.id for g in shards.guilds}

    async def test_a_shard_outside_the_count_is_refused(
        self, fake: FakeDiscord, shards: Shards
    ) -> None:
        """IDENTIFY with shard ``[2, 2]`` is closed with 4010 (invalid shard), as on Discord."""
        async with aiohttp.ClientSession() as http, http.ws_connect(fake.gateway_url) as ws:
            hello = await ws.receive_json(timeout=WAIT)
            assert hello["op"] == 10
            identify = {"token": TOKEN, "intents": 0, "properties": {}, "shard": [2, 2]}
            await ws.send_json({"op": 2, "d": identify})
            closed = await ws.receive(timeout=WAIT)
        assert closed.type is aiohttp.WSMsgType.CLOSE
        assert closed.data == 4010
        assert fake.gateway.ready_shards(shards.bot.id) == set()

    async def test_a_dropped_shard_is_no_longer_ready(
        self, fake: FakeDiscord, shards: Shards, clients: Clients
    ) -> None:
        """Closing one client leaves the other shard ready: readiness is per shard."""
        first, _ = await two_shards(fake, clients)

        await first.close()

        async with asyncio.timeout(WAIT):
            await fake.state.changed.wait_for(
                lambda: True if fake.gateway.ready_shards(shards.bot.id) == {1} else None
            )
        ready = fake.gateway.is_ready(shards.bot.id)
        assert ready is not None
        assert ready.shard == (1, COUNT)


class TestRouting:
    async def test_a_guilds_messages_reach_only_its_shard(
        self, fake: FakeDiscord, shards: Shards, clients: Clients
    ) -> None:
        """A message in each guild is dispatched to that guild's shard and no other."""
        clients_by_shard = await two_shards(fake, clients)

        for shard_id in range(COUNT):
            await fake.user_says(
                shards.channels[shard_id], shards.members[shard_id], f"hello {shard_id}"
            )
        await fake.sync(shards.bot)  # both connections have parsed everything sent so far

        for shard_id, client in enumerate(clients_by_shard):
            guild_id = shards.guilds[shard_id].id
            assert client.messages == [guild_id]
            sent = fake.events(shards.bot, "MESSAGE_CREATE", shard_id=shard_id)
            assert [int(e.data["guild_id"]) for e in sent] == [guild_id]

    async def test_commands_and_button_presses_reach_only_the_guilds_shard(
        self, fake: FakeDiscord, shards: Shards, clients: Clients
    ) -> None:
        """INTERACTION_CREATE (a slash command, then a press on its button) goes to the
        guild's shard only, and that shard's client answers it."""
        clients_by_shard = await two_shards(fake, clients)

        for shard_id in range(COUNT):
            handle = await fake.invoke_command(
                shards.guilds[shard_id], shards.channels[shard_id], shards.members[shard_id], "ping"
            )
            await handle.wait_response()
            answer = handle.original_message
            assert answer is not None
            press = await fake.click_button(answer, "shards:press", shards.members[shard_id])
            assert (await press.wait_response()).callback_type == 7  # UPDATE_MESSAGE

        for shard_id, client in enumerate(clients_by_shard):
            guild_id = shards.guilds[shard_id].id
            assert client.pings == [guild_id]
            assert client.presses == [guild_id]
            sent = fake.events(shards.bot, "INTERACTION_CREATE", shard_id=shard_id)
            assert [int(e.data["guild_id"]) for e in sent] == [guild_id, guild_id]
            assert {e.session_id for e in sent} == {
                s.id for s in fake.gateway.sessions.values() if s.shard == (shard_id, COUNT)
            }

    async def test_an_interaction_for_a_shard_nobody_connected_is_an_error(
        self, fake: FakeDiscord, shards: Shards, clients: Clients
    ) -> None:
        """With only shard 0 connected, a command in shard 1's guild fails loudly in the test."""
        await start_shard(fake, clients, 0)

        with pytest.raises(RuntimeError, match="carries guild"):
            await fake.invoke_command(
                shards.guilds[1], shards.channels[1], shards.members[1], "ping"
            )
