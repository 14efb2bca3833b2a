"""Changes crossing processes through PostgreSQL LISTEN/NOTIFY.

Two ``Database`` objects on one schema stand for two bot processes; process B
listens with a :class:`ChangeFeed` wired as the bot wires it. Waiting is on
events set by the handlers, never on time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text

from core.bindings.service import SessionBindingService
from core.config import FLAG_SPAWN_SUBAGENT_SESSIONS, parse_config
from core.overrides import EVERY_SERVER, RuntimeOverrides
from core.store import Database, open_database
from core.store.changes import ChangeFeed, announce
from tests.fixtures.bindings import conv
from tests.fixtures.stores import PG_DSN, PG_URL, pg_schema, require_postgres

pytestmark = pytest.mark.postgres
WAIT = 10.0


class Heard:
    """The messages a feed handed over, with a way to wait for the next ones."""

    def __init__(self) -> None:
        self.messages: list[Mapping[str, Any]] = []
        self._changed = asyncio.Event()

    async def __call__(self, message: Mapping[str, Any]) -> None:
        self.messages.append(message)
        self._changed.set()

    async def wait(self, count: int) -> list[Mapping[str, Any]]:
        async with asyncio.timeout(WAIT):
            while len(self.messages) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.messages


class Two:
    def __init__(self, schema: str, a: Database, b: Database) -> None:
        self.schema, self.a, self.b = schema, a, b
        self.feed = ChangeFeed(PG_URL, schema=schema, origin=b.origin, retry_seconds=0.05)
        self._task: asyncio.Task[None] | None = None

    async def listen(self) -> None:
        self._task = asyncio.ensure_future(self.feed.run())
        async with asyncio.timeout(WAIT):
            await self.feed.connected.wait()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


@pytest.fixture
async def two() -> AsyncIterator[Two]:
    await require_postgres()
    async with pg_schema() as schema:
        a = await open_database(PG_URL, pg_schema=schema)
        b = await open_database(PG_URL, pg_schema=schema)
        pair = Two(schema, a, b)
        try:
            yield pair
        finally:
            await pair.close()
            await a.close()
            await b.close()


def marker(conn: Any, tag: str) -> None:
    announce(conn, "test", tag=tag)


async def test_a_change_committed_elsewhere_is_heard_and_our_own_is_not(two: Two) -> None:
    heard = Heard()
    two.feed.on("test", heard)
    await two.listen()
    await two.b.run(marker, "own")  # B's own: skipped
    await two.a.run(marker, "first")
    (message,) = await heard.wait(1)
    assert message["tag"] == "first"


async def test_a_rolled_back_change_is_never_heard(two: Two) -> None:
    heard = Heard()
    two.feed.on("test", heard)
    await two.listen()

    def then_fail(conn: Any) -> None:
        marker(conn, "rolled back")
        raise RuntimeError("the unit of work fails")

    with pytest.raises(RuntimeError):
        await two.a.run(then_fail)
    await two.a.run(marker, "after")
    assert [m["tag"] for m in await heard.wait(1)] == ["after"]


async def test_an_override_set_in_one_process_applies_in_the_other(two: Two) -> None:
    config = parse_config({}, env={})
    here, there = RuntimeOverrides(two.a, config), RuntimeOverrides(two.b, config)
    await here.start()
    await there.start()
    applied = Heard()

    async def reload(message: Mapping[str, Any]) -> None:
        await there.reload()
        await applied(message)

    two.feed.on("override", reload)
    await two.listen()
    await here.set(EVERY_SERVER, FLAG_SPAWN_SUBAGENT_SESSIONS, "off", actor="op")
    await applied.wait(1)
    assert not there.spawns_threads("123")


async def test_a_binding_made_in_one_process_is_indexed_in_the_other(two: Two) -> None:
    here, there = SessionBindingService(two.a), SessionBindingService(two.b)
    await there.start()
    applied = Heard()

    async def reload(message: Mapping[str, Any]) -> None:
        await there.reload_binding(str(message["id"]))
        await applied(message)

    two.feed.on("binding", reload)
    await two.listen()
    record = await here.bind("agent:1", "subagent", conv("t1", "100"), scope="1")
    await applied.wait(1)
    assert there.resolve_by_conversation(conv("t1")) == record
    await here.unbind(record.binding_id, reason="done")
    await applied.wait(2)
    assert there.resolve_by_conversation(conv("t1")) is None


async def test_what_was_missed_while_disconnected_is_reloaded(two: Two) -> None:
    """A change nobody was told of (the listener was down) arrives with the resync."""
    config = parse_config({}, env={})
    there = RuntimeOverrides(two.b, config)
    await there.start()
    resyncs = Heard()

    async def resync() -> None:
        await there.reload()
        await resyncs({})

    two.feed.on_resync(resync)
    await two.listen()
    conn = await asyncpg.connect(PG_DSN)
    try:
        await conn.execute(  # written behind the feed's back: no notification
            f'INSERT INTO "{two.schema}".config_overrides VALUES ($1, $2, $3, $4, now())',
            EVERY_SERVER,
            FLAG_SPAWN_SUBAGENT_SESSIONS,
            "false",
            "op",
        )
        listening = await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE query LIKE $1",
            f"LISTEN%threadbound_{two.schema}%",
        )
        assert len(listening) == 1
        await conn.execute("SELECT pg_terminate_backend($1)", listening[0]["pid"])
    finally:
        await conn.close()
    await resyncs.wait(2)  # the first connection's, then the reconnection's
    assert not there.spawns_threads("123")


async def test_sqlite_has_nobody_to_tell(tmp_path: Path) -> None:
    database = await open_database(f"sqlite:///{tmp_path / 'one.db'}")
    try:
        await database.run(marker, "nothing")  # no NOTIFY, no error
        assert await database.run(lambda conn: conn.execute(text("SELECT 1")).scalar()) == 1
    finally:
        await database.close()


async def test_processes_starting_together_migrate_once() -> None:
    await require_postgres()
    async with pg_schema() as schema:
        opened = await asyncio.gather(*(open_database(PG_URL, pg_schema=schema) for _ in range(3)))
        try:
            conn = await asyncpg.connect(PG_DSN)
            try:
                rows = await conn.fetch(f'SELECT version FROM "{schema}".schema_version')
            finally:
                await conn.close()
        finally:
            for database in opened:
                await database.close()
    versions = sorted(row["version"] for row in rows)
    assert versions == sorted(set(versions))
    assert versions[0] == 1
