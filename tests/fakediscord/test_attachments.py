"""Attachments end to end: users upload files, the fake serves them, discord.py reads them.

Payload URLs point at the fake's own ``/attachments/...`` route (there is no internet
here), so ``discord.Attachment.read()`` downloads the stored bytes over loopback.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import aiohttp
import discord
import pytest

from fakediscord import DiscordError, FakeDiscord, payloads
from fakediscord.persistence import load_state, save_state
from tests.fakediscord.conftest import TOKEN, WAIT, Clients, World, intents

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
NOTES = ("notes.txt", b"line one\nline two\n", "text/plain; charset=utf-8")


async def _get(url: str) -> tuple[int, bytes, str | None]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.read(), response.headers.get("Content-Type")


async def _listening(clients: Clients) -> tuple[discord.Client, asyncio.Queue[discord.Message]]:
    seen: asyncio.Queue[discord.Message] = asyncio.Queue()
    client = discord.Client(intents=intents())

    @client.event
    async def on_message(message: discord.Message) -> None:
        seen.put_nowait(message)

    await clients.start(client, TOKEN)
    return client, seen


class TestUserSaysWithFiles:
    async def test_files_become_attachments_with_fresh_ids(
        self, fake: FakeDiscord, world: World
    ) -> None:
        """Each ``(filename, data, content_type)`` is stored as an attachment of the message."""
        message = await fake.user_says(
            world.channel, world.alice, "two files", files=[("a.png", PNG, "image/png"), NOTES]
        )

        stored = fake.message(message.id)
        assert [(a.filename, a.data, a.size, a.content_type) for a in stored.attachments] == [
            ("a.png", PNG, len(PNG), "image/png"),
            ("notes.txt", NOTES[1], len(NOTES[1]), NOTES[2]),
        ]
        first, second = (a.id for a in stored.attachments)
        assert first < second < message.id  # snowflakes minted by the fake, in order
        assert stored.content == "two files"

    async def test_an_attachment_only_message_is_allowed(
        self, fake: FakeDiscord, world: World
    ) -> None:
        """No content but a file is a valid message; no content and no file stays a 400."""
        message = await fake.user_says(world.channel, world.alice, files=[("x.bin", b"\0", None)])

        assert message.content == ""
        assert [(a.filename, a.content_type) for a in message.attachments] == [("x.bin", None)]
        with pytest.raises(DiscordError) as refused:
            await fake.user_says(world.channel, world.alice, "")
        assert refused.value.status == 400

    async def test_attachments_survive_a_save_and_a_load(
        self, fake: FakeDiscord, world: World, tmp_path: Path
    ) -> None:
        """Saved messages keep their files (base64 in the JSON) and load back byte for byte."""
        message = await fake.user_says(world.channel, world.alice, "", files=[("a.png", PNG, None)])
        path = tmp_path / "state.json"
        save_state(fake.state, path)

        saved = json.loads(path.read_text())["messages"][str(message.id)]["attachments"]
        assert saved[0]["filename"] == "a.png"
        assert isinstance(saved[0]["data"], str)  # base64, not a list of ints
        restored = FakeDiscord()
        assert load_state(restored.state, path)
        assert restored.message(message.id).attachments == message.attachments


class TestPayloadsAndRoute:
    async def test_payload_urls_point_at_the_fake(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """``url`` and ``proxy_url`` use the fake's base URL in Discord's CDN layout."""
        await clients.start(discord.Client(intents=intents()), TOKEN)
        message = await fake.user_says(
            world.channel, world.alice, "pic", files=[("my pic.png", PNG, "image/png")]
        )

        [event] = [
            e for e in fake.events(world.bot, "MESSAGE_CREATE") if e.data["id"] == str(message.id)
        ]
        [payload] = event.data["attachments"]
        attachment = message.attachments[0]
        url = f"{fake.base_url}/attachments/{world.channel.id}/{attachment.id}/my%20pic.png"
        assert payload == {
            "id": str(attachment.id),
            "filename": "my pic.png",
            "size": len(PNG),
            "content_type": "image/png",
            "url": url,
            "proxy_url": url,
            "width": None,
            "height": None,
        }
        assert url.startswith("http://127.0.0.1:")

    async def test_the_route_serves_the_bytes_with_their_content_type(
        self, fake: FakeDiscord, world: World
    ) -> None:
        """GET on the payload URL answers 200 with the stored bytes and content type."""
        message = await fake.user_says(
            world.channel,
            world.alice,
            "",
            files=[("my pic.png", PNG, "image/png"), NOTES, ("raw", b"?", None)],
        )
        base = f"{fake.base_url}/attachments/{world.channel.id}"
        png, notes, raw = message.attachments

        assert await _get(f"{base}/{png.id}/my%20pic.png") == (200, PNG, "image/png")
        assert await _get(f"{base}/{notes.id}/notes.txt") == (200, NOTES[1], NOTES[2])
        assert await _get(f"{base}/{raw.id}/raw") == (200, b"?", "application/octet-stream")
        assert not fake.requests  # the CDN is not part of the recorded REST API

    async def test_unknown_attachments_are_404(self, fake: FakeDiscord, world: World) -> None:
        """Unknown id, wrong channel, wrong filename or a deleted message: 404."""
        message = await fake.user_says(world.channel, world.alice, "", files=[NOTES])
        other = fake.add_text_channel(world.guild, "other")
        attachment_id = message.attachments[0].id
        base = fake.base_url + "/attachments"

        for url in (
            f"{base}/{world.channel.id}/{attachment_id + 1000}/notes.txt",
            f"{base}/{other.id}/{attachment_id}/notes.txt",
            f"{base}/{world.channel.id}/{attachment_id}/other.txt",
            f"{base}/{world.channel.id}/not-a-snowflake/notes.txt",
        ):
            assert (await _get(url))[0] == 404, url
        fake.ops.delete_message(message)
        assert (await _get(f"{base}/{world.channel.id}/{attachment_id}/notes.txt"))[0] == 404


class TestCdnFaults:
    async def test_a_fault_or_a_gate_applies_to_file_downloads(
        self, fake: FakeDiscord, world: World
    ) -> None:
        """A test can make the CDN fail or hang, as a real one can; still nothing is recorded."""
        message = await fake.user_says(world.channel, world.alice, "", files=[NOTES])
        url = (
            f"{fake.base_url}/attachments/{world.channel.id}/{message.attachments[0].id}/notes.txt"
        )
        fake.fail_next("GET", "/attachments/*", 503)
        assert (await _get(url))[0] == 503
        gate = fake.hold("GET", "/attachments/*")
        held = asyncio.ensure_future(_get(url))
        await gate.wait_entered()
        assert not held.done()
        gate.release()
        assert (await held)[:2] == (200, NOTES[1])
        assert not fake.requests

    async def test_attachment_urls_can_point_at_another_cdn(
        self, fake: FakeDiscord, world: World
    ) -> None:
        """``state.cdn_base_url`` stands for a CDN elsewhere (say, one whose name does not
        resolve); the payload's ``url`` says so."""
        fake.state.cdn_base_url = "http://cdn.threadbound.invalid"
        message = await fake.user_says(world.channel, world.alice, "", files=[NOTES])
        (attachment,) = payloads.message(fake.state, fake.message(message.id))["attachments"]
        assert attachment["url"].startswith("http://cdn.threadbound.invalid/attachments/")


class TestDiscordPyReads:
    async def test_on_message_attachment_reads_the_uploaded_bytes(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """A user's file arrives in ``on_message``; ``Attachment.read()`` returns its bytes."""
        _, seen = await _listening(clients)

        await fake.user_says(world.channel, world.alice, "", files=[("a.png", PNG, "image/png")])

        async with asyncio.timeout(WAIT):
            message = await seen.get()
        [attachment] = message.attachments
        assert (attachment.filename, attachment.size) == ("a.png", len(PNG))
        assert attachment.content_type == "image/png"
        assert await attachment.read() == PNG
        assert await attachment.read(use_cached=True) == PNG
        file = await attachment.to_file()
        assert (file.filename, file.fp.read()) == ("a.png", PNG)

    async def test_a_bots_upload_can_be_read_back_until_deleted(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """Files the bot sends are served too; after the message is deleted, NotFound."""
        client, _ = await _listening(clients)
        channel = client.get_channel(world.channel.id)
        assert isinstance(channel, discord.TextChannel)

        sent = await channel.send(file=discord.File(io.BytesIO(b"<html/>"), "page.html"))

        assert await sent.attachments[0].read() == b"<html/>"
        await sent.delete()
        with pytest.raises(discord.NotFound):
            await sent.attachments[0].read()

    async def test_a_bots_upload_is_typed_by_name_and_saved(
        self, fake: FakeDiscord, world: World, clients: Clients, tmp_path: Path
    ) -> None:
        """discord.py labels parts octet-stream; the file is typed by its name, and saveable."""
        client, _ = await _listening(clients)
        channel = client.get_channel(world.channel.id)
        assert isinstance(channel, discord.TextChannel)

        sent = await channel.send(file=discord.File(io.BytesIO(b"<html/>"), "page.html"))

        stored = fake.message(sent.id).attachments[0]
        assert (stored.content_type, type(stored.data)) == ("text/html", bytes)
        assert sent.attachments[0].content_type == "text/html"
        save_state(fake.state, tmp_path / "state.json")  # a bytearray here once broke the save
        restored = FakeDiscord()
        assert load_state(restored.state, tmp_path / "state.json")
        assert restored.message(sent.id).attachments == [stored]
