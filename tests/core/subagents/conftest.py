"""The subagent tests' harness as a fixture."""

from __future__ import annotations

from collections.abc import AsyncIterator

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
