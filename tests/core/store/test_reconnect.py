"""PostgreSQL connections the server dropped: no ping at checkout, one safe retry.

Each test terminates a real backend with ``pg_terminate_backend`` from another
connection, waiting (``timeout`` argument) until it has exited, so the pooled
connection is dead for sure before the next unit of work takes it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError
from structlog.testing import capture_logs

from core.store import Database
from core.store.engine import PG_MAX_OVERFLOW, PG_POOL_SIZE
from tests.fixtures.stores import PG_DSN, StoreFactory, store_factory

pytestmark = pytest.mark.postgres


@pytest.fixture
async def pg(tmp_path: Path) -> AsyncIterator[Database]:
    async with store_factory("postgres", tmp_path) as factory:
        database = await factory()
        await database.run(
            lambda conn: conn.execute(text("CREATE TABLE marks (id int PRIMARY KEY)"))
        )
        yield database


def backend_pid(conn: Connection) -> int:
    pid: int = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
    return pid


async def terminate(pid: int) -> None:
    """End backend ``pid`` from a connection of our own; return once it has exited."""
    conn = await asyncpg.connect(PG_DSN)
    try:
        assert await conn.fetchval("SELECT pg_terminate_backend($1, 30000)", pid)
    finally:
        await conn.close()


def terminate_blocking(pid: int) -> None:
    """:func:`terminate`, with this thread's event loop held still meanwhile: our pooled
    connection cannot read the server's goodbye, so it still looks alive to the driver."""
    thread = threading.Thread(target=asyncio.run, args=(terminate(pid),))
    thread.start()
    thread.join()


async def pooled_pids(database: Database) -> set[int]:
    """The backends of every connection in the pool: units run at once each take one (the
    pool is never empty of idle connections when they start, so more are opened)."""
    idle = database.engine.pool.checkedin()
    pids = await asyncio.gather(*(database.run(backend_pid) for _ in range(idle + 1)))
    assert database.engine.pool.checkedout() == 0
    return set(pids)


async def scheduled_callbacks_ran() -> None:
    """Return once every callback already scheduled with ``call_soon`` has run (they run
    in order, so one scheduled now runs after them)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    loop.call_soon(done.set_result, None)
    await done


def marks(conn: Connection) -> list[int]:
    return list(conn.execute(text("SELECT id FROM marks ORDER BY id")).scalars())


class Mark:
    """A unit of work that inserts one row and counts how often it ran."""

    def __init__(self, mark_id: int) -> None:
        self.mark_id = mark_id
        self.runs = 0

    def __call__(self, conn: Connection) -> int:
        self.runs += 1
        conn.execute(text("INSERT INTO marks (id) VALUES (:id)"), {"id": self.mark_id})
        return backend_pid(conn)


def reconnections(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == "store.reconnected"]


class TestPool:
    async def test_checkout_sends_no_ping(self, pg: Database) -> None:
        """Taking a connection from the pool sends nothing: the unit's BEGIN and COMMIT
        are the only transaction commands (a pre-ping added a BEGIN and a ROLLBACK around
        its ping). asyncpg's query logger sees these, not the prepared statements."""
        sent: list[str] = []

        def listen(conn: Connection) -> None:
            conn.connection.driver_connection.add_query_logger(
                lambda record: sent.append(record.query.strip().rstrip(";"))
            )

        idle = pg.engine.pool.checkedin()
        await asyncio.gather(*(pg.run(listen) for _ in range(idle + 1)))
        sent.clear()
        await pg.run(lambda conn: conn.execute(text("SELECT 1")))
        await scheduled_callbacks_ran()  # asyncpg calls its query loggers with call_soon
        assert sent == ["BEGIN", "COMMIT"]

    async def test_pool_keeps_every_connection_a_burst_opens(self, pg: Database) -> None:
        """100 units of work at once open at most 40 connections, and all of them stay
        open: the next burst reconnects nothing (the default pool kept 5 and closed the
        rest as they came back, so every burst reconnected)."""
        assert (PG_POOL_SIZE, PG_MAX_OVERFLOW) == (40, 0)
        first = set(await asyncio.gather(*(pg.run(backend_pid) for _ in range(100))))
        assert len(first) <= PG_POOL_SIZE
        assert pg.engine.pool.checkedin() == len(first)
        second = set(await asyncio.gather(*(pg.run(backend_pid) for _ in range(100))))
        assert second <= first


class TestDroppedConnection:
    async def test_dropped_while_pooled_is_retried_once(self, pg: Database) -> None:
        """The server ended the pooled connection and the driver has seen it go: the next
        unit fails at its BEGIN, runs again on a new connection, and writes once."""
        pids = await pooled_pids(pg)
        for pid in pids:
            await terminate(pid)
        mark = Mark(1)
        with capture_logs() as logs:
            new_pid = await pg.run(mark)
        assert new_pid not in pids
        assert mark.runs == 2
        assert await pg.run(marks) == [1]
        (logged,) = reconnections(logs)
        assert logged["log_level"] == "warning"
        assert "connection is closed" in logged["error"]  # the driver knew: nothing was sent

    async def test_dropped_unnoticed_is_retried_once(self, pg: Database) -> None:
        """The driver has not read the server's goodbye yet: the BEGIN goes out on the dead
        connection and fails; the unit runs again on a new connection, and writes once."""
        pids = await pooled_pids(pg)
        for pid in pids:
            terminate_blocking(pid)
        mark = Mark(2)
        with capture_logs() as logs:
            new_pid = await pg.run(mark)
        assert new_pid not in pids
        assert mark.runs == 2
        assert await pg.run(marks) == [2]
        (logged,) = reconnections(logs)
        assert "connection is closed" not in logged["error"]  # the BEGIN went out and failed

    async def test_restart_drops_every_pooled_connection(self, pg: Database) -> None:
        """All pooled connections dropped (a server restart): one retry is enough for
        each unit, however many dead connections the pool held."""
        pids = await pooled_pids(pg)
        for pid in pids:
            await terminate(pid)
        with capture_logs() as logs:
            results = await asyncio.gather(*(pg.run(Mark(10 + i)) for i in range(5)))
        assert not set(results) & pids
        assert await pg.run(marks) == [10, 11, 12, 13, 14]
        assert 1 <= len(reconnections(logs)) <= 5

    async def test_dropped_mid_unit_is_not_retried(self, pg: Database) -> None:
        """A connection lost after the unit's first statement ran: the unit may have acted
        on what it read, so it fails, once, and nothing it wrote is kept."""
        runs = 0

        def unit(conn: Connection) -> None:
            nonlocal runs
            runs += 1
            conn.execute(text("INSERT INTO marks (id) VALUES (3)"))
            conn.execute(text("SELECT pg_terminate_backend(pg_backend_pid())"))

        with capture_logs() as logs, pytest.raises(DBAPIError):
            await pg.run(unit)
        assert runs == 1
        assert reconnections(logs) == []
        assert await pg.run(marks) == []

    async def test_other_errors_are_not_retried(self, pg: Database) -> None:
        """A statement the server refuses on a live connection fails at once."""
        mark = Mark(4)
        await pg.run(mark)
        again = Mark(4)
        with capture_logs() as logs, pytest.raises(DBAPIError):
            await pg.run(again)
        assert again.runs == 1
        assert reconnections(logs) == []


async def test_sqlite_stores_are_untouched(open_store: StoreFactory) -> None:
    """On every backend a failing unit of work runs once."""
    database = await open_store()
    runs = 0

    def unit(conn: Connection) -> None:
        nonlocal runs
        runs += 1
        conn.execute(text("SELECT * FROM no_such_table"))

    with pytest.raises(DBAPIError):
        await database.run(unit)
    assert runs == 1
