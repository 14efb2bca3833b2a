"""Webhook personas: create, send into threads with overrides, edit, archived/locked rules."""

from __future__ import annotations

import discord
import pytest

from fakediscord import FakeDiscord
from tests.fakediscord.conftest import TOKEN, Clients, World, intents


async def _webhook(clients: Clients, world: World) -> tuple[discord.Client, discord.Webhook]:
    client = await clients.start(discord.Client(intents=intents()), TOKEN)
    channel = client.get_channel(world.channel.id)
    assert isinstance(channel, discord.TextChannel)
    return client, await channel.create_webhook(name="threadbound")


class TestWebhookSends:
    async def test_create_send_with_persona_into_a_thread_and_edit(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """A persona message lands in the thread with its name and avatar, then is edited."""
        _, webhook = await _webhook(clients, world)
        thread = fake.add_thread(world.channel, "session")
        target = discord.Object(id=thread.id)

        sent = await webhook.send(
            "thinking…",
            username="Researcher",
            avatar_url="https://example.test/r.png",
            thread=target,
            allowed_mentions=discord.AllowedMentions.none(),
            wait=True,
        )
        await webhook.edit_message(sent.id, content="done", thread=target)

        stored = fake.message(sent.id)
        assert (stored.channel_id, stored.webhook_id) == (thread.id, webhook.id)
        assert (stored.username, stored.avatar_url) == ("Researcher", "https://example.test/r.png")
        assert stored.application_id == world.bot.id
        assert stored.content == "done"
        post = fake.requests_matching("POST", f"/webhooks/{webhook.id}/")[0]
        assert post.query["thread_id"] == str(thread.id)
        assert post.json["allowed_mentions"] == {"parse": []}
        assert fake.webhooks_in(world.channel)[0].creator_id == world.bot.id
        assert fake.events(world.bot, "WEBHOOKS_UPDATE")

    async def test_edit_without_thread_id_is_an_unknown_message(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """A thread message is only found with its ``thread_id`` (10008 otherwise)."""
        _, webhook = await _webhook(clients, world)
        thread = fake.add_thread(world.channel, "session")
        sent = await webhook.send("x", thread=discord.Object(id=thread.id), wait=True)

        with pytest.raises(discord.NotFound) as caught:
            await webhook.edit_message(sent.id, content="y")
        assert caught.value.code == 10008

    async def test_channel_webhooks_list_returns_the_token_to_its_creator(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """A bot can recover its webhook's token from the channel's webhook list."""
        client, webhook = await _webhook(clients, world)
        channel = client.get_channel(world.channel.id)
        assert isinstance(channel, discord.TextChannel)

        listed = await channel.webhooks()

        assert [(w.id, w.token) for w in listed] == [(webhook.id, webhook.token)]

    async def test_unknown_webhook_is_10015(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """A deleted webhook answers 404 / 10015."""
        _, webhook = await _webhook(clients, world)
        await webhook.delete()

        with pytest.raises(discord.NotFound) as caught:
            await webhook.send("hello?", wait=True)
        assert caught.value.code == 10015


class TestArchivedThreads:
    async def test_webhook_post_unarchives_an_archived_thread(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """Posting with ``thread_id`` into an archived thread reopens it."""
        client, webhook = await _webhook(clients, world)
        thread = fake.add_thread(world.channel, "sleepy")
        await fake.archive_thread(thread.id)

        await webhook.send("wake up", thread=discord.Object(id=thread.id), wait=True)

        assert fake.channel(thread.id).archived is False
        await fake.sync(world.bot.id)
        cached = client.get_channel(thread.id)
        assert isinstance(cached, discord.Thread)
        assert cached.archived is False

    async def test_webhook_post_into_a_locked_thread_is_50083(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """A locked archived thread stays closed: 400 with code 50083."""
        _, webhook = await _webhook(clients, world)
        thread = fake.add_thread(world.channel, "closed")
        await fake.archive_thread(thread.id, locked=True)

        with pytest.raises(discord.HTTPException) as caught:
            await webhook.send("let me in", thread=discord.Object(id=thread.id), wait=True)

        assert (caught.value.status, caught.value.code) == (400, 50083)
        assert fake.channel(thread.id).archived is True
        assert fake.messages_in(thread.id) == []
