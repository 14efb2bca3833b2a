"""Injected failures exercise discord.py's own retry logic against the fake.

discord.py sleeps inside its HTTP client before a retry: ``retry_after`` seconds for a
429 and ``1 + 2 * attempt`` seconds for a 500. Those real delays cannot be avoided
without patching discord.py, so 429s here carry ``retry_after=0.01`` and only one test
pays the single second of a 5xx retry.
"""

from __future__ import annotations

import asyncio

import discord
import pytest

from fakediscord import FakeDiscord
from tests.fakediscord.conftest import TOKEN, Clients, World, intents

RETRY_AFTER = 0.01
"""Seconds discord.py sleeps on our 429s: the smallest delay that still looks real."""


async def _channel(clients: Clients, world: World) -> discord.TextChannel:
    client = await clients.start(discord.Client(intents=intents()), TOKEN)
    channel = client.get_channel(world.channel.id)
    assert isinstance(channel, discord.TextChannel)
    return channel


class TestRateLimits:
    async def test_429_with_via_is_retried_after_retry_after(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """Discord's own 429 (``Via: 1.1 google`` + JSON) is slept out and retried."""
        channel = await _channel(clients, world)
        fake.fail_next("POST", "/channels/*/messages", 429, retry_after=RETRY_AFTER)

        sent = await channel.send("eventually")

        attempts = fake.requests_matching("POST", f"/channels/{channel.id}/messages")
        assert [r.status for r in attempts] == [429, 200]
        assert [m.id for m in fake.messages_in(channel.id)] == [sent.id]

    async def test_global_429_is_retried(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """A global rate limit blocks, then lets the request through."""
        channel = await _channel(clients, world)
        fake.fail_next("POST", "/channels/*/messages", 429, retry_after=RETRY_AFTER, global_=True)

        await channel.send("after the global limit")

        assert [r.status for r in fake.requests_matching("POST", "/channels/")] == [429, 200]

    async def test_429_without_via_is_a_cloudflare_ban_and_raises(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """Without ``Via`` discord.py assumes a Cloudflare ban: no retry, HTTPException."""
        channel = await _channel(clients, world)
        fake.fail_next("POST", "/channels/*/messages", 429, via_header=False)

        with pytest.raises(discord.HTTPException) as caught:
            await channel.send("banned")

        assert caught.value.status == 429
        assert len(fake.requests_matching("POST", "/channels/")) == 1
        await channel.send("the ban was a one-off")

    async def test_webhook_429_is_retried(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """The webhook client has its own retry loop; it survives a 429 too."""
        channel = await _channel(clients, world)
        webhook = await channel.create_webhook(name="persona")
        fake.fail_next("POST", "/webhooks/*/*", 429, retry_after=RETRY_AFTER)

        await webhook.send("persona speaks", wait=True)

        assert [r.status for r in fake.requests_matching("POST", "/webhooks/")] == [429, 200]


class TestServerErrors:
    async def test_500_then_success_is_survived(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """A 500 is retried by discord.py (after its fixed one-second backoff)."""
        channel = await _channel(clients, world)
        fake.fail_next("POST", "/channels/*/messages", 500)

        await channel.send("second time lucky")

        assert [r.status for r in fake.requests_matching("POST", "/channels/")] == [500, 200]

    async def test_injected_discord_codes_reach_the_caller(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """Injected 404/10003 and 403/50013 surface as discord.py's NotFound/Forbidden."""
        channel = await _channel(clients, world)
        fake.fail_next("POST", f"/channels/{channel.id}/messages", 404, code=10003)
        fake.fail_next("POST", f"/channels/{channel.id}/messages", 403, code=50013)

        with pytest.raises(discord.NotFound) as missing:
            await channel.send("a")
        with pytest.raises(discord.Forbidden) as forbidden:
            await channel.send("b")

        assert (missing.value.code, missing.value.text) == (10003, "Unknown Channel")
        assert (forbidden.value.code, forbidden.value.text) == (50013, "Missing Permissions")


class TestHold:
    async def test_a_held_route_waits_for_release(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """A gate parks the request (recorded, unanswered) until the test releases it."""
        channel = await _channel(clients, world)
        gate = fake.hold("POST", "/channels/*/messages")

        send = asyncio.create_task(channel.send("slow"))
        try:
            await gate.wait_entered()
            assert not send.done()
            assert fake.requests_matching("POST", "/channels/")[0].status is None
            gate.release()
            async with asyncio.timeout(5):
                sent = await send
        finally:
            send.cancel()
            await asyncio.gather(send, return_exceptions=True)
        assert fake.message(sent.id).content == "slow"
