"""Which guilds this process answers for: the shards it connects.

Discord splits a bot's guilds over gateway shards, guild ``g`` on shard
``(g >> 22) % shard_count``, and sends each shard only its guilds' events.
Several bot processes each connect some of the shards; a process must then
also confine its own background work (start-up recovery, expiry sweeps,
taking over a dead process's leases) to its guilds, or two processes would
both act on one guild. Work with no guild (a DM, a session never bound)
belongs to shard 0, as Discord's direct messages do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["EVERY_SHARD", "ShardSet", "shard_of"]


def shard_of(guild_id: int, shard_count: int) -> int:
    """The shard that carries ``guild_id``'s events (Discord's own formula)."""
    return (guild_id >> 22) % shard_count


@dataclass(frozen=True, slots=True)
class ShardSet:
    """The shards of one process, out of ``count`` in all."""

    count: int
    ids: frozenset[int]

    @classmethod
    def of(cls, count: int | None, ids: Iterable[int] | None) -> ShardSet:
        """From the ``[discord] shard_count`` / ``shard_ids`` settings; unset means all."""
        if count is None:
            return EVERY_SHARD
        return cls(count, frozenset(range(count) if ids is None else ids))

    @property
    def everything(self) -> bool:
        """Whether this process owns every shard (the one-process deployment)."""
        return len(self.ids) >= self.count

    def owns_guild(self, guild_id: int | None) -> bool:
        if self.everything:
            return True
        if guild_id is None:
            return 0 in self.ids
        return shard_of(guild_id, self.count) in self.ids

    def owns_scope(self, scope: str | int | None) -> bool:
        """A scope is a guild id (as text, the way sessions and flags store it) or None."""
        if self.everything or scope is None:
            return self.owns_guild(None)
        try:
            return self.owns_guild(int(scope))
        except ValueError:
            return self.owns_guild(None)  # not a guild: shard 0's, like a DM

    def describe(self) -> str:
        if self.everything:
            return "every shard"
        return f"shards {', '.join(map(str, sorted(self.ids)))} of {self.count}"


EVERY_SHARD = ShardSet(1, frozenset({0}))
"""One process with everything: what an unsharded bot is."""
