"""The subagent and outbox tables on every backend: what each write leaves, and how
many statements it costs (these run at every state change of every subagent)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import Connection

from core import leases
from core.clock import FakeClock
from core.store import Database
from core.subagents import repository
from core.subagents.records import SubagentRecord
from core.subagents.repository import PendingCompletion
from tests.fixtures.bindings import conv
from tests.fixtures.statements import statements

TTL = timedelta(seconds=30)


def record(clock: FakeClock, key: str = "subagent:a") -> SubagentRecord:
    now = clock.now()
    return SubagentRecord(
        session_key=key,
        parent_session_key=None,
        agent=None,
        mode="run",
        thread=True,
        requester=conv("100"),
        requested_by="u1",
        scope="g1",
        task="find out",
        state="starting",
        binding_id=None,
        created_at=now,
        updated_at=now,
    )


class TestSubagentRow:
    async def test_a_state_change_updates_the_row_in_place_in_one_statement(
        self, database: Database, clock: FakeClock
    ) -> None:
        first = record(clock)
        with statements(database) as sent:
            await database.run(repository.upsert_subagent, first)
        assert len(sent) == 1
        await clock.advance(5)
        running = first.moved("running", clock.now(), binding_id="b1")
        with statements(database) as sent:
            await database.run(repository.upsert_subagent, running)
        assert len(sent) == 1
        assert not sent[0].upper().startswith("DELETE")
        assert await database.run(repository.get_subagent, first.session_key) == running
        assert await database.run(repository.list_subagents) == [running]

    async def test_delete_removes_only_that_row(self, database: Database, clock: FakeClock) -> None:
        await database.run(repository.upsert_subagent, record(clock, "subagent:a"))
        await database.run(repository.upsert_subagent, record(clock, "subagent:b"))
        await database.run(repository.delete_subagent, "subagent:a")
        assert [r.session_key for r in await database.run(repository.list_subagents)] == [
            "subagent:b"
        ]


class TestOutbox:
    @staticmethod
    async def insert(database: Database, clock: FakeClock, cid: str) -> bool:
        now = clock.now()
        return await database.run(
            lambda conn: repository.insert_completion(
                conn,
                completion_id=cid,
                session_key="subagent:a",
                outcome="completed",
                result="r",
                at=now,
                owner="a",
                until=now + TTL,
            )
        )

    async def test_a_completion_is_recorded_once_without_a_failing_insert(
        self, database: Database, clock: FakeClock
    ) -> None:
        """A second record of one id is refused by ON CONFLICT DO NOTHING: no savepoint,
        no error, and the first row is untouched."""
        with statements(database) as sent:
            assert await self.insert(database, clock, "c1") is True
        assert len(sent) == 2  # the row, its lease
        with statements(database) as sent:
            assert await self.insert(database, clock, "c1") is False
        assert len(sent) == 1
        assert await database.run(repository.delivery_statuses) == {"c1": "pending"}

    async def test_complete_saves_the_row_records_and_claims_in_one_transaction(
        self, database: Database, clock: FakeClock
    ) -> None:
        done = record(clock).moved("completed", clock.now())
        now = clock.now()

        def complete(conn: Connection) -> PendingCompletion | None:
            return repository.complete(
                conn,
                done,
                completion_id="subagent:a/t1",
                outcome="completed",
                result="the answer",
                at=now,
                owner="a",
                until=now + TTL,
            )

        with statements(database) as sent:
            claimed = await database.run(complete)
        assert len(sent) == 3  # the subagent row, the outbox row, its lease
        assert claimed is not None
        assert (claimed.status, claimed.attempts, claimed.uncertain) == ("sending", 1, False)
        assert claimed.result == "the answer"
        assert await database.run(repository.get_subagent, done.session_key) == done
        assert await database.run(repository.delivery_statuses) == {"subagent:a/t1": "sending"}
        held = await database.run(lambda conn: leases._holders(conn, "completion", now))
        assert held == {"subagent:a/t1": "a"}
        # Recorded before (a resumed watcher): not claimed again here.
        assert await database.run(complete) is None
        assert await self.claim(database, clock, "b", "subagent:a/t1") is None

    async def test_a_crash_after_complete_is_resolved_by_looking_first(
        self, database: Database, clock: FakeClock
    ) -> None:
        """Recorded already ``sending`` and the process dies before posting: once its
        lease lapses the successor finds the row ``uncertain`` and must look in the
        destination before posting, so a post that did land is never repeated."""
        now = clock.now()
        await database.run(
            lambda conn: repository.complete(
                conn,
                record(clock),
                completion_id="c1",
                outcome="completed",
                result="r",
                at=now,
                owner="a",
                until=now + TTL,
            )
        )
        assert await database.run(self.recover("b", clock.now())) == []  # a's lease is live
        await clock.advance(TTL.total_seconds())
        rows = await database.run(self.recover("b", clock.now()))
        assert [(r.completion_id, r.status) for r in rows] == [("c1", "uncertain")]
        row = await self.claim(database, clock, "b", "c1")
        assert row is not None
        assert row.uncertain
        assert row.attempts == 2

    @staticmethod
    def recover(owner: str, now: datetime) -> Callable[[Connection], list[PendingCompletion]]:
        return lambda conn: repository.recover_pending(conn, owner=owner, now=now)

    @staticmethod
    async def claim(
        database: Database, clock: FakeClock, owner: str, cid: str
    ) -> PendingCompletion | None:
        now = clock.now()
        return await database.run(
            lambda conn: repository.claim(conn, cid, owner=owner, now=now, until=now + TTL)
        )
