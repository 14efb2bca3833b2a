"""Stopping the bot lets posts already under way land before its client closes (fake Discord).

A farewell posted after discord.py's HTTP session closed is lost ("Session is
closed"); :func:`bot.app.shut_down` drains first. Whether the stop closed the
client or began to wait is told apart by events and the fake clock, never by
sleeping: waiting shows as a sleeper on the services' clock.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from bot.app import shut_down
from core.providers.scripted import Step
from fakediscord import Gate
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


@dataclass
class Stopping:
    """A stop begun while a binding's farewell is held at the fake's door."""

    bot: Bot
    thread: int
    gate: Gate
    ending: asyncio.Task[Any]
    closing: asyncio.Event
    sleepers: int
    """Sleepers on the clock before the stop; one more means the stop is waiting."""
    task: asyncio.Task[None]


async def stop_with_farewell_held(start_bot: StartBot, monkeypatch: pytest.MonkeyPatch) -> Stopping:
    bot = await start_bot([Step(text="hello")])
    record, thread = await bound_thread(bot)
    gate = bot.fake.hold("POST", f"/channels/{thread}/messages")
    ending = asyncio.create_task(bot.services.bindings.unbind(record.binding_id, reason="done"))
    async with asyncio.timeout(TIMEOUT):
        await gate.wait_entered()
    closing = watch_close(bot, monkeypatch)
    sleepers = bot.clock.sleepers
    task = asyncio.create_task(shut_down(bot.services, [bot.client], drain_seconds=DRAIN))
    return Stopping(bot, thread, gate, ending, closing, sleepers, task)


def farewells(s: Stopping) -> list[str]:
    return [m.content for m in s.bot.fake.messages_in(s.thread) if FAREWELL in m.content]


async def test_a_farewell_under_way_lands_before_the_client_closes(
    start_bot: StartBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = await stop_with_farewell_held(start_bot, monkeypatch)

    await first_of(s.closing.wait(), s.bot.clock.wait_for_sleepers(s.sleepers + 1))
    assert not s.closing.is_set(), "the client closed with a farewell still on its way"
    s.gate.release()
    async with asyncio.timeout(TIMEOUT):
        await s.task
        (ended,) = await s.ending

    assert s.closing.is_set()
    assert ended.status == "ended"
    assert len(farewells(s)) == 1


async def test_a_post_that_never_lands_holds_the_stop_only_for_the_drain_time(
    start_bot: StartBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = await stop_with_farewell_held(start_bot, monkeypatch)

    async with asyncio.timeout(TIMEOUT):
        await s.bot.clock.wait_for_sleepers(s.sleepers + 1)
    await s.bot.clock.advance(DRAIN - 1)
    assert not s.closing.is_set()
    await s.bot.clock.advance(1)
    async with asyncio.timeout(TIMEOUT):
        await s.task
    assert s.closing.is_set()
    s.gate.release()
    async with asyncio.timeout(TIMEOUT):
        (ended,) = await s.ending  # ended all the same; only its farewell was lost
    assert ended.status == "ended"
    assert farewells(s) == []


async def test_nothing_under_way_stops_at_once(start_bot: StartBot) -> None:
    bot = await start_bot([])
    sleepers = bot.clock.sleepers
    async with asyncio.timeout(TIMEOUT):
        await shut_down(bot.services, [bot.client], drain_seconds=DRAIN)
    assert bot.client.is_closed()
    assert bot.clock.sleepers == sleepers
