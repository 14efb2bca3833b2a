"""A thread's messages go in order through one chain; a chain cut short leaves nothing
half-made behind it."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from adapters.discord.presenter import after
from core.errors import DeliveryError


async def test_work_waits_for_what_was_before_it() -> None:
    order: list[str] = []
    gate = asyncio.Event()

    async def first() -> None:
        await gate.wait()
        order.append("first")

    async def second() -> None:
        order.append("second")

    earlier = asyncio.ensure_future(first())
    later = asyncio.ensure_future(after(earlier, second()))
    await asyncio.sleep(0)
    assert order == []
    gate.set()
    await later
    assert order == ["first", "second"]


async def test_a_failed_earlier_step_does_not_stop_the_next() -> None:
    async def fails() -> None:
        raise DeliveryError("refused")

    async def then() -> str:
        return "sent"

    # a delivery failure is logged, not raised
    earlier = asyncio.ensure_future(after(None, fails()))
    await after(earlier, then())
    assert earlier.done()
    assert earlier.exception() is None


async def test_a_chain_cancelled_before_its_turn_closes_the_work_unstarted() -> None:
    """The bug: cancelled while waiting, the work was dropped unawaited, and the suite's
    teardown printed "coroutine ... was never awaited" for status lines and stream closes."""
    never = asyncio.get_running_loop().create_future()

    async def work() -> None:
        raise AssertionError("must not run")

    coroutine = work()
    chained = asyncio.ensure_future(after(never, coroutine))
    await asyncio.sleep(0)
    chained.cancel()
    with pytest.raises(asyncio.CancelledError):
        await chained
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED
