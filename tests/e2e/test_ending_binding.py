"""A command in a thread whose binding is being ended answers "not bound" (fake Discord)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from bot.commands.bound import NOT_BOUND
from tests.e2e.conftest import StartBot
from tests.e2e.helpers import bound_thread, content, ephemeral, run


async def test_command_in_an_ending_thread_is_not_bound(
    start_bot: StartBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the end of its binding is being written, ``/tree`` does not act on the session."""
    bot = await start_bot([])
    record, thread_id = await bound_thread(bot)
    database = bot.services.database
    release = asyncio.Event()
    original = database.run
    held = False

    async def run_held(fn: Callable[..., Any], /, *args: Any) -> Any:
        nonlocal held
        if not held:  # only the end write that follows
            held = True
            await release.wait()
        return await original(fn, *args)

    monkeypatch.setattr(database, "run", run_held)
    bindings = bot.services.bindings
    unbinding = asyncio.create_task(bindings.unbind(record.binding_id, reason="done"))
    try:
        for _ in range(10):
            await asyncio.sleep(0)
            if bindings.get(record.binding_id).status == "ending":
                break
        assert bindings.get(record.binding_id).status == "ending"

        reply = await run(bot, bot.world.alice, "tree", thread_id)

        assert content(reply) == NOT_BOUND
        assert ephemeral(reply)
    finally:
        release.set()
        await unbinding
