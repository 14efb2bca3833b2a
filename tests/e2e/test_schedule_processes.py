"""Scheduled runs across real ``python -m bot`` processes: started once, by the right one.

The bot runs as processes of their own (``tests/fixtures/shard_processes.py``) on the
real clock, so the jobs here are seconds away (``in 2s``, ``every 2s`` with
``[scheduler] min_interval_seconds = 1``). A process killed with ``kill -9`` between
its claim of a run and the run's ``⏰ Scheduled`` line leaves the run ``claimed``; its
restart starts it once, whether the line it was posting reached Discord or not. Two
shard processes over PostgreSQL each run their own guild's jobs, and no run twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from fakediscord.models import Message
from tests.e2e.helpers import content
from tests.fixtures.shard_processes import (
    ANSWER,
    ShardWorld,
    announcements,
    running_shard_world,
    wait_until,
)
from tests.fixtures.stores import PG_DSN, PG_URL, pg_schema, require_postgres

LEASE_SECONDS = 2.0
"""Short, so a run the killed process claimed is taken over within seconds."""
FAST = "[scheduler]\nmin_interval_seconds = 1\n"
NAME = "nightly"
LINE = f"⏰ Scheduled: {NAME}"
TASK = "tidy up the overnight notes"
STARTED = "scheduler.run.started"


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[ShardWorld]:
    async with running_shard_world(tmp_path) as built:
        yield built


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    """Tests ask for it before ``world``, so the processes stop before it is dropped."""
    await require_postgres()
    async with pg_schema() as name:
        yield name


async def schedule(world: ShardWorld, index: int, where: int, **options: str) -> str:
    """``/schedule add`` by guild ``index``'s member in channel or thread ``where``; what
    it answered."""
    handle = await world.fake.invoke_command(
        world.guilds[index],
        world.fake.channel(where),
        world.members[index],
        "schedule add",
        options,
    )
    async with asyncio.timeout(30):
        response = await handle.wait_response()
    return content(response)


async def session_thread(world: ShardWorld, task: str) -> int:
    """A session-mode subagent's thread in guild 0, once its task is announced there."""
    thread = int(await world.spawn(0, task, mode="session"))
    await wait_until(world.fake, lambda: True if announcements(world.fake, thread) else None)
    return thread


def run_rows(world: ShardWorld) -> list[tuple[str, str]]:
    """``(run_key, status)`` of every scheduled run in the SQLite store."""
    with contextlib.closing(sqlite3.connect(world.tmp / "bot.db")) as db:
        return db.execute("SELECT run_key, status FROM scheduled_runs").fetchall()


def lines_in(world: ShardWorld, thread: int) -> list[Message]:
    return [m for m in world.fake.messages_in(thread) if m.content == LINE]


def answers_after(world: ShardWorld, thread: int, message_id: int) -> list[Message]:
    """The persona's answers in the thread after a message."""
    return [
        m
        for m in world.fake.messages_in(thread)
        if m.id > message_id and m.webhook_id is not None and ANSWER in m.content
    ]


def asked(world: ShardWorld, text: str) -> int:
    """How many model requests carried ``text`` in their last user message."""
    count = 0
    for request in world.llm.requests:
        users = [m for m in request.json.get("messages", []) if m["role"] == "user"]
        count += bool(users) and text in str(users[-1].get("content"))
    return count


class TestARunClaimedByAKilledProcess:
    @pytest.mark.parametrize("post", ["lost", "landed"])
    async def test_is_started_once_after_the_restart(self, world: ShardWorld, post: str) -> None:
        """The process claims the run, logs it started and sends its ``⏰ Scheduled`` line;
        Discord holds that request and the process is killed. The request then never
        lands (``lost``) or lands after the death (``landed``); either way the restart
        takes the run over: one line in the thread, one turn, one answer, one run.
        Its start is logged once (the canary counts a second one as a duplicate run)."""
        # A lease far longer than the test: the restart proves its predecessor dead and
        # takes the run over at once, not when the lease would have lapsed.
        store = {"url": f"sqlite:///{world.tmp / 'bot.db'}", "lease_seconds": 600.0}
        config = world.config(store, shard_ids=None, shard_count=None)
        bot = await world.run("bot", config, [0])
        thread = await session_thread(world, "say hello")
        posts = f"/channels/{thread}/messages"
        gate = world.fake.hold("POST", posts)
        said = await schedule(world, 0, thread, when="in 2s", task=TASK, name=NAME)
        assert said.startswith(f"⏰ Scheduled “{NAME}”. Runs once in 2 seconds"), said

        held = await wait_until(
            world.fake,
            lambda: next(
                (
                    r
                    for r in world.fake.requests_matching("POST", posts)
                    if r.json["content"] == LINE
                ),
                None,
            ),
        )
        assert held.status is None  # held: Discord has not answered it
        assert gate.waiting == 1  # nothing else of the bot's is held
        ((run_key, status),) = run_rows(world)
        assert status == "claimed"
        assert not bot.log_events(STARTED)  # logged once the run's turn is recorded, not yet
        await bot.kill()

        if post == "lost":
            world.fake.fail_next("POST", posts, 500)  # what the held request meets instead
        gate.release()
        await wait_until(world.fake, lambda: held.status)
        assert held.fault == (post == "lost")
        assert len(lines_in(world, thread)) == int(post == "landed")

        await world.restart(bot, [0])
        line = await wait_until(world.fake, lambda: next(iter(lines_in(world, thread)), None))
        await wait_until(world.fake, lambda: answers_after(world, thread, line.id) or None)
        await world.stop_all()  # its logs are complete once it has exited

        assert len(lines_in(world, thread)) == 1
        assert len(answers_after(world, thread, line.id)) == 1
        assert asked(world, TASK) == 1
        ((key, status),) = run_rows(world)
        assert key == run_key
        assert status in ("working", "finished")
        (taken,) = bot.log_events("scheduler.run_taken_over")
        assert taken["run_key"] == run_key
        (started,) = bot.log_events(STARTED)  # once (the canary counts a second as a duplicate)
        assert (started["run_key"], started["kind"]) == (run_key, "thread")
        assert started["guild"] == str(world.guilds[0].id)


def pg_store(schema: str) -> dict[str, Any]:
    return {"url": PG_URL, "schema": schema, "lease_seconds": LEASE_SECONDS}


CLOSED = re.compile(r"⏰ “(g\d)” is done: its answer is in <#(\d+)>\.")


def closed_runs(world: ShardWorld, index: int) -> list[int]:
    """The threads of guild ``index``'s runs that ended, as its channel's lines say."""
    return [
        int(found.group(2))
        for m in world.fake.messages_in(world.channels[index].id)
        if (found := CLOSED.fullmatch(m.content)) and found.group(1) == f"g{index}"
    ]


@pytest.mark.postgres
async def test_each_guilds_runs_start_once_on_its_shards_process(
    schema: str, world: ShardWorld
) -> None:
    """``every 2s`` channel jobs in both guilds: each run is claimed and started by the
    process of its guild's shard, once across both, and spawns one thread, announced
    once."""
    processes = await asyncio.gather(
        *(
            world.start(f"shard{i}", world.config(pg_store(schema), shard_ids=[i], extra=FAST))
            for i in (0, 1)
        )
    )
    for i, process in enumerate(processes):
        await world.wait_ready(process, [i])
    for i in (0, 1):
        said = await schedule(
            world, i, world.channels[i].id, when="every 2s", task=f"check guild {i}", name=f"g{i}"
        )
        assert said.startswith(f"⏰ Scheduled “g{i}”. Runs every 2 seconds"), said

    def two_each() -> bool | None:
        closed = [closed_runs(world, i) for i in (0, 1)]
        ok = all(
            len(threads) >= 2 and all(announcements(world.fake, t) for t in threads)
            for threads in closed
        )
        return True if ok else None

    await wait_until(world.fake, two_each)
    await world.stop_all()  # their logs are complete once they have exited

    started = {i: process.log_events(STARTED) for i, process in enumerate(processes)}
    bound = {i: process.log_events("binding.bound") for i, process in enumerate(processes)}
    starts = Counter(line["run_key"] for lines in started.values() for line in lines)
    assert starts, "no run started"
    assert max(starts.values()) == 1, starts  # no run started twice, across both
    opened = Counter(line["target_session_key"] for lines in bound.values() for line in lines)
    for i in (0, 1):
        guild = str(world.guilds[i].id)
        assert started[i], f"shard {i}'s process started none of its guild's runs"
        assert {line["guild"] for line in started[i]} == {guild}
        assert {line["kind"] for line in started[i]} == {"channel"}
        keys = {line["session_key"] for line in started[i]}
        assert all(opened[key] <= 1 for key in keys)  # each run's thread opened once
        threads = {line["conversation_id"]: line["target_session_key"] for line in bound[i]}
        assert len(set(closed_runs(world, i))) == len(closed_runs(world, i))
        for thread in closed_runs(world, i):  # opened by the process that ran it
            assert threads[str(thread)] in keys
            assert world.fake.state.channels[thread].guild_id == world.guilds[i].id
            assert len(announcements(world.fake, thread)) == 1

    conn = await asyncpg.connect(PG_DSN)
    try:
        rows = await conn.fetch(f'SELECT run_key, status FROM "{schema}".scheduled_runs')
    finally:
        await conn.close()
    assert set(starts) <= {row["run_key"] for row in rows}
    ran = {row["run_key"] for row in rows if row["status"] in ("working", "finished")}
    assert ran <= set(starts)  # (a run the stop cut off mid-start stays claimed)
    assert len(ran) >= 4
