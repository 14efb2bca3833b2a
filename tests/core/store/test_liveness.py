"""Proofs that a bot process is dead: the SQLite process lock, PostgreSQL advisory
locks held per process, and none at all."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, text
from structlog.testing import capture_logs

from core.errors import StoreError
from core.store import Database, open_database
from core.store.liveness import NoProof, PostgresLiveness, SoleProcess, liveness_for
from tests.fixtures.stores import PG_URL, StoreFactory, pg_schema, store_factory

ROOT = Path(__file__).resolve().parents[3]
HOLDER = """
import asyncio
import sys
from core.store import open_database
from core.store.liveness import PostgresLiveness

async def main(url, schema, owner):
    database = await open_database(url, pg_schema=schema)
    liveness = PostgresLiveness(database)
    await liveness.start(owner)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main(*sys.argv[1:]))
"""
WAIT = 30.0


@pytest.fixture
async def open_pg(tmp_path: Path) -> AsyncIterator[StoreFactory]:
    async with store_factory("postgres", tmp_path) as factory:
        yield factory


async def started(database: Database, owner: str) -> PostgresLiveness:
    liveness = PostgresLiveness(database)
    await liveness.start(owner)
    return liveness


async def wait_released(database: Database, owner: str) -> None:
    """Block (on the server, not on a timer) until nobody holds ``owner``'s lock: a
    killed process's backend lets it go a moment after the client sees it die."""

    def wait(conn: Connection) -> None:
        conn.execute(text("SET LOCAL lock_timeout = '30s'"))
        conn.execute(
            text(
                "SELECT pg_advisory_xact_lock("
                "hashtext('threadbound.alive.' || current_schema()), hashtext(:owner))"
            ),
            {"owner": owner},
        )

    await database.run(wait)


class TestLivenessFor:
    async def test_sqlite_without_the_process_lock_proves_nothing(self, tmp_path: Path) -> None:
        database = await open_database(f"sqlite:///{tmp_path / 'tool.db'}")
        try:
            assert isinstance(liveness_for(database), NoProof)
        finally:
            await database.close()

    @pytest.mark.parametrize("scheme", ["sqlite", "sqlite+aiosqlite"])
    async def test_sqlite_under_the_process_lock_is_the_sole_process(
        self, tmp_path: Path, scheme: str
    ) -> None:
        database = await open_database(f"{scheme}:///{tmp_path / 'bot.db'}", single_process=True)
        try:
            assert isinstance(liveness_for(database), SoleProcess)
        finally:
            await database.close()

    @pytest.mark.postgres
    async def test_postgresql_uses_advisory_locks(self, open_pg: StoreFactory) -> None:
        assert isinstance(liveness_for(await open_pg()), PostgresLiveness)


class TestNoProof:
    async def test_nobody_is_dead(self) -> None:
        proof = NoProof()
        await proof.start("me")
        assert await proof.dead({"other", "me"}) == set()


class TestSoleProcess:
    async def test_every_other_owner_is_dead_while_the_lock_is_held(self, tmp_path: Path) -> None:
        database = await open_database(f"sqlite:///{tmp_path / 'bot.db'}", single_process=True)
        assert database.process_lock is not None
        proof = SoleProcess(database.process_lock)
        await proof.start("me")
        assert await proof.dead({"before-me", "me"}) == {"before-me"}
        await database.close()  # the lock is gone: another process may start now
        assert await proof.dead({"before-me"}) == set()


@pytest.mark.postgres
class TestPostgresLiveness:
    async def test_a_live_process_is_not_dead_and_a_stopped_one_is(
        self, open_pg: StoreFactory
    ) -> None:
        a = await started(await open_pg(), "a")
        b = await started(await open_pg(), "b")
        try:
            assert await b.dead({"a", "b", "never-started"}) == {"never-started"}
            await a.close()
            assert await b.dead({"a"}) == {"a"}
        finally:
            await a.close()
            await b.close()

    async def test_an_owner_id_already_alive_is_refused(self, open_pg: StoreFactory) -> None:
        a = await started(await open_pg(), "a")
        twin = PostgresLiveness(await open_pg())
        try:
            with pytest.raises(StoreError, match="liveness lock of owner 'a'"):
                await twin.start("a")
        finally:
            await a.close()
            await twin.close()

    async def test_the_lock_is_per_schema(self, open_pg: StoreFactory) -> None:
        """Deployments (and test runs) in other schemas never see our processes."""
        here = await started(await open_pg(), "a")
        try:
            async with pg_schema() as other:
                elsewhere_db = await open_database(PG_URL, pg_schema=other)
                try:
                    elsewhere = await started(elsewhere_db, "a")  # no clash with ours
                    assert await elsewhere.dead({"a"}) == set()  # its own "a", alive
                    await elsewhere.close()
                    assert await here.dead({"a"}) == set()  # never ourselves
                finally:
                    await elsewhere_db.close()
        finally:
            await here.close()

    async def test_check_retakes_the_lock_after_its_connection_was_terminated(
        self, open_pg: StoreFactory
    ) -> None:
        a = await started(await open_pg(), "a")
        observer_db = await open_pg()
        b = await started(observer_db, "b")
        try:
            old_pid = a.backend_pid
            terminated = await observer_db.run(
                lambda conn: conn.execute(
                    text("SELECT pg_terminate_backend(:pid, 30000)"), {"pid": old_pid}
                ).scalar()
            )
            assert terminated  # and its locks are gone, the backend having exited
            assert await b.dead({"a"}) == {"a"}  # lost: others may take a for dead
            with capture_logs() as logs:
                await a.check()
            assert a.backend_pid not in (None, old_pid)
            assert await b.dead({"a"}) == set()
            assert [(e["event"], e["log_level"]) for e in logs] == [
                ("liveness.lost", "warning"),
                ("liveness.reestablished", "info"),
            ]
            with capture_logs() as logs:
                await a.check()  # held: nothing to do
            assert logs == []
        finally:
            await a.close()
            await b.close()

    async def test_check_fails_while_another_connection_holds_our_lock_then_retries(
        self, open_pg: StoreFactory
    ) -> None:
        """Retaking the lock can lose a race with the old connection's end: the check
        says so and the next one tries again."""
        a_db = await open_pg()
        a = await started(a_db, "a")
        lingering = PostgresLiveness(await open_pg())
        try:
            await a_db.run(
                lambda conn: conn.execute(
                    text("SELECT pg_terminate_backend(:pid, 30000)"), {"pid": a.backend_pid}
                )
            )
            await lingering.start("a")  # stands for the old backend, not yet gone
            with pytest.raises(StoreError, match="still held"):
                await a.check()
            assert a.backend_pid is None
            await lingering.close()
            await a.check()
            assert a.backend_pid is not None
        finally:
            await lingering.close()
            await a.close()

    async def test_a_process_killed_with_sigkill_is_dead(self, open_pg: StoreFactory) -> None:
        observer_db = await open_pg()
        observer = await started(observer_db, "observer")
        schema = str(
            await observer_db.run(
                lambda conn: conn.execute(text("SELECT current_schema()")).scalar()
            )
        )
        holder = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            HOLDER,
            PG_URL,
            schema,
            "victim",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=ROOT,
        )
        try:
            assert holder.stdout is not None
            async with asyncio.timeout(WAIT):
                assert (await holder.stdout.readline()).strip() == b"ready"
            assert await observer.dead({"victim"}) == set()
            holder.kill()  # kill -9: nothing of it runs to clean up
            await holder.wait()
            async with asyncio.timeout(WAIT):
                await wait_released(observer_db, "victim")
            assert await observer.dead({"victim"}) == {"victim"}
        finally:
            if holder.returncode is None:
                holder.kill()
                await holder.wait()
            await observer.close()


async def test_postgres_liveness_needs_postgresql(tmp_path: Path) -> None:
    database = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    try:
        with pytest.raises(StoreError, match="PostgreSQL"):
            PostgresLiveness(database)
    finally:
        await database.close()
