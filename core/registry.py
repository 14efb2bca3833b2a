"""One object per (channel, account): the shape of every per-account registry.

The binding adapters (a channel's side effects) and the completion sinks (where
announcements are posted) are both looked up by the channel and account of a
conversation; both must never have two live instances for one pair, or one of
them keeps acting with a stale client (and token). One small generic class
serves both.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

from core.errors import ThreadboundError

__all__ = ["PerAccount", "PerAccountItem"]


class PerAccountItem(Protocol):
    @property
    def channel(self) -> str: ...

    @property
    def account_id(self) -> str: ...


T = TypeVar("T", bound=PerAccountItem)


class PerAccount(Generic[T]):
    """Exactly one item per (channel, account_id), channel names case-insensitive.

    Registering a second item for a pair is an error unless ``replace=True``: a
    silent second instance is how a stale token kept being used upstream.
    """

    def __init__(self, what: str = "item") -> None:
        self._what = what
        self._items: dict[tuple[str, str], T] = {}

    def register(self, item: T, *, replace: bool = False) -> None:
        key = (item.channel.lower(), item.account_id)
        if key in self._items and not replace and self._items[key] is not item:
            raise ThreadboundError(
                f"a {self._what} for {key[0]}/{key[1]} is already registered; "
                "reuse it, or pass replace=True to swap it"
            )
        self._items[key] = item

    def get(self, channel: str, account_id: str, /) -> T | None:
        return self._items.get((channel.lower(), account_id))

    def __iter__(self) -> Iterator[T]:
        return iter(self._items.values())
