"""Several real bot processes as shards of one bot, over one PostgreSQL store.

Two guilds, one per shard of two; each process connects one shard. Everything a
deployment relies on is checked end to end: each guild's commands reach only its
shard's process, completions are delivered once in their own threads, a process
killed mid-run is taken over after its restart, processes starting together
migrate once, an every-server override crosses processes, and SQLite refuses a
second process.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bot.__main__ import EXIT_USAGE
from core.store.migrations import SCHEMA_VERSION
from fakediscord import FakeDiscord
from tests.e2e.helpers import content
from tests.fixtures.shard_processes import (
    HOLD,
    ShardWorld,
    TaskLLM,
    announcements,
    shard_world,
    wait_until,
)
from tests.fixtures.stores import PG_DSN, PG_URL, pg_schema, require_postgres

pytestmark = pytest.mark.postgres


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[ShardWorld]:
    await require_postgres()
    async with TaskLLM() as llm, FakeDiscord(wait_timeout=60) as fake:
        built = await shard_world(fake, llm, tmp_path)
        try:
            yield built
        finally:
            await built.stop_all()


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    """Tests ask for it before ``world``, so the processes stop before it is dropped."""
    await require_postgres()
    async with pg_schema() as name:
        yield name


def pg_store(schema: str, **more: Any) -> dict[str, Any]:
    return {"url": PG_URL, "schema": schema, "lease_seconds": 2.0, **more}


async def two_processes(world: ShardWorld, schema: str) -> list[Any]:
    processes = [
        world.start(f"shard{i}", world.config(pg_store(schema), shard_ids=[i])) for i in (0, 1)
    ]
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


def interaction_guilds(world: ShardWorld, shard_id: int) -> set[str]:
    """Guilds whose interactions reached the connections of shard ``shard_id``."""
    return {
        str(frame["d"].get("guild_id"))
        for session in world.fake.gateway.sessions.values()
        if session.shard and session.shard[0] == shard_id
        for frame in session.backlog
        if frame["t"] == "INTERACTION_CREATE"
    }


async def delivered_once(world: ShardWorld, threads: list[tuple[int, str]]) -> None:
    """Each thread gets exactly one announcement, and no parent channel gets any."""

    def all_there() -> bool | None:
        return True if all(announcements(world.fake, t) for _, t in threads) else None

    await wait_until(world.fake, all_there)
    for _, thread in threads:
        assert len(announcements(world.fake, thread)) == 1, thread
    for channel in world.channels:
        assert announcements(world.fake, channel.id) == []


async def test_each_guild_is_served_by_its_shard_and_each_completion_lands_once(
    schema: str, world: ShardWorld
) -> None:
    """Concurrent spawns in both guilds: every one answered by its own shard's process,
    announced once, in its own thread."""
    await two_processes(world, schema)
    spawns = [world.spawn(i % 2, f"task {i}") for i in range(6)]
    threads = await asyncio.gather(*spawns)
    assert len(set(threads)) == 6
    await delivered_once(world, [(i % 2, t) for i, t in enumerate(threads)])
    assert interaction_guilds(world, 0) == {str(world.guilds[0].id)}
    assert interaction_guilds(world, 1) == {str(world.guilds[1].id)}
    for i, thread in enumerate(threads):  # each thread was opened in its own guild
        assert world.fake.state.channels[int(thread)].guild_id == world.guilds[i % 2].id


async def test_a_killed_process_is_taken_over_after_its_restart(
    schema: str, world: ShardWorld
) -> None:
    """kill -9 with turns mid-run in guild 0; guild 1 goes on. After the restart every
    completion of both guilds is delivered exactly once, nothing in a parent channel."""
    first, second = await two_processes(world, schema)
    held = await asyncio.gather(*(world.spawn(0, f"{HOLD} long task {i}") for i in range(3)))
    await wait_until(world.fake, lambda: True if world.llm.held >= 3 else None)
    first.kill()
    done_elsewhere = await asyncio.gather(*(world.spawn(1, f"other {i}") for i in range(3)))

    world.restart(first)
    await world.wait_ready(first, [0])
    after = await asyncio.gather(*(world.spawn(0, f"after restart {i}") for i in range(2)))

    threads = [(0, t) for t in held] + [(1, t) for t in done_elsewhere] + [(0, t) for t in after]
    await delivered_once(world, threads)
    for thread in held:  # cut mid-turn: announced as failed, never silently re-run
        (announcement,) = announcements(world.fake, thread)
        assert "failed" in announcement
    assert second.returncode() is None


async def test_two_processes_starting_together_migrate_once(world: ShardWorld, schema: str) -> None:
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

    async def refused_in_guild_1() -> str:
        while True:
            spawn = await world.fake.invoke_command(
                world.guilds[1],
                world.channels[1],
                world.members[1],
                "agents spawn",
                {"task": "a thread please", "mode": "session"},
            )
            said = await answer(spawn)
            if "spawnSubagentSessions" in said:
                return said
            # accepted: the change had not arrived yet; ask again

    async with asyncio.timeout(1.0 + 5.0):  # a second for the change, the rest for Discord
        await refused_in_guild_1()


async def test_a_second_process_on_one_sqlite_file_is_refused(world: ShardWorld) -> None:
    """SQLite serves one process: the second one exits at once, naming PostgreSQL."""
    store = {"url": f"sqlite:///{world.tmp / 'one.db'}"}
    first = world.start("sqlite1", world.config(store, shard_ids=None, shard_count=None))
    await world.fake.wait_ready(world.bot)
    second = world.start("sqlite2", world.config(store, shard_ids=None, shard_count=None))
    assert await second.wait_exit() == EXIT_USAGE
    assert "PostgreSQL" in second.output()
    assert "another bot process" in second.output()
    assert first.returncode() is None
