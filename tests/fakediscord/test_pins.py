"""Pins through the real discord.py client, with Discord's permission rules and events."""

from __future__ import annotations

import asyncio

import discord
import pytest

from fakediscord import FakeDiscord
from fakediscord.operations import CHANNEL_PINNED_MESSAGE, MAX_PINNED
from fakediscord.permissions import BOT_DEFAULT, PIN_MESSAGES
from tests.fakediscord.conftest import TOKEN, WAIT, Clients, World, intents


async def connected(fake: FakeDiscord, world: World, clients: Clients) -> discord.Client:
    return await clients.start(discord.Client(intents=intents()), TOKEN)


async def text_channel(client: discord.Client, world: World) -> discord.TextChannel:
    channel = client.get_channel(world.channel.id)
    assert isinstance(channel, discord.TextChannel)
    return channel


class TestPins:
    async def test_without_pin_messages_the_bot_is_refused(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        client = await connected(fake, world, clients)
        channel = await text_channel(client, world)
        sent = await channel.send("pin me")
        with pytest.raises(discord.Forbidden) as refused:
            await sent.pin()
        assert refused.value.code == 50013
        assert not fake.message(sent.id).pinned
        assert [m.type for m in fake.messages_in(world.channel)] == [0]

    async def test_a_pin_posts_the_system_line_and_fires_channel_pins_update(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        fake.set_bot_permissions(world.guild, world.bot, BOT_DEFAULT | PIN_MESSAGES)
        client = await connected(fake, world, clients)
        channel = await text_channel(client, world)
        assert channel.permissions_for(channel.guild.me).pin_messages
        sent = await channel.send("status: working")

        await sent.pin()
        line = fake.messages_in(world.channel)[-1]
        assert line.type == CHANNEL_PINNED_MESSAGE
        assert line.author_id == world.bot.id
        assert line.message_reference == {
            "channel_id": str(world.channel.id),
            "guild_id": str(world.guild.id),
            "message_id": str(sent.id),
        }
        assert (await channel.fetch_message(sent.id)).pinned
        assert [m.id async for m in channel.pins()] == [sent.id]
        await fake.sync(world.bot)
        update = fake.events(world.bot, "CHANNEL_PINS_UPDATE")[-1].data
        assert update["channel_id"] == str(world.channel.id)
        assert update["last_pin_timestamp"] is not None

        await sent.pin()  # already pinned: nothing more happens
        await sent.unpin()
        assert not (await channel.fetch_message(sent.id)).pinned
        assert [m.id async for m in channel.pins()] == []
        await fake.sync(world.bot)
        assert fake.events(world.bot, "CHANNEL_PINS_UPDATE")[-1].data["last_pin_timestamp"] is None
        assert [m.type for m in fake.messages_in(world.channel)].count(6) == 1

    async def test_the_threads_creator_has_no_more_rights_than_its_parent_gives(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        client = await connected(fake, world, clients)
        channel = await text_channel(client, world)
        thread = await channel.create_thread(name="work", type=discord.ChannelType.public_thread)
        sent = await thread.send("status")
        with pytest.raises(discord.Forbidden):
            await sent.pin()

        fake.set_bot_permissions(world.guild, world.bot, BOT_DEFAULT | PIN_MESSAGES)
        await fake.sync(world.bot)
        assert thread.permissions_for(thread.guild.me).pin_messages  # the role update arrived
        await sent.pin()
        assert fake.messages_in(thread.id)[-1].type == CHANNEL_PINNED_MESSAGE
        await fake.archive_thread(thread.id)
        with pytest.raises(discord.HTTPException) as archived:
            await sent.unpin()
        assert archived.value.code == 50083

    async def test_a_channel_holds_fifty_pins(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        fake.set_bot_permissions(world.guild, world.bot, BOT_DEFAULT | PIN_MESSAGES)
        client = await connected(fake, world, clients)
        channel = await text_channel(client, world)
        for n in range(MAX_PINNED):
            message = fake.ops.post_message(world.channel.id, world.alice.id, {"content": str(n)})
            await fake.pin(message, world.bot)
        one_more = await channel.send("one more")
        with pytest.raises(discord.HTTPException) as full:
            await one_more.pin()
        assert full.value.code == 30003

    async def test_the_bot_reads_the_pin_line_as_discord_sends_it(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        seen: asyncio.Queue[discord.Message] = asyncio.Queue()
        client = discord.Client(intents=intents())

        @client.event
        async def on_message(message: discord.Message) -> None:
            seen.put_nowait(message)

        await clients.start(client, TOKEN)
        admin_says = await fake.user_says(world.channel, world.admin, "the plan")
        await fake.pin(admin_says, world.admin)  # an admin may pin anything
        async with asyncio.timeout(WAIT):
            assert (await seen.get()).content == "the plan"
            line = await seen.get()
        assert line.type is discord.MessageType.pins_add
        assert line.author.id == world.admin.id
        assert line.reference is not None
        assert line.reference.message_id == admin_says.id
