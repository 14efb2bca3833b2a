"""Shared fixtures. Every store test runs on SQLite (both drivers) and on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.clock import FakeClock
from core.store import Database
from tests.fixtures.stores import StoreFactory, store_factory


@pytest.fixture(
    params=["sqlite", "aiosqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """A function that opens the test's store; call it twice to simulate a restart."""
    async with store_factory(request.param, tmp_path) as factory:
        yield factory


@pytest.fixture
async def database(open_store: StoreFactory) -> Database:
    return await open_store()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
