"""Which guilds a process answers for, and the settings that say so."""

from __future__ import annotations

import pytest

from core.config import parse_config
from core.errors import ConfigError
from core.sharding import EVERY_SHARD, ShardSet, shard_of

PG = "postgresql+asyncpg://bot@db/threadbound"


def test_a_guild_is_on_discords_shard() -> None:
    guild = (1234 << 22) | 99
    assert shard_of(guild, 4) == 1234 % 4
    shards = ShardSet.of(4, [2])
    assert shards.owns_guild((2 << 22) | 7)
    assert not shards.owns_guild((3 << 22) | 7)
    assert shards.owns_scope(str((6 << 22) | 1))  # 6 % 4 == 2: scopes are guild ids as text


def test_no_guild_is_shard_zeros_like_a_dm() -> None:
    assert ShardSet.of(2, [0]).owns_scope(None)
    assert not ShardSet.of(2, [1]).owns_scope(None)
    assert not ShardSet.of(2, [1]).owns_scope("not-a-guild")


def test_unset_means_every_shard() -> None:
    assert ShardSet.of(None, None) is EVERY_SHARD
    assert ShardSet.of(3, None).everything
    assert EVERY_SHARD.owns_scope("42")
    assert ShardSet.of(2, [0, 1]).describe() == "every shard"
    assert ShardSet.of(4, [1, 3]).describe() == "shards 1, 3 of 4"


class TestSettings:
    def test_shards_split_over_processes_on_postgresql(self) -> None:
        config = parse_config(
            {
                "store": {"url": PG, "schema": "bots", "lease_seconds": 5},
                "discord": {"shard_count": 4, "shard_ids": [0, 1]},
            },
            env={},
        )
        assert config.discord.shard_ids == [0, 1]
        assert config.store.schema_ == "bots"
        assert config.store.lease_seconds == 5.0

    @pytest.mark.parametrize(
        ("discord", "share"),
        [
            ({}, 45.0),
            ({"shard_count": 4}, 45.0),  # every shard in this one process
            ({"shard_count": 2, "shard_ids": [1]}, 22.5),
            ({"shard_count": 4, "shard_ids": [0, 1, 2], "requests_per_second": 40}, 30.0),
        ],
    )
    def test_processes_splitting_the_shards_split_the_tokens_rate(
        self, discord: dict, share: float
    ) -> None:
        """Discord's global limit is the token's: two processes each sending the whole
        45 a second would together go over its 50."""
        config = parse_config({"store": {"url": PG}, "discord": discord}, env={})
        assert config.discord.process_requests_per_second == share

    @pytest.mark.parametrize(
        ("discord", "says"),
        [
            ({"shard_ids": [0]}, "shard_count is not set"),
            ({"shard_count": 2, "shard_ids": [2]}, "from 0 to 1"),
            ({"shard_count": 2, "shard_ids": [1, 1]}, "repeated"),
            ({"shard_count": 2, "shard_ids": []}, "at least one"),
            ({"shard_count": 0}, "shard_count"),
        ],
    )
    def test_bad_shard_settings_are_explained(self, discord: dict, says: str) -> None:
        with pytest.raises(ConfigError, match=says):
            parse_config({"store": {"url": PG}, "discord": discord}, env={})

    def test_sqlite_refuses_part_of_the_shards_naming_postgresql(self) -> None:
        with pytest.raises(ConfigError, match="PostgreSQL") as err:
            parse_config({"discord": {"shard_count": 2, "shard_ids": [1]}}, env={})
        assert "discord.shard_ids" in str(err.value)
        # every shard in one process is fine on SQLite
        parse_config({"discord": {"shard_count": 2, "shard_ids": [0, 1]}}, env={})

    def test_a_schema_is_for_postgresql_only(self) -> None:
        with pytest.raises(ConfigError, match=r"store\.schema"):
            parse_config({"store": {"schema": "x"}}, env={})
        with pytest.raises(ConfigError, match=r"store\.schema"):
            parse_config({"store": {"url": PG, "schema": "no-dashes"}}, env={})
