"""Discord snowflakes: 64-bit ids that sort by creation time.

discord.py derives ``created_at`` from an id (``id >> 22`` plus Discord's epoch), so ids
must look real; tests also rely on ids growing in creation order.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["DISCORD_EPOCH_MS", "SnowflakeGenerator", "shard_of", "snowflake_time"]

DISCORD_EPOCH_MS = 1_420_070_400_000
"""2015-01-01T00:00:00Z in milliseconds, the zero of every snowflake."""


def shard_of(guild_id: int, shard_count: int) -> int:
    """The gateway shard Discord sends a guild's events on (DMs: guild 0, shard 0)."""
    return (guild_id >> 22) % shard_count


def snowflake_time(snowflake: int) -> datetime:
    """When the id was minted (millisecond precision, UTC)."""
    return datetime.fromtimestamp(((snowflake >> 22) + DISCORD_EPOCH_MS) / 1000, UTC)


class SnowflakeGenerator:
    """Mints strictly increasing snowflakes from a clock.

    Strictly increasing even when the clock stands still (a test's frozen clock) or goes
    backwards: the next id is never below the previous one plus one.
    """

    def __init__(self, *, worker_id: int = 1, process_id: int = 0) -> None:
        self._prefix = ((worker_id & 0x1F) << 17) | ((process_id & 0x1F) << 12)
        self._last = 0
        self._increment = 0

    def next(self, now: datetime) -> int:
        """A new id for something created at ``now``."""
        millis = max(int(now.timestamp() * 1000) - DISCORD_EPOCH_MS, 0)
        self._increment = (self._increment + 1) & 0xFFF
        candidate = (millis << 22) | self._prefix | self._increment
        self._last = max(candidate, self._last + 1)
        return self._last

    def advance_past(self, snowflake: int) -> None:
        """Never mint ``snowflake`` or anything below it (after loading saved ids)."""
        self._last = max(self._last, snowflake)
