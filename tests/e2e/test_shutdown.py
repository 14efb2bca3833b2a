"""Stopping the bot lets posts already under way land before its client closes (fake Discord).

A farewell posted after discord.py's HTTP session closed is lost ("Session is
closed"); :func:`bot.app.shut_down` drains first. Whether the stop closed the
client or began to wait is told apart by events and the fake clock, never by
sleeping: waiting shows as a sleeper on the services' clock.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.app import shut_down
from core.providers.scripted import Step
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import TIMEOUT, bound_thread

DRAIN = 30.0
FAREWELL = "no longer bound"


def watch_close(bot: Bot, monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """An event set when the client's ``close`` is called."""
    closing = asyncio.Event()
    close = bot.client.close

    async def recorded() -> None:
        closing.set()
        await close()

    monkeypatch.setattr(bot.client, "close", recorded)
    return closing


async def first_of(*waits: Any) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        async with asyncio.timeout(TIMEOUT):
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


async def farewell_held(bot: Bot) -> tuple[asyncio.Task[Any], Any, int]:
    """A bound thread whose binding is ending with its farewell held at the fake's door."""
    record, thread = await bound_thread(bot)
    gate = bot.fake.hold("POST", f"/channels/{thread}/messages")
    ending = asyncio.create_task(bot.services.bindings.unbind(record.binding_id, reason="done"))
    async with asyncio.timeout(TIMEOUT):
        await gate.wait_entered()
    return ending, gate, thread


async def test_a_farewell_under_way_lands_before_the_client_closes(
    start_bot: StartBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = await start_bot([Step(text="hello")])
    ending, gate, thread = await farewell_held(bot)
    closing = watch_close(bot, monkeypatch)
    sleepers = bot.clock.sleepers

    stopping = asyncio.create_task(shut_down(bot.services, [bot.client], drain_seconds=DRAIN))
    await first_of(closing.wait(), bot.clock.wait_for_sleepers(sleepers + 1))
    assert not closing.is_set(), "the client closed with a farewell still on its way"
    gate.release()
    async with asyncio.timeout(TIMEOUT):
        await stopping
        (ended,) = await ending

    assert closing.is_set()
    assert ended.status == "ended"
    assert any(FAREWELL in m.content for m in bot.fake.messages_in(thread))


async def test_a_post_that_never_lands_holds_the_stop_only_for_the_drain_time(
    start_bot: StartBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = await start_bot([Step(text="hello")])
    ending, gate, thread = await farewell_held(bot)
    closing = watch_close(bot, monkeypatch)
    sleepers = bot.clock.sleepers

    stopping = asyncio.create_task(shut_down(bot.services, [bot.client], drain_seconds=DRAIN))
    async with asyncio.timeout(TIMEOUT):
        await bot.clock.wait_for_sleepers(sleepers + 1)
    await bot.clock.advance(DRAIN - 1)
    assert not closing.is_set()
    await bot.clock.advance(1)
    async with asyncio.timeout(TIMEOUT):
        await stopping
    assert closing.is_set()
    gate.release()
    async with asyncio.timeout(TIMEOUT):
        (ended,) = await ending  # ended all the same; only its farewell was lost
    assert ended.status == "ended"
    assert not any(FAREWELL in m.content for m in bot.fake.messages_in(thread))


async def test_nothing_under_way_stops_at_once(start_bot: StartBot) -> None:
    bot = await start_bot([])
    sleepers = bot.clock.sleepers
    async with asyncio.timeout(TIMEOUT):
        await shut_down(bot.services, [bot.client], drain_seconds=DRAIN)
    assert bot.client.is_closed()
    assert bot.clock.sleepers == sleepers
