"""Shards benchmark: 200 subagents over two guilds, one bot process, then two.

Run with ``python3 tb.py bench shards`` (PostgreSQL must answer at
127.0.0.1:5432). Nothing here asserts; the figures are printed side by side.

Both phases run the real ``python -m bot`` against the fake Discord and the
fake model server hosted by this process, on a fresh PostgreSQL schema each:

1. baseline: ONE process with both shards (``shard_count = 2``, ``shard_ids = [0, 1]``);
2. TWO processes with one shard each.

200 run-mode subagents (100 per guild, threads off: each answers and is
announced in its channel) are spawned at once. Figures: completions per second
of wall time (first spawn to last announcement), completions per CPU-second of
the bot processes (user + system time from /proc, summed over them), and the
ratio two/one of the throughput. This machine's two cores also run the fake
Discord and the model server, so the ratio is a floor of what separate machines
would see; the target on 2 cores is 1.6.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fakediscord import FakeDiscord  # noqa: E402
from tests.fixtures.shard_processes import (  # noqa: E402
    BotProcess,
    ShardWorld,
    TaskLLM,
    shard_world,
    wait_until,
)
from tests.fixtures.stores import PG_URL, pg_schema, require_postgres  # noqa: E402

SPAWNS = int(os.environ.get("BENCH_SPAWNS", "200"))
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(process: BotProcess) -> float:
    """User + system CPU time of a live process, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def completions(world: ShardWorld) -> int:
    return sum(
        1
        for channel in world.channels
        for message in world.fake.messages_in(channel.id)
        if message.content.startswith("done: the answer")
    )


async def phase(world: ShardWorld, layout: list[list[int]]) -> tuple[float, float, float]:
    """Run the spawns with one process per entry of ``layout``: completions per second,
    per bot CPU-second, and the CPU-seconds this process (the fakes) spent meanwhile."""
    async with pg_schema() as schema:
        store = {"url": PG_URL, "schema": schema}
        processes = [
            world.start(
                f"bench-{'-'.join(map(str, ids))}-{len(layout)}",
                world.config(store, shard_ids=ids, threads=False),
            )
            for ids in layout
        ]
        for process, ids in zip(processes, layout, strict=True):
            await world.wait_ready(process, ids)
        already = completions(world)
        cpu_before = sum(cpu_seconds(p) for p in processes)
        fakes_before = time.process_time()
        started = time.perf_counter()
        answers = await asyncio.gather(
            *(world.spawn_answer(i % 2, f"task {i}") for i in range(SPAWNS))
        )
        try:
            await wait_until(
                world.fake, lambda: True if completions(world) - already >= SPAWNS else None
            )
        except TimeoutError:
            seen = [m.content[:80] for c in world.channels for m in world.fake.messages_in(c.id)]
            raise SystemExit(f"not every completion arrived; {answers[:2]} {seen[-6:]}") from None
        wall = time.perf_counter() - started
        fakes = time.process_time() - fakes_before
        cpu = sum(cpu_seconds(p) for p in processes) - cpu_before
        for process in processes:
            process.stop()
        assert len(answers) == SPAWNS
        return SPAWNS / wall, SPAWNS / cpu, fakes


async def main() -> None:
    await require_postgres()
    with tempfile.TemporaryDirectory() as tmp:
        async with TaskLLM() as llm, FakeDiscord(wait_timeout=300, keep_requests=1000) as fake:
            world = await shard_world(fake, llm, Path(tmp))
            one_wall, one_cpu, one_fakes = await phase(world, [[0, 1]])
            two_wall, two_cpu, two_fakes = await phase(world, [[0], [1]])
    print(f"\n{SPAWNS} subagents over two guilds (run mode, answered in the channel)")
    print(
        f"  baseline, one process with both shards: {one_wall:7.1f} completions/s, "
        f"{one_cpu:7.1f} per bot CPU-second"
    )
    print(
        f"  two processes, one shard each:          {two_wall:7.1f} completions/s, "
        f"{two_cpu:7.1f} per bot CPU-second"
    )
    print(f"  ratio two/one, completions per second: {two_wall / one_wall:.2f} (target >= 1.6)")
    print(f"  ratio two/one, per bot CPU-second:     {two_cpu / one_cpu:.2f}")
    print(
        f"  CPU of the fake Discord and model server (this process): {one_fakes:.2f} s, "
        f"then {two_fakes:.2f} s — on 2 cores, the share the bots could not use"
    )


if __name__ == "__main__":
    asyncio.run(main())
