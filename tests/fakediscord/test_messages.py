"""Bots send messages, start threads and react over REST; the fake records and enforces."""

from __future__ import annotations

import io

import aiohttp
import discord
import pytest

from fakediscord import MAX_FILE_BYTES, FakeDiscord
from tests.fakediscord.conftest import TOKEN, Clients, World, intents


async def _ready(clients: Clients) -> discord.Client:
    return await clients.start(discord.Client(intents=intents()), TOKEN)


def _text_channel(client: discord.Client, channel_id: int) -> discord.TextChannel:
    channel = client.get_channel(channel_id)
    assert isinstance(channel, discord.TextChannel)
    return channel


class TestSend:
    async def test_send_is_recorded_with_its_token_and_stored(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """``channel.send`` becomes a recorded POST with the bot token and a stored message."""
        client = await _ready(clients)

        sent = await _text_channel(client, world.channel.id).send(
            "hi", allowed_mentions=discord.AllowedMentions.none()
        )

        request = fake.requests_matching("POST", f"/channels/{world.channel.id}/messages")[0]
        assert request.token == TOKEN
        assert request.json["content"] == "hi"
        assert request.status == 200
        stored = fake.messages_in(world.channel)
        assert [(m.id, m.content, m.author_id) for m in stored] == [(sent.id, "hi", world.bot.id)]
        assert stored[0].allowed_mentions == {"parse": []}

    async def test_edit_delete_and_react(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """Edits, reactions and deletes of the bot's own message change the stored state."""
        client = await _ready(clients)
        sent = await _text_channel(client, world.channel.id).send("draft")

        await sent.edit(content="final")
        await sent.add_reaction("👍")
        stored = fake.message(sent.id)
        assert stored.content == "final"
        assert stored.edited_timestamp is not None
        assert [(r.emoji_name, r.user_ids) for r in stored.reactions] == [("👍", [world.bot.id])]

        await sent.delete()
        assert fake.messages_in(world.channel) == []

    async def test_file_upload_is_stored_as_an_attachment(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """A multipart send (``payload_json`` + ``files[0]``) keeps the file's bytes."""
        client = await _ready(clients)
        page = discord.File(io.BytesIO(b"<html>tree</html>"), filename="export.html")

        sent = await _text_channel(client, world.channel.id).send("export", file=page)

        attachment = fake.message(sent.id).attachments[0]
        assert (attachment.filename, attachment.data) == ("export.html", b"<html>tree</html>")
        assert sent.attachments[0].filename == "export.html"
        assert fake.requests[-1].json["content"] == "export"

    async def test_a_bot_cannot_edit_a_users_message(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """Editing someone else's message is refused with 50005, as on Discord."""
        client = await _ready(clients)
        said = await fake.user_says(world.channel, world.alice, "mine")
        message = await _text_channel(client, world.channel.id).fetch_message(said.id)

        with pytest.raises(discord.Forbidden) as caught:
            await message.edit(content="yours")
        assert caught.value.code == 50005

    async def test_over_long_content_is_an_invalid_form_body(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """Content over 2000 characters is refused (50035), so splitting must happen first."""
        client = await _ready(clients)

        with pytest.raises(discord.HTTPException) as caught:
            await _text_channel(client, world.channel.id).send("x" * 2001)
        assert caught.value.code == 50035

    async def test_an_edit_recomputes_who_is_mentioned(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """Streaming edits are where model text arrives: their mentions obey allowed_mentions."""
        client = await _ready(clients)
        channel = _text_channel(client, world.channel.id)
        quiet = await channel.send("…", allowed_mentions=discord.AllowedMentions.none())
        loud = await channel.send("…")

        await quiet.edit(content="@everyone <@&1>")
        await loud.edit(content="@everyone")

        assert not fake.message(quiet.id).mention_everyone
        assert fake.message(quiet.id).mention_role_ids == []
        assert fake.message(loud.id).mention_everyone

    async def test_files_over_discords_limits_are_refused(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """More than 10 files is 50035; a file over 10 MiB is 413 (40005); nothing is stored."""
        client = await _ready(clients)
        channel = _text_channel(client, world.channel.id)
        eleven = [discord.File(io.BytesIO(b"x"), f"{i}.txt") for i in range(11)]
        huge = discord.File(io.BytesIO(b"x" * (MAX_FILE_BYTES + 1)), "huge.bin")

        with pytest.raises(discord.HTTPException) as many:
            await channel.send(files=eleven)
        with pytest.raises(discord.HTTPException) as large:
            await channel.send(file=huge)

        assert many.value.code == 50035
        assert (large.value.status, large.value.code) == (413, 40005)
        assert fake.messages_in(world.channel) == []


class TestThreads:
    async def test_thread_without_message_then_post_in_it(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """A public thread under a channel; the bot posts in it and the counters move."""
        client = await _ready(clients)
        parent = _text_channel(client, world.channel.id)

        thread = await parent.create_thread(name="task 1", type=discord.ChannelType.public_thread)
        await thread.send("working on it")

        stored = fake.channel(thread.id)
        assert (stored.parent_id, stored.type, stored.owner_id) == (parent.id, 11, world.bot.id)
        assert stored.message_count == 1
        assert [m.content for m in fake.messages_in(thread.id)] == ["working on it"]
        system = [m for m in fake.messages_in(parent.id) if m.type == 18]
        assert [m.content for m in system] == ["task 1"]
        await fake.sync(world.bot.id)
        assert client.get_channel(thread.id) is not None

    async def test_thread_from_a_message_shares_its_id(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """A thread started on a message takes that message's id, as on Discord."""
        client = await _ready(clients)
        starter = await _text_channel(client, world.channel.id).send("spawn")

        thread = await starter.create_thread(name="from message")

        assert thread.id == starter.id
        assert fake.channel(thread.id).parent_id == world.channel.id

    async def test_bot_send_reopens_an_archived_thread(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """A bot message into an archived (unlocked) thread unarchives it."""
        client = await _ready(clients)
        thread = fake.add_thread(world.channel, "old")
        await fake.archive_thread(thread.id)

        await client.get_partial_messageable(thread.id).send("back")

        assert fake.channel(thread.id).archived is False
        assert (
            fake.events(world.bot, "THREAD_UPDATE")[-1].data["thread_metadata"]["archived"] is False
        )

    async def test_deleted_channel_is_unknown(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """After a delete, sends fail with 404 / 10003 and the client drops the channel."""
        client = await _ready(clients)
        thread = fake.add_thread(world.channel, "doomed")
        await fake.delete_channel(thread.id)

        with pytest.raises(discord.NotFound) as caught:
            await client.get_partial_messageable(thread.id).send("anyone?")
        assert caught.value.code == 10003
        await fake.sync(world.bot.id)
        assert client.get_channel(thread.id) is None


class TestHttpContract:
    async def test_json_content_type_is_exact(self, fake: FakeDiscord, world: World) -> None:
        """discord.py parses JSON only for exactly ``application/json`` (no charset)."""
        headers = {"Authorization": f"Bot {TOKEN}"}
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{fake.base_url}/api/v10/users/@me", headers=headers) as response,
        ):
            assert response.headers["Content-Type"] == "application/json"
            assert (await response.json())["id"] == str(world.bot.id)

    async def test_missing_token_is_401_and_unknown_route_is_a_recorded_404(
        self, fake: FakeDiscord, world: World
    ) -> None:
        """No token → 401 in Discord's shape; an unimplemented route says what was asked."""
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{fake.base_url}/api/v10/users/@me") as response:
                assert response.status == 401
                assert await response.json() == {"message": "401: Unauthorized", "code": 0}
            url = f"{fake.base_url}/api/v10/stickers/1"
            async with session.get(url, headers={"Authorization": f"Bot {TOKEN}"}) as response:
                assert response.status == 404
                assert "GET /api/v10/stickers/1" in (await response.json())["message"]
        assert [r.path for r in fake.unimplemented] == ["/stickers/1"]


class TestHistory:
    async def test_after_answers_the_oldest_past_the_id_newest_first(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """``GET …/messages?after=X&limit=N``: the N oldest messages newer than X, listed
        newest first, as Discord answers it."""
        await _ready(clients)
        said = [await fake.user_says(world.channel, world.alice, f"m{i}") for i in range(6)]
        headers = {"Authorization": f"Bot {TOKEN}"}
        url = f"{fake.base_url}/api/v10/channels/{world.channel.id}/messages"
        async with aiohttp.ClientSession() as http:
            query = {"after": str(said[1].id), "limit": "3"}
            async with http.get(url, params=query, headers=headers) as response:
                page = [m["content"] for m in await response.json()]
            async with http.get(url, params={"limit": "2"}, headers=headers) as response:
                newest = [m["content"] for m in await response.json()]
        assert page == ["m4", "m3", "m2"]
        assert newest == ["m5", "m4"]

    async def test_discord_py_pages_history_after_an_id_oldest_first(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """discord.py's ``history(after=…, oldest_first=True)`` pages 100 at a time and
        yields every later message once, in order."""
        client = await _ready(clients)
        first = await fake.user_says(world.channel, world.alice, "before")
        for i in range(205):
            fake.ops.post_message(world.channel.id, world.alice.id, {"content": f"m{i}"})
        channel = _text_channel(client, world.channel.id)
        read = [
            m.content
            async for m in channel.history(
                limit=None, after=discord.Object(first.id), oldest_first=True
            )
        ]
        assert read == [f"m{i}" for i in range(205)]
        pages = fake.requests_matching("GET", f"/channels/{world.channel.id}/messages")
        assert [int(r.query["limit"]) for r in pages] == [100, 100, 100]
