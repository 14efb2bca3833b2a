"""A change signal: synchronous code announces "something changed", waiters re-check.

The fake mutates its state from plain functions (REST handlers, the test driver), and
tests wait for conditions over that state. An ``asyncio.Condition`` would force every
mutation to be async; this signal is notified synchronously and woken waiters simply
re-evaluate their predicate, so waiting never needs a sleep or a poll interval.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

__all__ = ["Signal"]

T = TypeVar("T")


class Signal:
    """Wakes every waiter whenever :meth:`notify` is called."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.count = 0
        """Notifications so far: a reader that saw the same count knows nothing changed."""

    def notify(self) -> None:
        """Wake the current waiters; later waiters wait for the next notification."""
        self.count += 1
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait_next(self) -> None:
        """Return at the next :meth:`notify` after this call (not one before it)."""
        await self._event.wait()

    async def wait_for(self, probe: Callable[[], T | None]) -> T:
        """Return the first non-None ``probe()`` result, re-probing after each change.

        Unbounded: callers put it under ``asyncio.timeout`` so a missing event fails the
        test instead of hanging it.
        """
        while True:
            found = probe()
            if found is not None:
                return found
            await self._event.wait()
