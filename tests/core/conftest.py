"""Fixtures shared by the core tests: a store on SQLite only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.store import Database
from tests.fixtures.agents import sqlite_database


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    """A throwaway SQLite file, for tests that need a store but not every backend."""
    database = await sqlite_database(tmp_path)
    yield database
    await database.close()
