"""Discord's rate limits in the fake: the limiter on an injected clock, the middleware over
raw HTTP, and the real discord.py client pacing itself by the headers.

The unit tests never sleep (the clock is a number the test moves). The discord.py tests
do sleep, as discord.py does: their buckets are shrunk (5 per 0.5 s instead of 5 per 5 s)
so each waits well under two seconds.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import discord
import pytest

from fakediscord import Bucket, FakeDiscord, RateLimiter, RateLimits
from fakediscord.server import DEFAULT_RATE_LIMITS
from tests.fakediscord.conftest import TOKEN, Clients, World, intents, running_fake

WALL = 1_700_000_000.0
"""The injected epoch time: ``X-RateLimit-Reset`` = this + ``Reset-After``."""


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


def limiter(clock: Clock, config: RateLimits | None = None) -> RateLimiter:
    return RateLimiter(config or RateLimits.discord(), clock=clock, wall=lambda: WALL)


def post_message(limits: RateLimiter, channel: int = 1, token: str | None = "a") -> Any:
    return limits.check(token, "POST", f"/channels/{channel}/messages")


class TestGlobalLimit:
    def test_the_51st_request_in_a_second_is_a_global_429(self, clock: Clock) -> None:
        """50 requests to 50 channels pass; the 51st is refused as Discord refuses it."""
        limits = limiter(clock)
        passed = [limits.check("a", "GET", f"/channels/{i}").allowed for i in range(50)]
        clock.advance(0.25)

        refused = limits.check("a", "GET", "/channels/51")

        assert all(passed)
        assert (refused.allowed, refused.status, refused.scope) == (False, 429, "global")
        assert refused.body == {
            "message": "You are being rate limited.",
            "retry_after": 0.75,
            "global": True,
        }
        assert refused.headers["X-RateLimit-Global"] == "true"
        assert refused.headers["X-RateLimit-Scope"] == "global"
        assert refused.headers["Retry-After"] == "1"
        assert refused.headers["Via"] == "1.1 google"  # discord.py retries only with Via
        assert "X-RateLimit-Bucket" not in refused.headers  # as in Discord's example

    def test_the_window_resets_after_a_second(self, clock: Clock) -> None:
        limits = limiter(clock, RateLimits.discord(global_per_second=2))
        assert [limits.check("a", "GET", f"/channels/{i}").allowed for i in range(3)] == [
            True,
            True,
            False,
        ]
        clock.advance(0.999)
        assert not limits.check("a", "GET", "/channels/9").allowed
        clock.advance(0.001)
        assert limits.check("a", "GET", "/channels/9").allowed

    def test_each_bot_token_has_its_own_global_limit(self, clock: Clock) -> None:
        limits = limiter(clock, RateLimits.discord(global_per_second=1))
        assert limits.check("a", "GET", "/users/@me").allowed
        assert not limits.check("a", "GET", "/gateway/bot").allowed
        assert limits.check("b", "GET", "/users/@me").allowed

    def test_interaction_callbacks_never_hit_the_global_limit(self, clock: Clock) -> None:
        """Callbacks pass while the bot is globally limited, and take none of its budget."""
        limits = limiter(clock, RateLimits.discord(global_per_second=1))
        callbacks = [
            limits.check(None, "POST", f"/interactions/{i}/token{i}/callback").allowed
            for i in range(100)
        ]
        assert all(callbacks)
        assert limits.check(None, "GET", "/gateway").allowed  # the callbacks took none of it
        assert limits.check("a", "GET", "/users/@me").allowed
        assert not limits.check("a", "GET", "/gateway/bot").allowed
        assert limits.check(None, "POST", "/interactions/500/t/callback").allowed

    def test_webhook_token_requests_are_outside_the_global_limit(self, clock: Clock) -> None:
        limits = limiter(clock, RateLimits.discord(global_per_second=1))
        sends = [limits.check(None, "POST", f"/webhooks/{i}/tok").allowed for i in range(10)]
        assert all(sends)
        assert limits.check(None, "GET", "/gateway").allowed


class TestRouteBuckets:
    def test_the_6th_message_in_5_seconds_is_a_user_429(self, clock: Clock) -> None:
        limits = limiter(clock)
        passed = [post_message(limits) for _ in range(5)]
        clock.advance(1.5)

        refused = post_message(limits)

        assert [d.headers["X-RateLimit-Remaining"] for d in passed] == ["4", "3", "2", "1", "0"]
        assert (refused.allowed, refused.status, refused.scope) == (False, 429, "user")
        assert refused.body == {
            "message": "You are being rate limited.",
            "retry_after": 3.5,
            "global": False,
        }
        assert refused.headers == {
            "X-RateLimit-Limit": "5",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": f"{WALL + 3.5:.3f}",
            "X-RateLimit-Reset-After": "3.500",
            "X-RateLimit-Bucket": passed[0].headers["X-RateLimit-Bucket"],
            "Retry-After": "4",
            "Via": "1.1 google",
            "X-RateLimit-Scope": "user",
        }

    def test_a_window_is_fixed_and_refills_at_once(self, clock: Clock) -> None:
        """Remaining comes back whole when Reset-After has elapsed, not bit by bit."""
        limits = limiter(clock)
        for _ in range(5):
            post_message(limits)
        clock.advance(4.999)
        assert not post_message(limits).allowed
        clock.advance(0.001)
        again = post_message(limits)
        assert again.allowed
        assert again.headers["X-RateLimit-Remaining"] == "4"
        assert again.headers["X-RateLimit-Reset-After"] == "5.000"

    def test_another_channel_has_its_own_bucket_under_the_same_hash(self, clock: Clock) -> None:
        """Discord's hash names the bucket without its channel; the counts are per channel."""
        limits = limiter(clock)
        for _ in range(5):
            post_message(limits, channel=1)
        elsewhere = post_message(limits, channel=2)
        other_bot = post_message(limits, channel=1, token="b")

        assert not post_message(limits, channel=1).allowed
        assert elsewhere.allowed
        assert other_bot.allowed
        assert elsewhere.headers["X-RateLimit-Remaining"] == "4"
        first = limits.check("a", "POST", "/channels/3/messages").headers["X-RateLimit-Bucket"]
        assert elsewhere.headers["X-RateLimit-Bucket"] == first

    def test_message_create_and_edit_are_separate_buckets(self, clock: Clock) -> None:
        limits = limiter(clock)
        for _ in range(5):
            post_message(limits)
        edit = limits.check("a", "PATCH", "/channels/1/messages/7")
        assert edit.allowed
        assert edit.headers["X-RateLimit-Bucket"] != post_message(limits).headers.get(
            "X-RateLimit-Bucket"
        )

    def test_reactions_add_and_remove_share_1_per_quarter_second(self, clock: Clock) -> None:
        limits = limiter(clock)
        add = limits.check("a", "PUT", "/channels/1/messages/2/reactions/👍/@me")
        remove = limits.check("a", "DELETE", "/channels/1/messages/3/reactions/👍/@me")
        clock.advance(0.25)
        later = limits.check("a", "DELETE", "/channels/1/messages/3/reactions/👍/@me")

        assert (add.allowed, remove.allowed, later.allowed) == (True, False, True)
        assert add.headers["X-RateLimit-Limit"] == "1"
        assert isinstance(remove.body, dict)
        assert remove.body["retry_after"] == 0.25

    def test_webhooks_take_5_per_2_seconds_per_webhook(self, clock: Clock) -> None:
        """Execute and message edits share the webhook's bucket; id + token is the key."""
        limits = limiter(clock)
        sends = [limits.check(None, "POST", "/webhooks/1/tok").allowed for _ in range(4)]
        edit = limits.check("a", "PATCH", "/webhooks/1/tok/messages/9")  # a bot token: same
        refused = limits.check(None, "POST", "/webhooks/1/tok")

        assert all(sends)
        assert edit.allowed
        assert (refused.status, refused.scope) == (429, "user")
        assert refused.headers["X-RateLimit-Limit"] == "5"
        assert refused.headers["X-RateLimit-Reset-After"] == "2.000"
        assert limits.check(None, "POST", "/webhooks/1/other").allowed
        assert limits.check(None, "POST", "/webhooks/2/tok").allowed
        clock.advance(2)
        assert limits.check(None, "POST", "/webhooks/1/tok").allowed

    def test_other_routes_get_a_generous_default_bucket(self, clock: Clock) -> None:
        limits = limiter(clock, RateLimits.discord(global_per_second=100))
        answers = [limits.check("a", "GET", "/channels/1/messages") for _ in range(51)]
        assert [a.allowed for a in answers].count(True) == 50
        assert answers[0].headers["X-RateLimit-Limit"] == "50"
        assert answers[-1].scope == "user"

    def test_a_shared_bucket_limits_every_caller_and_says_so(self, clock: Clock) -> None:
        """A per-resource limit: scope ``shared``, Discord's "resource" message."""
        shared = Bucket("slow", ("POST",), ("/channels/{channel_id}/threads",), 1, 10, "shared")
        limits = limiter(clock, RateLimits.discord(buckets=(shared,)))
        assert limits.check("a", "POST", "/channels/1/threads").allowed

        refused = limits.check("b", "POST", "/channels/1/threads")

        assert refused.scope == "shared"
        assert refused.headers["X-RateLimit-Scope"] == "shared"
        assert refused.body == {
            "message": "The resource is being rate limited.",
            "retry_after": 10.0,
            "global": False,
        }

    def test_success_headers_count_down_to_the_reset(self, clock: Clock) -> None:
        limits = limiter(clock)
        first = post_message(limits)
        clock.advance(1.2345)
        second = post_message(limits)

        assert first.headers["X-RateLimit-Reset-After"] == "5.000"
        assert first.headers["X-RateLimit-Reset"] == f"{WALL + 5:.3f}"
        assert second.headers["X-RateLimit-Remaining"] == "3"
        assert second.headers["X-RateLimit-Reset-After"] == "3.766"  # rounded up, never early
        assert set(first.headers) == {
            "X-RateLimit-Limit",
            "X-RateLimit-Remaining",
            "X-RateLimit-Reset",
            "X-RateLimit-Reset-After",
            "X-RateLimit-Bucket",
        }


class TestConfig:
    def test_off_allows_everything_without_headers(self, clock: Clock) -> None:
        limits = limiter(clock, RateLimits.off())
        answers = [post_message(limits) for _ in range(100)]
        assert all(a.allowed and not a.headers for a in answers)

    def test_a_fake_limits_by_the_default_unless_told(self) -> None:
        """Every fake limits as Discord does unless it is told otherwise."""
        assert FakeDiscord().rate_limits.config is DEFAULT_RATE_LIMITS
        assert RateLimits.discord() == DEFAULT_RATE_LIMITS
        assert FakeDiscord(rate_limits=RateLimits.off()).rate_limits.config == RateLimits.off()

    def test_discord_sizes(self) -> None:
        limits = RateLimits.discord()
        sizes = {b.name: (b.limit, b.per) for b in limits.buckets}
        assert limits.global_per_second == 50
        assert limits.invalid_request_limit == 10_000
        assert sizes["message create"] == (5, 5.0)
        assert sizes["message edit"] == (5, 5.0)
        assert sizes["reaction"] == (1, 0.25)
        assert sizes["thread create"] == (10, 10.0)
        assert sizes["channel create"] == (10, 10.0)
        assert sizes["webhook"] == (5, 2.0)
        assert all(b.source for b in limits.buckets)

    def test_resized_changes_one_bucket(self) -> None:
        limits = RateLimits.discord().resized("message create", 2, per=0.5)
        assert limits.bucket("message create").limit == 2
        assert limits.bucket("message create").per == 0.5
        assert limits.bucket("message edit").limit == 5
        with pytest.raises(KeyError):
            limits.resized("no such bucket", 1)

    def test_configure_starts_every_window_afresh(self, clock: Clock) -> None:
        limits = limiter(clock, RateLimits.off())
        limits.configure(RateLimits.discord().resized("message create", 1))
        assert post_message(limits).allowed
        assert not post_message(limits).allowed


class TestCounting:
    def test_invalid_requests_over_a_sliding_10_minutes(self, clock: Clock) -> None:
        """401, 403 and 429 count; other statuses and shared-scope 429s do not."""
        limits = limiter(clock)
        limits.count(401)
        clock.advance(100)
        limits.count(403)
        limits.count(429, "user")
        limits.count(404)
        limits.count(200)
        limits.count(429, "shared")  # "not counted against you" (Discord's documentation)
        assert limits.invalid_requests() == 3
        assert limits.invalid_requests(window_seconds=50) == 2

        clock.advance(499.999)
        assert limits.invalid_requests() == 3
        clock.advance(0.001)  # the 401 is now 600 s old
        assert limits.invalid_requests() == 2
        clock.advance(100)
        assert limits.invalid_requests() == 0

    def test_429s_are_counted_per_scope(self, clock: Clock) -> None:
        limits = limiter(clock)
        for scope in ("user", "user", "global", "shared", None):
            limits.count(429, scope)
        assert limits.counts_by_scope == {"user": 2, "global": 1, "shared": 1}
        assert limits.total_429 == 5

    def test_too_many_invalid_requests_are_a_cloudflare_ban(self, clock: Clock) -> None:
        """Past the invalid-request limit every request gets Cloudflare's plain-text 429
        (no Via: discord.py raises it), until the window slides past."""
        limits = limiter(clock, RateLimits.discord(invalid_request_limit=3))
        for _ in range(3):
            limits.count(403)
            clock.advance(10)

        banned = post_message(limits)

        assert (banned.allowed, banned.status, banned.scope) == (False, 429, None)
        assert banned.body == "error code: 1015"
        assert "Via" not in banned.headers
        assert banned.headers["Retry-After"] == "570"  # the first 403 leaves the window then
        limits.count(429, None, ban=True)
        assert limits.invalid_requests() == 3  # the ban's own answers do not prolong it
        clock.advance(570)
        assert post_message(limits).allowed


@pytest.fixture
async def unlimited() -> AsyncIterator[FakeDiscord]:
    async with running_fake(rate_limits=RateLimits.off()) as server:
        yield server


@pytest.fixture
async def limited() -> AsyncIterator[FakeDiscord]:
    """A fake with Discord's limits, the message bucket shrunk to 5 per 0.5 s."""
    config = RateLimits.discord().resized("message create", 5, per=0.5)
    async with running_fake(rate_limits=config) as server:
        yield server


async def _raw(
    fake: FakeDiscord, method: str, path: str, token: str | None = TOKEN, body: Any = None
) -> tuple[int, dict[str, str], Any]:
    headers = {"Authorization": f"Bot {token}"} if token else {}
    url = f"{fake.base_url}/api/v10{path}"
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, url, headers=headers, json=body) as response,
    ):
        text = await response.text()
        data = json.loads(text) if response.content_type == "application/json" else text
        return response.status, dict(response.headers), data


class TestMiddleware:
    async def test_a_429_is_recorded_and_counted(self, limited: FakeDiscord) -> None:
        limited.add_bot(TOKEN)
        guild = limited.add_guild("g")
        channel = limited.add_text_channel(guild, "c")
        path = f"/channels/{channel.id}/messages"
        answers = [await _raw(limited, "POST", path, body={"content": "x"}) for _ in range(6)]

        assert [status for status, _, _ in answers] == [200] * 5 + [429]
        _, headers, body = answers[-1]
        assert headers["X-RateLimit-Scope"] == "user"
        assert body["global"] is False
        assert answers[0][1]["X-RateLimit-Remaining"] == "4"
        recorded = limited.requests_matching("POST", path)
        assert [r.status for r in recorded] == [200] * 5 + [429]
        assert [r.rate_limited for r in recorded] == [None] * 5 + ["user"]
        assert len(limited.messages_in(channel)) == 5
        assert limited.rate_limits.counts_by_scope == {"user": 1}
        assert limited.rate_limits.invalid_requests() == 1

    async def test_auth_failures_and_permission_errors_are_invalid_requests(
        self, unlimited: FakeDiscord
    ) -> None:
        """Counted with limits off too: every 401/403 the fake sends."""
        fake = unlimited
        fake.add_bot(TOKEN)
        assert (await _raw(fake, "GET", "/users/@me", token="wrong"))[0] == 401
        assert (await _raw(fake, "GET", "/users/@me", token=None))[0] == 401
        assert (await _raw(fake, "GET", "/applications/1/commands"))[0] == 403
        status, headers, _ = await _raw(fake, "GET", "/users/@me")

        assert status == 200
        assert not any(h.startswith("X-RateLimit") for h in headers)  # off: no headers
        assert fake.rate_limits.invalid_requests() == 3
        assert fake.rate_limits.total_429 == 0

    async def test_injected_429s_are_counted_by_their_scope(self, unlimited: FakeDiscord) -> None:
        fake = unlimited
        fake.add_bot(TOKEN)
        fake.fail_next("GET", "/users/@me", 429, retry_after=0.01, global_=True)
        fake.fail_next("GET", "/gateway/bot", 429, via_header=False)
        await _raw(fake, "GET", "/users/@me")
        await _raw(fake, "GET", "/gateway/bot")
        assert fake.rate_limits.counts_by_scope == {"global": 1}
        assert fake.rate_limits.total_429 == 2
        assert fake.rate_limits.invalid_requests() == 2

    async def test_every_answer_carries_its_bucket_headers(self, limited: FakeDiscord) -> None:
        """Errors too: the bucket was spent before the route answered 404."""
        limited.add_bot(TOKEN)
        status, headers, _ = await _raw(limited, "GET", "/channels/424242")
        assert status == 404
        assert headers["X-RateLimit-Limit"] == "50"
        assert headers["X-RateLimit-Remaining"] == "49"
        assert float(headers["X-RateLimit-Reset"]) == pytest.approx(time.time() + 1, abs=1)


class TestDiscordPy:
    """The real client against Discord's limits: it reads the headers and waits itself."""

    @pytest.fixture
    async def fake(self) -> AsyncIterator[FakeDiscord]:
        """Overrides the conftest's ``fake`` (so ``world`` and ``clients`` use it)."""
        config = RateLimits.discord().resized("message create", 5, per=0.5)
        async with running_fake(rate_limits=config.resized("webhook", 5, per=0.5)) as server:
            yield server

    async def test_sends_past_a_bucket_wait_for_its_reset(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """7 messages into one channel: all sent, the 6th only once the window reset."""
        client = await clients.start(discord.Client(intents=intents()), TOKEN)
        channel = client.get_channel(world.channel.id)
        assert isinstance(channel, discord.TextChannel)

        for i in range(7):
            await channel.send(f"message {i}")

        assert [m.content for m in fake.messages_in(world.channel)] == [
            f"message {i}" for i in range(7)
        ]
        posts = [
            r
            for r in fake.requests_matching("POST", f"/channels/{world.channel.id}/messages")
            if r.status == 200
        ]
        assert fake.rate_limits.counts_by_scope["user"] <= 1  # discord.py waited beforehand
        waited = (posts[5].at - posts[4].at).total_seconds()
        assert 0.3 < waited < 2.0

    async def test_webhook_sends_wait_for_the_webhook_bucket(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        client = await clients.start(discord.Client(intents=intents()), TOKEN)
        channel = client.get_channel(world.channel.id)
        assert isinstance(channel, discord.TextChannel)
        webhook = await channel.create_webhook(name="persona")

        for i in range(7):
            await webhook.send(f"persona {i}", wait=True)

        assert len(fake.messages_in(world.channel)) == 7
        assert fake.rate_limits.counts_by_scope["user"] <= 1

    async def test_a_burst_past_the_global_limit_is_retried(
        self, fake: FakeDiscord, world: World, clients: Clients
    ) -> None:
        """8 sends at once into 8 channels with 5 requests a second: the surplus gets
        global 429s, discord.py holds every request for ``retry_after`` and retries."""
        targets = [fake.add_text_channel(world.guild, f"c{i}") for i in range(8)]
        client = await clients.start(discord.Client(intents=intents()), TOKEN)
        fake.rate_limits.configure(RateLimits.discord(global_per_second=5))
        channels = [client.get_channel(t.id) for t in targets]

        started = time.monotonic()
        await asyncio.gather(*(c.send("burst") for c in channels))  # type: ignore[union-attr]
        elapsed = time.monotonic() - started

        assert all(len(fake.messages_in(t)) == 1 for t in targets)
        assert fake.rate_limits.counts_by_scope["global"] >= 3
        assert fake.rate_limits.counts_by_scope["user"] == 0
        refused = [r for r in fake.requests if r.status == 429]
        assert {r.rate_limited for r in refused} == {"global"}
        assert elapsed < 3.0
