"""Several real bot processes as shards of one bot, over one PostgreSQL store.

Two guilds, one per shard of two; each process connects one shard. Everything a
deployment relies on is checked end to end: each guild's commands reach only its
shard's process, completions are delivered once in their own threads, a process
killed mid-run is taken over after its restart, the external agents it left
running are stopped by its restart (and only those), processes starting together
migrate once, an every-server override crosses processes, and SQLite refuses a
second process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bot.__main__ import EXIT_USAGE
from core.store.migrations import SCHEMA_VERSION
from tests.e2e.helpers import content
from tests.fixtures.acp import STUBBORN, Watched, group_members
from tests.fixtures.shard_processes import (
    HOLD,
    BotProcess,
    ShardWorld,
    announcements,
    let_go,
    running_shard_world,
    wait_until,
)
from tests.fixtures.stores import PG_DSN, PG_URL, pg_schema, require_postgres

LEASE_SECONDS = 2.0
"""Short, so a restarted process takes a killed one's work over within seconds."""


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


def pg_store(schema: str, **more: Any) -> dict[str, Any]:
    return {"url": PG_URL, "schema": schema, "lease_seconds": LEASE_SECONDS, **more}


async def two_processes(world: ShardWorld, schema: str) -> list[BotProcess]:
    """Shard 0's process and shard 1's, started at the same instant, both ready."""
    processes = await asyncio.gather(
        *(world.start(f"shard{i}", world.config(pg_store(schema), shard_ids=[i])) for i in (0, 1))
    )
    for i, process in enumerate(processes):
        await world.wait_ready(process, [i])
    return processes


async def answer(handle: Any) -> str:
    """What a command answered: its message, or the followup after a deferral."""
    async with asyncio.timeout(30):
        response = await handle.wait_response()
        if response.callback_type == 5:  # deferred: the answer is a followup
            (response,) = await handle.wait_followups(1)
    return content(response)


def interaction_guilds(world: ShardWorld, shard_id: int) -> set[int]:
    """Guilds whose interactions the fake sent to connections of shard ``shard_id``."""
    return {
        int(event.data["guild_id"])
        for event in world.fake.events(world.bot, "INTERACTION_CREATE", shard_id=shard_id)
    }


def logged_guilds(process: BotProcess) -> set[int]:
    """Every guild the process's log lines name: the guilds it did any work for."""
    return {int(line["guild"]) for line in process.log_events() if line.get("guild")}


def logged(process: BotProcess, event: str, key: str) -> set[str]:
    return {str(line[key]) for line in process.log_events(event)}


async def delivered_once(world: ShardWorld, threads: list[str]) -> None:
    """Each thread gets exactly one announcement, and no parent channel gets any.

    Returns once every thread has also been let go: its process has logged the delivery.
    """

    def all_there() -> bool | None:
        done = all(announcements(world.fake, t) and let_go(world.fake, t) for t in threads)
        return True if done else None

    await wait_until(world.fake, all_there)
    for thread in threads:
        assert len(announcements(world.fake, thread)) == 1, thread
    for channel in world.channels:
        assert announcements(world.fake, channel.id) == []


@pytest.mark.postgres
async def test_each_guild_is_served_by_its_shard_and_each_completion_lands_once(
    schema: str, world: ShardWorld
) -> None:
    """Concurrent spawns in both guilds: every one answered by its own shard's process,
    announced once, in its own thread."""
    processes = await two_processes(world, schema)
    threads = await asyncio.gather(*(world.spawn(i % 2, f"task {i}") for i in range(6)))
    assert len(set(threads)) == 6
    await delivered_once(world, threads)
    await world.stop_all()  # its logs are complete once it has exited

    for index, process in enumerate(processes):
        guild = world.guilds[index]
        its_threads = {t for i, t in enumerate(threads) if i % 2 == index}
        assert interaction_guilds(world, index) == {guild.id}
        assert logged_guilds(process) == {guild.id}
        assert logged(process, "binding.bound", "conversation_id") == its_threads
        assert logged(process, "delivery.sent", "destination") == its_threads
        for thread in its_threads:  # each thread was opened in its own guild
            assert world.fake.state.channels[int(thread)].guild_id == guild.id


@pytest.mark.postgres
async def test_a_killed_process_is_taken_over_after_its_restart(
    schema: str, world: ShardWorld
) -> None:
    """kill -9 with turns mid-run in both guilds' processes, of guild 0's; guild 1 goes on.
    After the restart every completion of both guilds is delivered exactly once, nothing
    in a parent channel."""
    first, second = await two_processes(world, schema)
    held = await asyncio.gather(*(world.spawn(0, f"{HOLD} long task {i}") for i in range(3)))
    held_elsewhere = await asyncio.gather(*(world.spawn(1, f"{HOLD} other {i}") for i in range(2)))
    await wait_until(world.fake, lambda: True if world.llm.held >= 5 else None)
    await first.kill()
    world.llm.release()  # guild 1's turns finish; guild 0's ended with their process
    done_elsewhere = await asyncio.gather(*(world.spawn(1, f"other {i}") for i in range(3)))

    await world.restart(first, [0])
    after = await asyncio.gather(*(world.spawn(0, f"after restart {i}") for i in range(2)))

    await delivered_once(world, [*held, *held_elsewhere, *done_elsewhere, *after])
    for thread in held:  # cut mid-turn: announced as failed, never silently re-run
        (announcement,) = announcements(world.fake, thread)
        assert "failed" in announcement
    for thread in [*held_elsewhere, *done_elsewhere, *after]:
        (announcement,) = announcements(world.fake, thread)
        assert "completed its task." in announcement
    assert second.returncode() is None
    await world.stop_all()  # its logs are complete once it has exited
    assert logged(first, "delivery.sent", "destination") == {*held, *after}
    assert logged_guilds(second) == {world.guilds[1].id}  # it never took guild 0's work


STUBBORN_AGENT = f"""
[acp_agents.stubborn]
command = ["python", {json.dumps(str(STUBBORN))}]
[agents.coder]
display_name = "Coder"
acp = "stubborn"
"""
"""An external agent that, like codex-acp, does not exit when its stdin closes."""


async def agent_pid(world: ShardWorld, thread: str, after: int = 0) -> int:
    """The pid the stubborn agent gave in its answer in ``thread`` (after message ``after``)."""

    def probe() -> int | None:
        for message in world.fake.messages_in(int(thread)):
            found = re.match(r"pid (\d+): ", message.content)
            if found and message.id > after:
                return int(found.group(1))
        return None

    return await wait_until(world.fake, probe)


class TestAgentsAKilledProcessLeft:
    """An external agent that, like codex-acp, outlives its stdin: a bot process killed
    with ``kill -9`` leaves it running on its session, beside the one started next."""

    async def test_the_restart_stops_them_before_it_is_ready(self, world: ShardWorld) -> None:
        """One process (SQLite): nobody else can stop the agent; its restart does, child
        and all, before it takes any message; the next message starts a new agent."""
        store = {"url": f"sqlite:///{world.tmp / 'bot.db'}"}
        config = world.config(store, shard_ids=None, shard_count=None, extra=STUBBORN_AGENT)
        bot = await world.run("bot", config, [0])
        thread = await world.spawn(0, "hello", mode="session", agent="coder")
        left = await agent_pid(world, thread)
        try:
            agent, group = Watched([left]), Watched(group_members(left))
            assert len(group.pids) == 2  # the agent and the child it started

            await bot.kill()
            assert agent.running()  # EOF on its stdin: it stays

            await world.restart(bot, [0])
            assert not agent.running()  # stopped before the restart was ready
            await group.ended()  # its child too

            said = await world.fake.user_says(int(thread), world.members[0], "again")
            again = await agent_pid(world, thread, after=said.id)
            assert again != left
            assert len(group_members(again)) == 2  # the new one runs
            await world.stop_all()  # its logs are complete once it has exited
            (stopped,) = bot.log_events("acp.orphan_stopped")
            assert (stopped["pid"], stopped["agent"]) == (left, "stubborn")
        finally:
            kill_groups(left)

    @pytest.mark.postgres
    async def test_a_live_neighbours_agent_is_never_stopped(
        self, schema: str, world: ShardWorld
    ) -> None:
        """Two shards on PostgreSQL, an agent running in each guild's thread; guild 0's
        process is killed. Its agent is stopped (by its neighbour or its restart, the
        first to prove it dead), guild 1's is never touched: its process lives."""
        processes = [
            await world.start(
                f"shard{i}",
                world.config(pg_store(schema), shard_ids=[i], extra=STUBBORN_AGENT),
            )
            for i in (0, 1)
        ]
        for i, process in enumerate(processes):
            await world.wait_ready(process, [i])
        threads = [await world.spawn(i, "hello", mode="session", agent="coder") for i in (0, 1)]
        left, kept = [await agent_pid(world, thread) for thread in threads]
        try:
            group = Watched(group_members(left))
            await processes[0].kill()
            await world.restart(processes[0], [0])
            await group.ended()

            assert len(group_members(kept)) == 2
            said = await world.fake.user_says(int(threads[0]), world.members[0], "again")
            again = await agent_pid(world, threads[0], after=said.id)
            assert len(group_members(again)) == 2
            await world.stop_all()  # their logs are complete once they have exited
            stopped = [
                line["pid"] for p in processes for line in p.log_events("acp.orphan_stopped")
            ]
            assert set(stopped) == {left}
        finally:
            kill_groups(left, kept)


def kill_groups(*pids: int) -> None:
    """Whatever happened in a test, no agent it started outlives it."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


@pytest.mark.postgres
async def test_two_processes_starting_together_migrate_once(schema: str, world: ShardWorld) -> None:
    """Both start at the same instant on an empty schema; the schema is migrated once."""
    await two_processes(world, schema)
    conn = await asyncpg.connect(PG_DSN)
    try:
        versions = [
            row["version"]
            for row in await conn.fetch(f'SELECT version FROM "{schema}".schema_version')
        ]
    finally:
        await conn.close()
    assert sorted(versions) == list(range(1, SCHEMA_VERSION + 1))


@pytest.mark.postgres
async def test_an_every_server_override_reaches_the_other_process(
    schema: str, world: ShardWorld
) -> None:
    """An operator turns subagent threads off for every server through guild 0's process;
    guild 1's process refuses a thread spawn within a second."""
    await two_processes(world, schema)
    operator = world.admins[0]
    handle = await world.fake.invoke_command(
        world.guilds[0],
        world.channels[0],
        operator,
        "config set",
        {
            "key": "channels.discord.threadBindings.spawnSubagentSessions",
            "value": "off",
            "everywhere": True,
        },
    )
    assert "for every server" in await answer(handle)

    async def refused_in_guild_1() -> None:
        while True:
            spawn = await world.fake.invoke_command(
                world.guilds[1],
                world.channels[1],
                world.members[1],
                "agents spawn",
                {"task": "a thread please", "mode": "session"},
            )
            if "spawnSubagentSessions" in await answer(spawn):
                return
            # accepted: the change had not arrived yet; ask again

    # No wall-clock assertion (tests never make one): a deadline only guards a hang.
    # The notification itself arrives in milliseconds (test_change_feed.py).
    async with asyncio.timeout(10):
        await refused_in_guild_1()


async def test_a_second_process_on_one_sqlite_file_is_refused(world: ShardWorld) -> None:
    """SQLite serves one process: the second one exits at once, naming PostgreSQL."""
    store = {"url": f"sqlite:///{world.tmp / 'one.db'}"}
    config = world.config(store, shard_ids=None, shard_count=None)
    first = await world.run("sqlite1", config, [0])
    second = await world.start("sqlite2", config)
    assert await second.wait_exit() == EXIT_USAGE
    assert "PostgreSQL" in second.output()
    assert "another bot process" in second.output()
    assert first.returncode() is None
