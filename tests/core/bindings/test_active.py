"""SessionBindingService's ``active*`` reads: an ``ending`` binding is not acted on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from core.bindings.records import SessionBindingRecord
from core.bindings.service import SessionBindingService
from core.clock import FakeClock
from core.store import Database
from tests.fixtures.bindings import conv


def hold_next_write(monkeypatch: pytest.MonkeyPatch, database: Database) -> asyncio.Event:
    """Make the next ``database.run`` wait until the returned event is set."""
    release = asyncio.Event()
    original = database.run
    held = False

    async def run(fn: Callable[..., Any], /, *args: Any) -> Any:
        nonlocal held
        if not held:
            held = True
            await release.wait()
        return await original(fn, *args)

    monkeypatch.setattr(database, "run", run)
    return release


async def ending(
    monkeypatch: pytest.MonkeyPatch, database: Database, clock: FakeClock
) -> tuple[SessionBindingService, SessionBindingRecord, asyncio.Event, asyncio.Task[Any]]:
    """A bound service whose binding is mid-unbind: its end write is held."""
    service = SessionBindingService(database, clock=clock)
    await service.start()
    record = await service.bind("s1", "session", conv("t1"))
    release = hold_next_write(monkeypatch, database)
    unbinding = asyncio.create_task(service.unbind(record.binding_id, reason="done"))
    for _ in range(10):
        await asyncio.sleep(0)
        if service.get(record.binding_id).status == "ending":
            break
    assert service.get(record.binding_id).status == "ending"
    return service, record, release, unbinding


async def test_active_reads_return_an_active_binding(database: Database, clock: FakeClock) -> None:
    """Before any end starts, every active read finds the binding."""
    service = SessionBindingService(database, clock=clock)
    await service.start()
    record = await service.bind("s1", "session", conv("t1"))
    assert service.active(record.binding_id) == record
    assert service.active_for_session("s1") == (record,)
    assert service.active_for_conversation(conv("t1")) == record
    assert service.active("nope") is None
    assert service.active_for_session("nobody") == ()
    assert service.active_for_conversation(conv("t2")) is None


async def test_ending_binding_is_not_active(
    monkeypatch: pytest.MonkeyPatch, database: Database, clock: FakeClock
) -> None:
    """While its end is being written, a binding still resolves but is not active.

    This is what a command in the thread sees (``bot.commands.bound.binding_here``
    asks ``active_for_conversation``): "not bound", not a session being torn down.
    """
    service, record, release, unbinding = await ending(monkeypatch, database, clock)
    try:
        assert service.resolve_by_conversation(conv("t1")) is not None  # still indexed
        assert service.active_for_conversation(conv("t1")) is None
        assert service.active(record.binding_id) is None
        assert service.active_for_session("s1") == ()
        assert not service.touch(record.binding_id)
    finally:
        release.set()
        (ended,) = await unbinding
    assert ended.status == "ended"
    assert service.get(record.binding_id) is None
