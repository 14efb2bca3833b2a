"""Leases over a real store: who holds work, until when, and who may take it over.

Two ``Leases`` objects with different owners stand for two bot processes; the
fake clock stands for time passing (a killed process simply stops renewing).
:class:`Processes` goes further where the store can prove a process dead: each
process opens the store as the bot does and proves itself alive, and a killed
one loses that proof at once, so its work is taken over without waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from core.agent import Agent, ToolRegistry
from core.clock import FakeClock
from core.leases import Leases
from core.providers.scripted import ScriptedProvider
from core.runtime import SessionBusy, SessionRuntime
from core.sessions.log import SessionLog
from core.store import Database
from core.store.liveness import NoProof, liveness_for
from core.subagents import repository
from tests.fixtures.statements import statements
from tests.fixtures.stores import StoreFactory, store_factory

TTL = 30.0


def leases(database: Database, clock: FakeClock, owner: str) -> Leases:
    return Leases(database, ttl_seconds=TTL, owner=owner, clock=clock)


class Processes:
    """Bot processes over one store, each opening it as the bot does (SQLite under
    the process lock) and proving itself alive with :func:`liveness_for`."""

    def __init__(self, open_store: StoreFactory, clock: FakeClock) -> None:
        self._open = open_store
        self._clock = clock
        self._running: dict[str, tuple[Database, Leases]] = {}

    async def start(self, owner: str) -> Leases:
        database = await self._open()
        started = Leases(
            database,
            ttl_seconds=TTL,
            owner=owner,
            clock=self._clock,
            liveness=liveness_for(database),
        )
        await started.start()
        self._running[owner] = (database, started)
        return started

    def database(self, owner: str) -> Database:
        return self._running[owner][0]

    async def kill(self, owner: str) -> None:
        """Stand for ``kill -9``: nothing is released, the lease rows stay as they
        were; the proof of life ends with the process (the SQLite lock with its
        file, the PostgreSQL lock with its connection)."""
        database, killed = self._running.pop(owner)
        await killed.liveness.close()
        await database.close()

    async def close(self) -> None:
        for _, running in self._running.values():
            await running.liveness.close()


@pytest.fixture(
    params=["sqlite", "aiosqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def processes(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> AsyncIterator[Processes]:
    async with store_factory(request.param, tmp_path, single_process=True) as open_store:
        running = Processes(open_store, clock)
        try:
            yield running
        finally:
            await running.close()


@pytest.fixture
async def pg_processes(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Processes]:
    """Processes on PostgreSQL, where several live at once."""
    async with store_factory("postgres", tmp_path) as open_store:
        running = Processes(open_store, clock)
        try:
            yield running
        finally:
            await running.close()


class RecordingProof(NoProof):
    """Nobody dead; records what :class:`Leases` asks of its liveness, and fails the
    first ``failing`` checks the way a lost server would."""

    def __init__(self, *, failing: int = 0) -> None:
        self.started: list[str] = []
        self.checks = 0
        self.closed = False
        self._failing = failing

    async def start(self, owner: str) -> None:
        self.started.append(owner)

    async def check(self) -> None:
        self.checks += 1
        if self.checks <= self._failing:
            raise ConnectionError("the store went away")

    async def close(self) -> None:
        self.closed = True

    async def dead(self, owners: Collection[str]) -> set[str]:
        del owners
        return set()


class TestTaking:
    async def test_a_free_lease_is_taken_and_ours_is_extended(
        self, database: Database, clock: FakeClock
    ) -> None:
        a = leases(database, clock, "a")
        assert await a.take("session", "s1") is None
        await clock.advance(10)
        assert await a.take("session", "s1") is None  # ours: extended, not refused
        assert await a.holders("session") == {"s1": "a"}

    async def test_a_live_lease_of_another_is_refused_and_names_its_holder(
        self, database: Database, clock: FakeClock
    ) -> None:
        a, b = leases(database, clock, "a"), leases(database, clock, "b")
        await a.take("completion", "c1")
        assert await b.take("completion", "c1") == "a"
        await clock.advance(TTL - 1)
        assert await b.take("completion", "c1") == "a"

    async def test_taking_is_one_statement_and_a_refusal_one_more(
        self, database: Database, clock: FakeClock
    ) -> None:
        """Taking, extending and taking over run at every renewal and every outbox
        claim: one INSERT ... ON CONFLICT each, not a savepoint and a failing insert.
        A refusal reads the holder's name as well."""
        a, b = leases(database, clock, "a"), leases(database, clock, "b")
        with statements(database) as sent:
            assert await a.take("session", "s1") is None
        assert len(sent) == 1
        assert "ON CONFLICT" in sent[0]
        with statements(database) as sent:
            assert await a.take("session", "s1") is None
        assert len(sent) == 1
        with statements(database) as sent:
            assert await b.take("session", "s1") == "a"
        assert len(sent) == 2
        await clock.advance(TTL)
        with statements(database) as sent:
            assert await b.take("session", "s1") is None
        assert len(sent) == 1
        assert await a.holders("session") == {"s1": "b"}

    async def test_an_expired_lease_is_taken_over(
        self, database: Database, clock: FakeClock
    ) -> None:
        a, b = leases(database, clock, "a"), leases(database, clock, "b")
        await a.take("session", "s1")
        await clock.advance(TTL)
        assert await b.take("session", "s1") is None
        assert await a.take("session", "s1") == "b"  # the old owner lost it

    async def test_renewal_keeps_only_our_leases_alive(
        self, database: Database, clock: FakeClock
    ) -> None:
        a, b = leases(database, clock, "a"), leases(database, clock, "b")
        await a.take("session", "mine")
        await b.take("session", "theirs")
        await clock.advance(TTL - 1)
        assert await a.renew() == 1
        await clock.advance(2)
        assert await a.holders("session") == {"mine": "a"}  # b's has expired

    async def test_keep_alive_renews_a_third_of_the_lease_apart(
        self, database: Database, clock: FakeClock
    ) -> None:
        a, b = leases(database, clock, "a"), leases(database, clock, "b")
        await a.take("session", "s1")

        keeping = asyncio.ensure_future(a.keep_alive())
        try:
            for _ in range(6):  # two whole lease times
                await clock.wait_for_sleepers()
                await clock.advance(TTL / 3)
            await clock.wait_for_sleepers()  # the last renewal has landed
            assert await b.take("session", "s1") == "a"
        finally:
            keeping.cancel()

    async def test_close_gives_back_only_our_own(
        self, database: Database, clock: FakeClock
    ) -> None:
        a, b = leases(database, clock, "a"), leases(database, clock, "b")
        await a.take("session", "s1")
        await b.take("session", "s2")
        await a.close()
        assert await b.holders("session") == {"s2": "b"}
        assert await b.take("session", "s1") is None  # at once, not on expiry


class TestLiveness:
    """What :class:`Leases` asks of its liveness, and when."""

    async def test_start_check_and_close_reach_the_liveness(
        self, database: Database, clock: FakeClock
    ) -> None:
        proof = RecordingProof(failing=1)
        a = Leases(database, ttl_seconds=TTL, owner="a", clock=clock, liveness=proof)
        await a.start()
        await a.take("session", "s1")
        b = leases(database, clock, "b")

        keeping = asyncio.ensure_future(a.keep_alive())
        try:
            with capture_logs() as logs:
                for _ in range(6):  # two lease times; the first check fails
                    await clock.wait_for_sleepers()
                    await clock.advance(TTL / 3)
                await clock.wait_for_sleepers()
        finally:
            keeping.cancel()
        assert proof.started == ["a"]
        assert proof.checks == 6
        assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
            "leases.liveness_failed"
        ]
        assert await b.take("session", "s1") == "a"  # renewals went on regardless
        await a.close()
        assert proof.closed
        assert await b.take("session", "s1") is None

    async def test_without_proof_a_holder_is_refused_until_its_lease_expires(
        self, database: Database, clock: FakeClock
    ) -> None:
        """NoProof: nobody is ever provably dead, so expiry alone frees work."""
        a = Leases(database, ttl_seconds=TTL, owner="a", clock=clock, liveness=NoProof())
        b = Leases(database, ttl_seconds=TTL, owner="b", clock=clock, liveness=NoProof())
        await a.take("session", "s1")
        assert await b.take("session", "s1") == "a"
        assert await b.take_over_dead() == []
        assert await b.holders("session") == {"s1": "a"}
        await clock.advance(TTL)
        assert await b.take("session", "s1") is None


class TestDeadHolders:
    """A holder the store proves dead (a killed predecessor) loses its work at once."""

    async def test_a_dead_predecessors_lease_is_taken_at_once(
        self, processes: Processes, clock: FakeClock
    ) -> None:
        a = await processes.start("a")
        await a.take("session", "s1")
        await a.take("session", "s2")
        await processes.kill("a")
        b = await processes.start("b")
        with capture_logs() as logs:
            assert await b.take("session", "s1") is None  # no clock advance: at once
        assert await b.holders("session") == {"s1": "b"}  # s2 expired with it
        taken = [e for e in logs if e["event"] == "leases.taken_over_dead"]
        assert taken == [
            {
                "event": "leases.taken_over_dead",
                "log_level": "info",
                "owner": "b",
                "owners": ["a"],
                "count": 2,
            }
        ]

    async def test_take_over_dead_expires_and_returns_the_predecessors_leases(
        self, processes: Processes, clock: FakeClock
    ) -> None:
        a = await processes.start("a")
        await a.take("session", "s1")
        await TestOutbox.record(processes.database("a"), clock, a, "c1")
        assert await TestOutbox.claim(processes.database("a"), clock, a, "c1") is not None
        await processes.kill("a")  # mid-post
        b = await processes.start("b")
        database = processes.database("b")
        assert await TestOutbox.recover(database, clock, b) == []  # a's lease still runs

        assert await b.take_over_dead() == [("completion", "c1"), ("session", "s1")]
        assert await b.holders("session") == {}
        assert await b.holders("completion") == {}
        assert await TestOutbox.recover(database, clock, b) == ["c1"]  # abandoned now
        assert (await database.run(repository.delivery_statuses)) == {"c1": "uncertain"}
        assert await b.take_over_dead() == []

    async def test_a_live_neighbour_keeps_its_leases(
        self, pg_processes: Processes, clock: FakeClock
    ) -> None:
        """PostgreSQL, two live processes: B cannot take A's work while A lives."""
        a = await pg_processes.start("a")
        b = await pg_processes.start("b")
        await a.take("session", "s1")
        assert await b.take("session", "s1") == "a"
        assert await b.take_over_dead() == []
        assert await a.holders("session") == {"s1": "a"}

    async def test_a_neighbour_killed_is_taken_over_at_once(
        self, pg_processes: Processes, clock: FakeClock
    ) -> None:
        a = await pg_processes.start("a")
        b = await pg_processes.start("b")
        c = await pg_processes.start("c")
        await a.take("session", "s1")
        await c.take("session", "s2")
        await pg_processes.kill("a")
        assert await b.take("session", "s1") is None  # no clock advance
        assert await b.take("session", "s2") == "c"  # c lives

    async def test_take_over_dead_lists_only_the_dead_neighbours_leases(
        self, pg_processes: Processes, clock: FakeClock
    ) -> None:
        a = await pg_processes.start("a")
        b = await pg_processes.start("b")
        c = await pg_processes.start("c")
        await a.take("session", "s1")
        await a.take("completion", "c1")
        await c.take("session", "s2")
        await pg_processes.kill("a")
        assert await b.take_over_dead() == [("completion", "c1"), ("session", "s1")]
        assert await b.holders("session") == {"s2": "c"}


class TestOutbox:
    """The completion outbox under leases: a live process's rows are never touched."""

    @staticmethod
    async def record(database: Database, clock: FakeClock, owner: Leases, cid: str) -> None:
        now = clock.now()
        await database.run(
            lambda conn: repository.insert_completion(
                conn,
                completion_id=cid,
                session_key="subagent:x",
                outcome="completed",
                result="r",
                at=now,
                owner=owner.owner,
                until=now + owner.ttl,
            )
        )

    @staticmethod
    async def claim(database: Database, clock: FakeClock, who: Leases, cid: str):
        now = clock.now()
        return await database.run(
            lambda conn: repository.claim(conn, cid, owner=who.owner, now=now, until=now + who.ttl)
        )

    @staticmethod
    async def recover(database: Database, clock: FakeClock, who: Leases) -> list[str]:
        now = clock.now()
        rows = await database.run(
            lambda conn: repository.recover_pending(conn, owner=who.owner, now=now)
        )
        return [row.completion_id for row in rows]

    async def test_a_live_process_posting_is_left_alone(
        self, database: Database, clock: FakeClock
    ) -> None:
        """B starting up while A posts: A's row stays A's, not even marked uncertain."""
        a, b = leases(database, clock, "a"), leases(database, clock, "b")
        await self.record(database, clock, a, "c1")
        assert await self.claim(database, clock, a, "c1") is not None  # A is posting
        assert await self.recover(database, clock, b) == []
        assert await self.claim(database, clock, b, "c1") is None
        statuses = await database.run(repository.delivery_statuses)
        assert statuses == {"c1": "sending"}

    async def test_a_dead_process_post_is_taken_over_once_its_lease_expires(
        self, database: Database, clock: FakeClock
    ) -> None:
        a, b = leases(database, clock, "a"), leases(database, clock, "b")
        await self.record(database, clock, a, "c1")
        await self.claim(database, clock, a, "c1")  # then A is killed mid-post
        await clock.advance(TTL)
        assert await self.recover(database, clock, b) == ["c1"]
        assert (await database.run(repository.delivery_statuses)) == {"c1": "uncertain"}
        row = await self.claim(database, clock, b, "c1")
        assert row is not None
        assert row.uncertain  # B looks before posting again
        assert await self.claim(database, clock, a, "c1") is None

    async def test_a_process_never_recovers_its_own_rows(
        self, database: Database, clock: FakeClock
    ) -> None:
        a = leases(database, clock, "a")
        await self.record(database, clock, a, "c1")
        await clock.advance(TTL * 2)  # even with its lease lapsed (a store hiccup)
        assert await self.recover(database, clock, a) == []

    async def test_delivered_releases_the_lease(self, database: Database, clock: FakeClock) -> None:
        a = leases(database, clock, "a")
        await self.record(database, clock, a, "c1")
        await self.claim(database, clock, a, "c1")
        now = clock.now()
        await database.run(
            lambda conn: repository.mark_delivered(
                conn,
                "c1",
                mode="bound",
                reason="r",
                destination="d",
                message_id="m",
                at=now,
                owner="a",
            )
        )
        assert await a.holders("completion") == {}


def _factory(tree, log, on_crash):
    return Agent(tree, log, ScriptedProvider([]), ToolRegistry(), on_crash=on_crash)


class TestSessionActor:
    async def test_a_session_another_process_runs_is_refused_until_its_lease_expires(
        self, database: Database, clock: FakeClock
    ) -> None:
        a, b = leases(database, clock, "a"), leases(database, clock, "b")
        first = SessionRuntime(SessionLog(database), _factory, clock=clock, leases=a)
        second = SessionRuntime(SessionLog(database), _factory, clock=clock, leases=b)
        await first.get("s1")
        with pytest.raises(SessionBusy, match="another bot process"):
            await second.get("s1")
        await clock.advance(TTL)  # the first process died: nobody renews
        assert await second.get("s1") is not None

    async def test_a_session_a_dead_predecessor_ran_is_taken_at_once(
        self, processes: Processes, clock: FakeClock
    ) -> None:
        """After ``kill -9`` and a restart, the first message to a session the dead
        process had resident starts it here, with no SessionBusy."""
        a = await processes.start("a")
        first = SessionRuntime(SessionLog(processes.database("a")), _factory, clock=clock, leases=a)
        await first.get("s1")
        await processes.kill("a")
        b = await processes.start("b")
        second = SessionRuntime(
            SessionLog(processes.database("b")), _factory, clock=clock, leases=b
        )
        assert await second.get("s1") is not None  # no clock advance
        assert await b.holders("session") == {"s1": "b"}

    async def test_eviction_gives_the_lease_back(
        self, database: Database, clock: FakeClock
    ) -> None:
        a = leases(database, clock, "a")
        runtime = SessionRuntime(
            SessionLog(database), _factory, clock=clock, leases=a, idle_evict_seconds=10
        )
        await runtime.get("s1")

        upkeep = asyncio.ensure_future(runtime.run_maintenance(interval_seconds=60))
        try:
            await clock.wait_for_sleepers()
            await clock.advance(60)
            await clock.wait_for_sleepers()  # the pass, with its release, is done
        finally:
            upkeep.cancel()
        assert runtime.resident() == []
        assert await a.holders("session") == {}
