"""Leases over a real store: who holds work, until when, and who may take it over.

Two ``Leases`` objects with different owners stand for two bot processes; the
fake clock stands for time passing (a killed process simply stops renewing).
"""

from __future__ import annotations

import asyncio

import pytest

from core.agent import Agent, ToolRegistry
from core.clock import FakeClock
from core.leases import Leases
from core.providers.scripted import ScriptedProvider
from core.runtime import SessionBusy, SessionRuntime
from core.sessions.log import SessionLog
from core.store import Database
from core.subagents import repository

TTL = 30.0


def leases(database: Database, clock: FakeClock, owner: str) -> Leases:
    return Leases(database, ttl_seconds=TTL, owner=owner, clock=clock)


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
