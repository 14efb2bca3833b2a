"""Fixtures shared by the core tests: a store on SQLite only, a session log, a logging reset."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from core.clock import FakeClock
from core.logging import reset_logging
from core.sessions.log import SessionLog
from core.store import Database
from tests.fixtures.agents import sqlite_database


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    """A throwaway SQLite file, for tests that need a store but not every backend."""
    database = await sqlite_database(tmp_path)
    yield database
    await database.close()


@pytest.fixture
def log(database: Database, clock: FakeClock) -> SessionLog:
    """A session log on the test's store (each backend), timed by the test's clock."""
    return SessionLog(database, clock=clock)


@pytest.fixture
def reset_logging_after() -> Iterator[None]:
    """Undo whatever logging the test configured, once it is over.

    Modules whose tests configure logging take it for every test:
    ``pytestmark = pytest.mark.usefixtures("reset_logging_after")``.
    """
    yield
    reset_logging()
