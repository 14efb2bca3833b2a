"""The fake's building blocks on their own: ids, serialisation, fault matching."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from fakediscord import FakeDiscord
from fakediscord.snowflake import SnowflakeGenerator, snowflake_time


class FrozenClock:
    def now(self) -> datetime:
        return datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class TestSnowflakes:
    def test_ids_increase_even_when_the_clock_stands_still(self) -> None:
        """A frozen clock still yields strictly increasing, realistic ids."""
        ids = SnowflakeGenerator()
        now = FrozenClock().now()
        minted = [ids.next(now) for _ in range(5000)]

        assert minted == sorted(set(minted))
        assert snowflake_time(minted[0]) == now
        assert minted[-1] < 2**63


class TestState:
    async def test_state_serialises_to_json(self) -> None:
        """The whole state dumps to JSON (the playground will save it to a file)."""
        fake = FakeDiscord(clock=FrozenClock())
        fake.add_bot("t")
        guild = fake.add_guild("g")
        channel = fake.add_text_channel(guild, "c")
        user = fake.add_member(guild, "u", admin=True)
        await fake.user_says(channel, user, "hello")

        data = json.loads(json.dumps(fake.state.to_dict()))

        [message] = data["messages"].values()
        assert message["content"] == "hello"
        assert message["timestamp"] == "2026-01-02T03:04:05+00:00"
        assert data["guilds"][str(guild.id)]["name"] == "g"


class TestFaultMatching:
    def test_globs_and_regexes_match_the_api_path(self) -> None:
        """Globs match whole paths; regexes must fullmatch; faults are used up."""
        fake = FakeDiscord()
        faults = fake.faults
        fake.fail_next("POST", "/channels/*/messages", 500, times=2)
        fake.fail_next("*", re.compile(r"/webhooks/\d+/[^/]+"), 404, code=10015)

        assert faults.take("POST", "/channels/1/messages/2") is None
        assert faults.take("POST", "/channels/1/messages") is not None
        assert faults.take("POST", "/channels/9/messages") is not None
        assert faults.take("POST", "/channels/9/messages") is None
        assert faults.take("GET", "/webhooks/1/abc/messages/2") is None
        fault = faults.take("GET", "/webhooks/1/abc")
        assert fault is not None
        assert fault.code == 10015
