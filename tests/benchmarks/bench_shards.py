"""Shards benchmark: 200 subagents over two guilds, one bot process, then two.

Run with ``python3 tb.py bench shards`` (PostgreSQL must answer at
127.0.0.1:5432). Nothing here asserts; the figures are printed side by side.

Both phases run the real ``python -m bot`` against the fake Discord and the
fake model server hosted by this process, on a fresh PostgreSQL schema each:

1. baseline: ONE process with both shards (``shard_count = 2``, ``shard_ids = [0, 1]``);
2. TWO processes with one shard each.

Each phase first runs 50 untimed spawns per guild at once (every process grows
its connection pool and fills its caches: imports, compiled SQL), then 200 run-mode subagents (100
per guild, threads off: each answers and is announced in its channel) are
spawned at once. Figures: completions per second of wall time (first spawn to
last announcement), completions per CPU-second of the bot processes (user +
system time from /proc, summed over them), and the ratio two/one of the
throughput. The machine's cores also run the fake Discord, the model server and
PostgreSQL: how many cores the whole machine kept busy is printed too, with the
bots', the fakes' (this process) and PostgreSQL's shares, so a ratio held down by
a saturated machine reads as such.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fakediscord import FakeDiscord, InteractionHandle  # noqa: E402
from tests.fixtures.shard_processes import (  # noqa: E402
    ANSWER,
    BotProcess,
    ShardWorld,
    TaskLLM,
    shard_world,
    wait_until,
)
from tests.fixtures.stores import PG_URL, pg_schema, require_postgres  # noqa: E402

SPAWNS = int(os.environ.get("BENCH_SPAWNS", "200"))
WARMUP = 50
"""Untimed spawns per guild before each phase, at once: each process's connection pool
grows to its working size and its caches fill before the clock starts."""
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def bots_cpu(processes: list[BotProcess]) -> float:
    return sum(cpu_seconds(p.pid) for p in processes)


def postgres_cpu() -> dict[int, float]:
    """CPU time of each local PostgreSQL process (server and backends) by pid."""
    found: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    found[int(entry.name)] = cpu_seconds(int(entry.name))
            except OSError:
                continue  # it ended meanwhile
    return found


def machine_busy_seconds() -> float:
    """CPU-seconds the whole machine has spent busy (every core, every process)."""
    ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / TICKS  # minus idle and iowait


class Answers:
    """Counts the answers posted in the guilds' channels, reading only new messages.

    Probed at every change of the fake's state, so it must not rescan every message.
    """

    def __init__(self, world: ShardWorld) -> None:
        self._state = world.fake.state
        self._cursors = {channel.id: 0 for channel in world.channels}
        self.count = 0

    def __call__(self) -> int:
        for channel_id, cursor in self._cursors.items():
            ids = self._state.channel_messages.get(channel_id, [])
            for message_id in ids[cursor:]:
                if self._state.messages[message_id].content.startswith(ANSWER):
                    self.count += 1
            self._cursors[channel_id] = len(ids)
        return self.count


@dataclass(frozen=True)
class Figures:
    per_second: float
    per_cpu_second: float
    machine_cores: float
    """Cores the whole machine kept busy on average, and of those:"""
    bot_cores: float
    """the bot processes,"""
    driver_cores: float
    """this process (the fake Discord and the model server),"""
    postgres_cores: float
    """and PostgreSQL."""


async def spawn_all(world: ShardWorld, answers: Answers, count: int) -> None:
    """``count`` spawns alternating between the guilds, until all are announced."""
    target = answers() + count
    handles: list[InteractionHandle] = []
    for i in range(count):
        handles.append(
            await world.fake.invoke_command(
                world.guilds[i % 2],
                world.channels[i % 2],
                world.members[i % 2],
                "agents spawn",
                {"task": f"task {i}", "mode": "run"},
            )
        )
    try:
        await wait_until(world.fake, lambda: True if answers() >= target else None)
    except TimeoutError:
        raise SystemExit(f"only {answers() - target + count} of {count} answers arrived") from None
    unanswered = sum(1 for handle in handles if not handle.followups)
    if unanswered:
        raise SystemExit(f"{unanswered} spawns were announced but never answered")


async def phase(world: ShardWorld, layout: list[list[int]]) -> Figures:
    """Run the spawns with one process per entry of ``layout``."""
    async with pg_schema() as schema:
        store = {"url": PG_URL, "schema": schema}
        processes = await asyncio.gather(
            *(
                world.start(
                    f"bench-{'-'.join(map(str, ids))}-{len(layout)}",
                    world.config(store, shard_ids=ids, threads=False),
                )
                for ids in layout
            )
        )
        for process, ids in zip(processes, layout, strict=True):
            await world.wait_ready(process, ids)
        answers = Answers(world)
        await spawn_all(world, answers, 2 * WARMUP)

        cpu_before, postgres_before = bots_cpu(processes), postgres_cpu()
        driver_before = time.process_time()
        machine_before = machine_busy_seconds()
        started = time.perf_counter()
        await spawn_all(world, answers, SPAWNS)
        wall = time.perf_counter() - started
        machine = machine_busy_seconds() - machine_before
        driver = time.process_time() - driver_before
        cpu = bots_cpu(processes) - cpu_before
        postgres = sum(t - postgres_before.get(pid, 0.0) for pid, t in postgres_cpu().items())

        await asyncio.gather(*(process.stop() for process in processes))
        return Figures(
            per_second=SPAWNS / wall,
            per_cpu_second=SPAWNS / cpu,
            machine_cores=machine / wall,
            bot_cores=cpu / wall,
            driver_cores=driver / wall,
            postgres_cores=postgres / wall,
        )


def report(name: str, figures: Figures) -> None:
    print(
        f"  {name:<40} {figures.per_second:6.1f} completions/s, "
        f"{figures.per_cpu_second:6.1f} per bot CPU-second"
    )
    print(
        f"  {'':<40} cores busy: {figures.machine_cores:.2f} in all, bots "
        f"{figures.bot_cores:.2f}, fakes {figures.driver_cores:.2f}, "
        f"PostgreSQL {figures.postgres_cores:.2f}"
    )


async def main() -> None:
    try:
        await require_postgres()
    except pytest.skip.Exception as skipped:
        print(f"bench_shards: skipped, {skipped.msg}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        async with TaskLLM() as llm, FakeDiscord(wait_timeout=300, keep_requests=1000) as fake:
            world = await shard_world(fake, llm, Path(tmp))
            one = await phase(world, [[0, 1]])
            two = await phase(world, [[0], [1]])
    print(
        f"\n{SPAWNS} subagents over two guilds (run mode, answered in the channel), "
        f"{os.cpu_count()} cores"
    )
    report("baseline, one process with both shards:", one)
    report("two processes, one shard each:", two)
    print(
        f"  ratio two/one, completions per second: {two.per_second / one.per_second:.2f} "
        "(target >= 1.6)"
    )
    print(f"  ratio two/one, per bot CPU-second:     {two.per_cpu_second / one.per_cpu_second:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
