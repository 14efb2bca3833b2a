"""The real discord.py client connects to the fake gateway and sees what it should."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Coroutine
from typing import Any

import discord
import pytest

from fakediscord import FakeDiscord
from fakediscord.gateway import HEARTBEAT_ACK, _Connection
from tests.fakediscord.conftest import TOKEN, WAIT, Clients, World, intents

INTERVAL = 41.25
"""The fake gateway's heartbeat interval (FakeDiscord's default), in seconds."""


class TestConnect:
    async def test_client_becomes_ready_with_guild_channels_and_threads(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """After READY and GUILD_CREATE the client's cache holds the guild, channel and thread."""
        thread = fake.add_thread(world.channel, "ongoing work", owner=world.alice)
        client = discord.Client(intents=intents())
        await clients.start(client, TOKEN)

        assert client.user is not None
        assert client.user.id == world.bot.id
        guild = client.get_guild(world.guild.id)
        assert guild is not None
        assert guild.name == "Test guild"
        channel = guild.get_channel(world.channel.id)
        assert isinstance(channel, discord.TextChannel)
        assert channel.name == "general"
        cached = guild.get_thread(thread.id)
        assert cached is not None
        assert cached.parent_id == world.channel.id
        assert guild.get_member(world.bot.id) is not None
        assert client.application_id == world.bot.id

    async def test_login_and_identify_use_the_token(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """Login calls /users/@me with the bot token; IDENTIFY carries it and the intents."""
        await clients.start(discord.Client(intents=intents()), TOKEN)

        me = fake.requests_matching("GET", "/users/@me")[0]
        assert me.authorization == f"Bot {TOKEN}"
        assert fake.gateway.identifies[0]["token"] == TOKEN
        assert fake.gateway.identifies[0]["intents"] == intents().value
        session = await fake.wait_ready(world.bot.id)
        assert session.compression == "zlib-stream"

    async def test_two_bots_each_get_their_own_ready(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """Two tokens connected at once are two users, each READY as itself."""
        other = fake.add_bot("bot-token-other", "helper")
        first = await clients.start(discord.Client(intents=intents()), TOKEN)
        second = await clients.start(discord.Client(intents=intents()), "bot-token-other")

        assert first.user is not None
        assert first.user.id == world.bot.id
        assert second.user is not None
        assert second.user.id == other.id
        readies = {e.user_id: e.data["user"]["id"] for e in fake.events(name="READY")}
        assert readies == {world.bot.id: str(world.bot.id), other.id: str(other.id)}
        assert second.get_guild(world.guild.id) is not None

    async def test_a_bad_token_is_refused(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """An unknown token fails login with discord.py's LoginFailure (401)."""
        fake.add_bot("known-token")
        client = discord.Client(intents=intents())
        try:
            await client.login("not-a-token")
        except discord.LoginFailure:
            pass
        else:
            raise AssertionError("login should have failed")
        finally:
            await client.close()
        assert fake.requests[-1].status == 401

    async def test_an_auto_sharded_client_connects(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """AutoShardedClient asks /gateway/bot for the shard count and the gateway URL."""
        client = await clients.start(discord.AutoShardedClient(intents=intents()), TOKEN)

        assert fake.requests_matching("GET", "/gateway/bot")
        assert fake.gateway.identifies[0]["shard"] == [0, 1]
        assert client.get_guild(world.guild.id) is not None


class TestMessageEvents:
    async def test_user_message_reaches_on_message_with_content(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """With the message content intent, the bot reads what a user wrote."""
        seen: asyncio.Queue[discord.Message] = asyncio.Queue()
        client = discord.Client(intents=intents(content=True))
        client.event(_collect(seen))
        await clients.start(client, TOKEN)

        await fake.user_says(world.channel.id, world.alice, "hello bot")

        async with asyncio.timeout(WAIT):
            message = await seen.get()
        assert message.content == "hello bot"
        assert message.author.id == world.alice.id
        assert isinstance(message.author, discord.Member)

    async def test_without_content_intent_content_is_blank_unless_mentioned(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """Without the intent, content is blanked, except when the bot is mentioned."""
        seen: asyncio.Queue[discord.Message] = asyncio.Queue()
        client = discord.Client(intents=intents(content=False))
        client.event(_collect(seen))
        await clients.start(client, TOKEN)

        await fake.user_says(world.channel.id, world.alice, "secret words")
        await fake.user_says(world.channel.id, world.alice, f"<@{world.bot.id}> hi")

        async with asyncio.timeout(WAIT):
            plain, mention = await seen.get(), await seen.get()
        assert plain.content == ""
        assert mention.content == f"<@{world.bot.id}> hi"
        assert [u.id for u in mention.mentions] == [world.bot.id]

    async def test_bot_messages_are_echoed_to_their_author(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """Like Discord, the gateway echoes a bot's own message back to it."""
        seen: asyncio.Queue[discord.Message] = asyncio.Queue()
        client = discord.Client(intents=intents())
        client.event(_collect(seen))
        await clients.start(client, TOKEN)
        channel = client.get_channel(world.channel.id)
        assert isinstance(channel, discord.TextChannel)

        sent = await channel.send("from the bot")

        async with asyncio.timeout(WAIT):
            echo = await seen.get()
        assert echo.id == sent.id
        assert echo.author.id == world.bot.id


class TestSessions:
    async def test_reconnect_resumes_and_replays_missed_events(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """Opcode 7 makes discord.py RESUME; the session and the event stream continue."""
        seen: asyncio.Queue[discord.Message] = asyncio.Queue()
        client = discord.Client(intents=intents())
        client.event(_collect(seen))
        resumed = asyncio.Event()

        @client.event
        async def on_resumed() -> None:
            resumed.set()

        await clients.start(client, TOKEN)
        session = await fake.wait_ready(world.bot.id)

        await fake.reconnect(world.bot.id)
        await fake.user_says(world.channel.id, world.alice, "while you were away")
        async with asyncio.timeout(WAIT):
            await resumed.wait()
            message = await seen.get()

        assert message.content == "while you were away"
        assert await fake.wait_ready(world.bot.id) is session
        assert len(fake.gateway.identifies) == 1

    async def test_a_lost_session_identifies_anew_and_misses_what_came_between(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """After ``lose_sessions`` the RESUME is refused: a second IDENTIFY and ``READY``
        (``on_connect`` again, no ``on_resumed``); a message posted in between is lost."""
        seen: asyncio.Queue[discord.Message] = asyncio.Queue()
        client = _NoIdentifyPause(intents=intents())
        client.event(_collect(seen))
        connects: list[int] = []
        resumes: list[int] = []

        @client.event
        async def on_connect() -> None:
            connects.append(1)

        @client.event
        async def on_resumed() -> None:
            resumes.append(1)

        await clients.start(client, TOKEN)
        first = await fake.wait_ready(world.bot.id)

        fake.gateway.lose_sessions(world.bot.id)
        await fake.user_says(world.channel.id, world.alice, "lost in the gap")
        await fake.wait_shards_ready(world.bot.id, [0], since=1)
        await fake.user_says(world.channel.id, world.alice, "after the new session")
        async with asyncio.timeout(WAIT):
            message = await seen.get()

        assert message.content == "after the new session"
        assert await fake.wait_ready(world.bot.id) is not first
        assert len(fake.gateway.identifies) == 2
        assert (len(connects), resumes) == (2, [])

    async def test_sync_means_the_client_cache_is_up_to_date(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """After ``fake.sync`` the client has parsed every event sent before it."""
        client = await clients.start(discord.Client(intents=intents()), TOKEN)
        channel = fake.add_text_channel(world.guild, "added-later")

        await fake.sync(world.bot.id)

        assert client.get_channel(channel.id) is not None


class _NoIdentifyPause(discord.Client):
    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """No 5 s pause before a second IDENTIFY: the fake has no identify rate limit."""


class TestHeartbeats:
    async def test_an_idle_client_is_never_told_it_cannot_keep_up(
        self,
        fake: FakeDiscord,
        world: World,
        clients: Clients,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """The keep-alive thread's heartbeat, ACKed before the thread records sending it,
        is not measured against the heartbeat before (a whole interval: "41.3s behind").

        The worst interleaving, forced without waiting for the thread: the heartbeat is
        sent as the thread sends it, and its send time is never recorded.
        """
        acks: asyncio.Queue[None] = asyncio.Queue()
        client = discord.Client(intents=intents(), enable_debug_events=True)

        @client.event
        async def on_socket_raw_receive(raw: str) -> None:  # dispatched once it was handled
            if json.loads(raw)["op"] == HEARTBEAT_ACK:
                acks.put_nowait(None)

        async def read_acks(count: int) -> None:
            async with asyncio.timeout(WAIT):
                for _ in range(count):
                    await acks.get()

        await clients.start(client, TOKEN)
        await fake.sync(world.bot.id)
        await read_acks(fake.gateway.heartbeat_acks(world.bot.id))  # nothing in flight now
        keep_alive = client.ws._keep_alive
        assert keep_alive is not None
        keep_alive._last_send = time.perf_counter() - INTERVAL  # the thread's previous beat

        await client.ws.send_heartbeat(keep_alive.get_payload())  # KeepAliveHandler.run's send
        await read_acks(1)

        assert keep_alive.latency < 1
        behind = [r.getMessage() for r in caplog.records if "Can't keep up" in r.getMessage()]
        assert behind == []

    async def test_a_requested_heartbeat_is_acked_without_asking_again(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """A probe's heartbeat is the answer to a request: ACKed, nothing left waiting."""
        await clients.start(discord.Client(intents=intents()), TOKEN)
        before = fake.gateway.heartbeat_acks(world.bot.id)
        await fake.sync(world.bot.id)
        assert fake.gateway.heartbeat_acks(world.bot.id) == before + 1
        (connection,) = [c for c in fake.gateway._connections if c.session]
        assert not connection.probes


def _collect(
    queue: asyncio.Queue[discord.Message],
) -> Callable[[discord.Message], Coroutine[Any, Any, None]]:
    """An ``on_message`` handler (discord.py registers events by function name)."""

    async def on_message(message: discord.Message) -> None:
        queue.put_nowait(message)

    return on_message


async def test_a_frame_sent_after_the_writer_stopped_does_not_hang_drain() -> None:
    """A bot killed mid-session: the write fails and the writer ends before the reader
    notices; a message posted meanwhile is dropped, and drain() returns."""

    class DeadSocket:
        async def send_str(self, _data: str) -> None:
            raise ConnectionResetError("the bot is gone")

    conn = _Connection(DeadSocket(), None)  # type: ignore[arg-type]
    conn.send({"op": 0, "d": "first"})
    await conn.write_loop()  # the write fails: the writer ends
    conn.send({"op": 0, "d": "posted while the reader had not noticed"})
    conn.stop()
    async with asyncio.timeout(5):
        await conn.queue.join()
    assert conn.queue.empty()
