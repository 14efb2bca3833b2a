"""The subagent tests' harness as a fixture."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.clock import FakeClock
from core.store import Database
from tests.core.subagents.harness import Harness, Step, harness


@pytest.fixture
async def h(database: Database, clock: FakeClock) -> AsyncIterator[Harness]:
    """A subagent service on the test's store, its model always saying "the answer"."""
    made = await harness(database, clock, lambda _messages: Step(text="the answer"))
    yield made
    await made.close()


@pytest.fixture
def store_units(database: Database, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The units of work run on the test's store from now on (the session log's aside),
    by name: how many transactions a use case takes."""
    units: list[str] = []
    run = database.run

    async def counting(fn: Any, /, *args: Any) -> Any:
        if not fn.__module__.startswith("core.sessions"):
            units.append(fn.__qualname__)
        return await run(fn, *args)

    monkeypatch.setattr(database, "run", counting)
    return units
