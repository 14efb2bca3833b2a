"""Time as a port, so tests drive timers with a fake clock instead of sleeping."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "FakeClock", "SystemClock", "utcnow"]


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


class Clock(Protocol):
    """What timed code needs: the current UTC time and a way to wait."""

    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``; cancellable like ``asyncio.sleep``."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return utcnow()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock:
    """A clock that only moves when a test calls :meth:`advance`.

    Sleepers wake in deadline order when the clock passes their deadline, so a
    test can step a periodic task exactly once without any real waiting.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._counter = itertools.count()
        self._sleeper_added = asyncio.Event()

    def now(self) -> datetime:
        return self._now

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        deadline = self._now + timedelta(seconds=seconds)
        heapq.heappush(self._sleepers, (deadline, next(self._counter), future))
        self._sleeper_added.set()
        await future

    @property
    def sleepers(self) -> int:
        """How many tasks are waiting on this clock (cancelled ones excluded)."""
        return sum(1 for _, _, f in self._sleepers if not f.done())

    async def wait_for_sleepers(self, count: int = 1) -> None:
        """Yield to the loop until at least ``count`` tasks sleep on this clock."""
        while self.sleepers < count:
            self._sleeper_added.clear()
            await self._sleeper_added.wait()

    async def advance(self, seconds: float) -> None:
        """Move time forward and let every sleeper whose deadline passed run."""
        self._now += timedelta(seconds=seconds)
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)
        # Let the woken tasks run up to their next await.
        for _ in range(10):
            await asyncio.sleep(0)
