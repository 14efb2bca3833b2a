"""A use case's transaction (``Database.transaction``) on every store: its writes commit
together in one unit of work, or none does, and what follows the commit follows it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, select
from structlog.testing import capture_logs

from core.leases import LeaseHeld, Leases, take
from core.store import Database
from core.store.tables import LeaseRow, table_of

NOW = datetime(2026, 1, 1, tzinfo=UTC)
LATER = NOW + timedelta(minutes=1)


def lease(conn: Connection, key: str) -> str:
    """A write that leaves a row to find (a session lease of owner ``p``); returns its key."""
    assert take(conn, "session", key, owner="p", now=NOW, until=LATER) is None
    return key


def fail(conn: Connection) -> None:
    raise RuntimeError("this write failed")


async def keys(database: Database) -> list[str]:
    leases = table_of(LeaseRow)
    rows = await database.run(lambda conn: conn.execute(select(leases.c.key)).scalars().all())
    return sorted(rows)


class TestTransaction:
    async def test_its_writes_commit_together_as_one_unit_of_work(self, database: Database) -> None:
        """Queued in order, run in one ``Database.run`` at the block's end; their results
        are read once committed, and not before."""
        units: list[Any] = []
        run = database.run

        async def counting(fn: Any, /, *args: Any) -> Any:
            units.append(fn)
            return await run(fn, *args)

        database.run = counting  # type: ignore[method-assign]
        try:
            async with database.transaction() as tx:
                first = tx.add(lease, "a")
                second = tx.add(lease, "b")
                with pytest.raises(RuntimeError, match="once its transaction committed"):
                    _ = first.value
                assert units == []  # nothing is sent while the block runs
            assert (first.value, second.value) == ("a", "b")
            assert len(units) == 1
        finally:
            database.run = run  # type: ignore[method-assign]
        assert await keys(database) == ["a", "b"]

    async def test_a_failing_write_leaves_none_of_them(self, database: Database) -> None:
        """The earlier writes of the transaction roll back with the one that failed."""

        async def use_case() -> None:
            async with database.transaction() as tx:
                tx.add(lease, "a")
                tx.add(fail)
                tx.add(lease, "b")

        with pytest.raises(RuntimeError, match="this write failed"):
            await use_case()
        assert await keys(database) == []

    async def test_what_follows_runs_only_on_the_outcome_it_was_registered_for(
        self, database: Database
    ) -> None:
        """after_commit on a commit, after_rollback on an error in the block or at the
        commit; an awaitable callback is awaited before the block is left."""
        said: list[str] = []

        async def later(word: str) -> None:
            await asyncio.sleep(0)
            said.append(word)

        async with database.transaction() as tx:
            tx.add(lease, "a")
            tx.after_commit(lambda: later("committed"))
            tx.after_rollback(lambda: said.append("rolled back"))
        assert said == ["committed"]

        async def changes_its_mind() -> None:
            async with database.transaction() as tx:
                tx.add(lease, "b")
                tx.after_commit(lambda: said.append("committed"))
                tx.after_rollback(lambda: later("rolled back"))
                raise ValueError("the caller changed its mind")

        said.clear()
        with pytest.raises(ValueError, match="the caller changed its mind"):
            await changes_its_mind()
        assert said == ["rolled back"]

        async def fails_at_commit() -> None:
            async with database.transaction() as tx:
                tx.add(fail)
                tx.after_commit(lambda: said.append("committed"))
                tx.after_rollback(lambda: said.append("rolled back"))

        said.clear()
        with pytest.raises(RuntimeError):
            await fails_at_commit()
        assert said == ["rolled back"]
        assert await keys(database) == ["a"]

    async def test_a_failing_callback_is_logged_and_the_others_still_run(
        self, database: Database
    ) -> None:
        """The commit stands: one callback's failure neither undoes it nor stops the rest."""
        said: list[str] = []

        def broken() -> None:
            raise RuntimeError("an index update failed")

        with capture_logs() as logs:
            async with database.transaction() as tx:
                tx.add(lease, "a")
                tx.after_commit(broken)
                tx.after_commit(lambda: said.append("indexed"))
        assert said == ["indexed"]
        assert [e["event"] for e in logs if e["log_level"] == "error"] == [
            "store.after_commit_failed"
        ]
        assert await keys(database) == ["a"]

    async def test_a_caller_cancelled_while_committing_still_commits_and_follows(
        self, database: Database
    ) -> None:
        """The store and the memory never disagree because a caller gave up waiting."""
        entered, go_on = asyncio.Event(), asyncio.Event()
        followed = asyncio.Event()

        async def slow_follow_up() -> None:
            entered.set()
            await go_on.wait()
            followed.set()

        async def use_case() -> None:
            async with database.transaction() as tx:
                tx.add(lease, "a")
                tx.after_commit(slow_follow_up)

        task = asyncio.ensure_future(use_case())
        await asyncio.wait_for(entered.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        go_on.set()
        await asyncio.wait_for(followed.wait(), 10)
        assert await keys(database) == ["a"]

    async def test_a_lease_someone_holds_refuses_the_whole_transaction(
        self, database: Database
    ) -> None:
        """take_in, for a key only this process should hold: held elsewhere, nothing of
        the transaction is written, and the holder is named."""
        mine, theirs = Leases(database, owner="mine"), Leases(database, owner="theirs")
        assert await theirs.take("session", "s1") is None

        async def take_theirs() -> None:
            async with database.transaction() as tx:
                tx.add(lease, "a")
                mine.take_in(tx, "session", "s1")

        with pytest.raises(LeaseHeld, match="held by theirs"):
            await take_theirs()
        assert await keys(database) == ["s1"]
        async with database.transaction() as tx:
            mine.take_in(tx, "session", "s2")
            theirs.release_in(tx, "session", "s1")
        assert await mine.holders("session") == {"s2": "mine"}

    async def test_a_transaction_is_used_once(self, database: Database) -> None:
        tx = database.transaction()
        async with tx:
            pass
        with pytest.raises(RuntimeError, match="used once"):
            async with tx:
                pass
