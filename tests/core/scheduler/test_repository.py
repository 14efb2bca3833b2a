"""The scheduler's store, on every backend: jobs kept per owner and server, runs claimed once.

The claim is what keeps a scheduled job from running twice or never: a run is a row
(unique on job and due time) inserted in the transaction that moves its job on, under
a ``schedule`` lease of the claimer. Every time here is an explicit datetime; two
processes are two owners (and, for the race, two ``Database`` objects on one store).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import Connection, select, text

from core import leases
from core.bindings.records import ConversationRef
from core.scheduler import repository
from core.scheduler.records import Job, run_key
from core.scheduler.repository import Claim, JobLimit, Planned
from core.sharding import EVERY_SHARD, ShardSet, shard_of
from core.store import Database
from core.store.tables import LeaseRow, table_of
from tests.fixtures.stores import PG_DSN, StoreFactory, store_factory

DUE = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NOW = DUE + timedelta(seconds=1)
TTL = timedelta(seconds=30)
HOUR = timedelta(hours=1)
G0 = "1100000000004194304"  # (id >> 22) % 2 == 0
G1 = "1100000000000000000"  # (id >> 22) % 2 == 1
_LEASES = table_of(LeaseRow)


def job(job_id: str, *, owner: str = "u1", scope: str | None = G0, **changes: object) -> Job:
    """An hourly thread job due at ``DUE``, created in order of its id."""
    made = DUE - timedelta(days=1) + timedelta(seconds=sum(map(ord, job_id)))
    base = Job(
        job_id=job_id,
        kind="thread",
        scope=scope,
        conversation=ConversationRef(
            channel="discord", account_id="acct", conversation_id="t-1", parent_conversation_id="c"
        ),
        owner_id=owner,
        name=f"job {job_id}",
        spec="every 1h",
        timezone="UTC",
        task="say hello",
        state="active",
        anchor_at=made,
        next_run_at=DUE,
        created_at=made,
        updated_at=made,
        session_key="agent:main:main",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def hourly(j: Job) -> Planned:
    """The plan of a job on time: its due time now, the next an hour later."""
    assert j.next_run_at is not None
    return Planned(j.next_run_at, 1, missed=False, late=False, next_run_at=j.next_run_at + HOUR)


def once(j: Job) -> Planned:
    """A one-shot's plan: run now, never again."""
    return replace(hourly(j), next_run_at=None)


async def add(database: Database, *jobs: Job, limit: int = 100) -> None:
    for j in jobs:
        await database.run(partial(repository.insert_job, limit=limit), j)


async def claim(
    database: Database,
    now: datetime = NOW,
    plan: Callable[[Job], Planned] = hourly,
    *,
    owner: str = "A",
    shards: ShardSet = EVERY_SHARD,
    limit: int = 100,
) -> list[Claim]:
    claim_due = partial(
        repository.claim_due,
        plan=plan,
        owner=owner,
        lease_until=now + TTL,
        shards=shards,
        limit=limit,
    )
    claimed: list[Claim] = await database.run(claim_due, now)
    return claimed


def lease_of(conn: Connection, key: str) -> tuple[str, datetime] | None:
    """The ``schedule`` lease on a run: (owner, expiry), or None when nobody holds it."""
    row = conn.execute(
        select(_LEASES.c.owner, _LEASES.c.expires_at).where(
            _LEASES.c.kind == "schedule", _LEASES.c.key == key
        )
    ).first()
    return None if row is None else (row.owner, row.expires_at)


async def stored(database: Database, job_id: str) -> Job:
    found = await database.run(repository.get_job, job_id)
    assert found is not None
    return found


class TestJobs:
    async def test_the_limit_counts_live_jobs_per_owner_per_server(
        self, database: Database
    ) -> None:
        """Active and paused jobs count against the limit, removed and done ones do not;
        another owner, or the same owner in another server, has a limit of their own."""
        await add(
            database,
            job("a1"),
            job("p1", state="paused"),
            job("r1", state="removed", next_run_at=None),
            job("d1", state="done", next_run_at=None),
        )
        assert await database.run(repository.count_live_jobs, G0, "u1") == 2
        await add(database, job("a2"), limit=3)
        with pytest.raises(JobLimit) as refused:
            await add(database, job("a3"), limit=3)
        assert refused.value.limit == 3
        assert await database.run(repository.get_job, "a3") is None
        await add(
            database, job("o1", owner="u2"), job("g1", scope=G1), job("n1", scope=None), limit=3
        )

    async def test_list_is_one_owners_or_everyones_in_one_server(self, database: Database) -> None:
        """Live jobs only, oldest first; another server's never show."""
        await add(
            database,
            job("a"),
            job("b", state="paused"),
            job("c", state="removed", next_run_at=None),
            job("d", owner="u2"),
            job("e", scope=G1),
            job("f", scope=None, owner="u2"),
        )

        async def ids(scope: str | None, owner: str | None) -> list[str]:
            return [j.job_id for j in await database.run(repository.list_jobs, scope, owner)]

        assert await ids(G0, "u1") == ["a", "b"]
        assert await ids(G0, None) == ["a", "b", "d"]
        assert await ids(G1, None) == ["e"]
        assert await ids(None, None) == ["f"]
        assert await ids(G1, "u2") == []
        assert await stored(database, "a") == job("a")  # every field comes back as written


class TestClaim:
    async def test_a_due_job_is_claimed_once(self, database: Database) -> None:
        """The second claim at the same moment finds nothing: the job moved on in the
        first one's transaction."""
        await add(database, job("j"))
        (first,) = await claim(database)
        assert (first.run.status, first.run.due_at, first.run.run_key) == (
            "claimed",
            DUE,
            run_key("j", DUE),
        )
        assert (first.job.state, first.job.next_run_at) == ("active", DUE + HOUR)
        moved = await stored(database, "j")
        assert (moved.state, moved.next_run_at, moved.updated_at) == ("active", DUE + HOUR, NOW)
        assert await claim(database) == []
        assert len(await database.run(repository.runs_of, "j")) == 1

    async def test_the_run_row_is_unique_per_due_time(self, database: Database) -> None:
        """A job put back on a due time already claimed gets no second run of it."""
        await add(database, job("j"))
        (first,) = await claim(database)
        await database.run(repository.save_job, job("j"))  # next_run_at back to DUE
        assert await claim(database, owner="B") == []
        assert [r.run_key for r in await database.run(repository.runs_of, "j")] == [
            first.run.run_key
        ]
        assert await database.run(lease_of, first.run.run_key) == ("A", NOW + TTL)

    async def test_not_due_or_not_active_is_not_claimed(self, database: Database) -> None:
        await add(
            database,
            job("later", next_run_at=NOW + timedelta(seconds=1)),
            job("paused", state="paused"),
            job("removed", state="removed"),
            job("done", state="done"),
        )
        assert await claim(database) == []
        for job_id in ("later", "paused", "removed", "done"):
            assert await database.run(repository.runs_of, job_id) == []

    async def test_a_one_shot_is_done_once_claimed(self, database: Database) -> None:
        await add(database, job("j", spec="at 09:00"))
        (claimed,) = await claim(database, plan=once)
        assert (claimed.job.state, claimed.job.next_run_at) == ("done", None)
        done = await stored(database, "j")
        assert (done.state, done.next_run_at) == ("done", None)
        assert await database.run(repository.count_live_jobs, G0, "u1") == 0
        assert await claim(database, NOW + HOUR) == []

    async def test_a_missed_run_is_recorded_without_a_lease(self, database: Database) -> None:
        """Past the grace: a ``missed`` row standing for every due time, returned so the
        caller can say so, but nothing to dispatch and nothing held."""
        await add(database, job("j"))
        missed = partial(Planned, DUE, 5, missed=True, late=True, next_run_at=DUE + HOUR)
        (claimed,) = await claim(database, plan=lambda _: missed())
        assert (claimed.run.status, claimed.run.due_count) == ("missed", 5)
        assert await database.run(lease_of, claimed.run.run_key) is None
        (row,) = await database.run(repository.runs_of, "j")
        assert (row.status, row.due_count, row.late) == ("missed", 5, True)
        assert (await stored(database, "j")).last_result == f"missed: {row.detail}"
        assert await database.run(repository.abandoned_runs, "B", NOW + HOUR) == []

    async def test_a_skipped_run_is_recorded_with_its_reason(self, database: Database) -> None:
        await add(database, job("j"))
        (claimed,) = await claim(database, plan=lambda j: replace(hourly(j), skip="flag off"))
        assert (claimed.run.status, claimed.run.detail) == ("skipped", "flag off")
        assert await database.run(lease_of, claimed.run.run_key) is None
        assert [r.status for r in await database.run(repository.runs_of, "j")] == ["skipped"]
        moved = await stored(database, "j")
        assert (moved.last_result, moved.next_run_at) == ("skipped: flag off", DUE + HOUR)

    async def test_a_process_claims_only_its_shards_jobs(self, database: Database) -> None:
        """Discord's formula in SQL (on PostgreSQL, ``bigint >> integer``: the shift bound
        as a BIGINT had no operator there), shard 0 takes its guilds and the jobs in no guild."""
        assert (shard_of(int(G0), 2), shard_of(int(G1), 2)) == (0, 1)
        await add(database, job("zero", scope=G0), job("one", scope=G1), job("none", scope=None))
        first = await claim(database, shards=ShardSet.of(2, [0]))
        assert sorted(c.job.job_id for c in first) == ["none", "zero"]
        assert [c.job.job_id for c in await claim(database, shards=ShardSet.of(2, [1]))] == ["one"]
        assert await claim(database) == []


class TestLeases:
    async def test_the_claimer_holds_the_run_until_it_moves_on(self, database: Database) -> None:
        """Only the claimer's move lets the lease go; the job keeps the run's result."""
        await add(database, job("j"))
        (claimed,) = await claim(database)
        key = claimed.run.run_key
        assert await database.run(lease_of, key) == ("A", NOW + TTL)
        finish = partial(repository.finish_run, owner="B", session_key="s-1")
        await database.run(finish, claimed.run, "working", NOW)
        assert await database.run(lease_of, key) == ("A", NOW + TTL)  # never another's
        finish = partial(repository.finish_run, owner="A", result="completed")
        await database.run(finish, claimed.run, "finished", NOW + HOUR)
        assert await database.run(lease_of, key) is None
        (run,) = await database.run(repository.runs_of, "j")
        assert (run.status, run.session_key, run.updated_at) == ("finished", "s-1", NOW + HOUR)
        assert (await stored(database, "j")).last_result == "completed"
        assert await database.run(repository.last_run, "j") == run
        assert await database.run(partial(repository.last_run, before=DUE), "j") is None

    async def test_abandoned_runs_are_claimed_ones_nobody_live_holds(
        self, database: Database
    ) -> None:
        """A lapsed or released lease makes a claimed run another's to finish; a live one,
        the caller's own (even lapsed) or a run already started never do."""
        await add(database, job("held"), job("freed"), job("started"))
        claims = {c.job.job_id: c.run for c in await claim(database)}
        await database.run(leases.release, "schedule", claims["freed"].run_key, "A")
        await database.run(
            partial(repository.finish_run, owner="A"), claims["started"], "working", NOW
        )

        async def abandoned(owner: str, now: datetime) -> list[str]:
            runs = await database.run(repository.abandoned_runs, owner, now)
            return [r.job_id for r in runs]

        assert await abandoned("B", NOW + TTL / 2) == ["freed"]
        assert sorted(await abandoned("B", NOW + TTL)) == ["freed", "held"]
        assert await abandoned("A", NOW + HOUR) == ["freed"]
        assert [r.job_id for r in await database.run(repository.working_runs)] == ["started"]


class TestConcurrency:
    async def test_two_processes_never_claim_one_run_twice(
        self, open_store: StoreFactory, database: Database
    ) -> None:
        """Two stores claiming side by side, in small batches: each due run is claimed by
        exactly one of them (on PostgreSQL ``SKIP LOCKED`` splits the jobs between them)."""
        other = await open_store()
        await add(database, *(job(f"j{n:02}", owner=f"u{n}") for n in range(24)))

        async def drain(db: Database, owner: str) -> list[str]:
            keys: list[str] = []
            while batch := await claim(db, owner=owner, limit=3):
                keys += [c.run.run_key for c in batch]
                await asyncio.sleep(0)
            return keys

        ours, theirs = await asyncio.gather(drain(database, "A"), drain(other, "B"))
        assert len(ours) + len(theirs) == 24
        assert len(set(ours) | set(theirs)) == 24
        for key in ours + theirs:
            expected = "A" if key in ours else "B"
            assert (await database.run(lease_of, key) or ("?",))[0] == expected


@pytest.mark.postgres
async def test_a_job_locked_by_a_neighbour_is_skipped_not_waited_for(tmp_path: Path) -> None:
    """PostgreSQL's row locks: a job row another transaction holds is passed over at once
    (the neighbour claims it), and claimed once that transaction ends without claiming it."""
    async with store_factory("postgres", tmp_path) as open_store:
        database = await open_store()
        await add(database, job("a"), job("b"))
        schema = await database.run(lambda c: c.execute(text("SELECT current_schema()")).scalar())
        neighbour = await asyncpg.connect(PG_DSN, server_settings={"search_path": schema})
        try:
            async with neighbour.transaction():
                await neighbour.execute(
                    "SELECT 1 FROM scheduled_jobs WHERE job_id = 'a' FOR UPDATE"
                )
                async with asyncio.timeout(10):
                    assert [c.job.job_id for c in await claim(database)] == ["b"]
        finally:
            await neighbour.close()
        assert [c.job.job_id for c in await claim(database)] == ["a"]
