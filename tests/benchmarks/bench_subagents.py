"""Subagents benchmark: 100 spawned and completed at once against the fake Discord.

Run with ``python3 tb.py bench subagents``. Nothing here asserts; figures are
printed beside a baseline measured in the same run.

- wall time from the first spawn to the last announcement delivered;
- deliveries: announcements found in the threads, which must equal the
  completions recorded in the outbox, with no thread holding two;
- the bot's own overhead per spawn (target median < 20 ms): the time of the
  spawn use case minus the time its task spent waiting on Discord's REST API
  (thread creation, intro), measured on spawns made one after another. With
  100 in flight the same figure mostly measures queueing behind the others on
  one event loop and one store, which is printed too. The scripted model runs
  after the spawn returns, so none of its time is in the figure. Baseline:
  the Discord time itself.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import discord  # noqa: E402
import yarl  # noqa: E402

from adapters.discord.manager import ManagerRegistry  # noqa: E402
from bot.client import ThreadboundClient  # noqa: E402
from bot.spawn import SpawnRequest, spawn  # noqa: E402
from bot.wiring import build_services  # noqa: E402
from core.clock import FakeClock  # noqa: E402
from core.config import parse_config  # noqa: E402
from core.logging import configure_logging  # noqa: E402
from core.providers.scripted import ScriptedProvider, Step  # noqa: E402
from core.subagents import _repository  # noqa: E402
from fakediscord import FakeDiscord  # noqa: E402

SPAWNS = 100
ANNOUNCED = "completed its task."

_discord_time: dict[asyncio.Task[Any], float] = {}


def count_discord_time() -> None:
    """Add each REST call's duration to the task that awaited it."""
    original = discord.http.HTTPClient.request

    async def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        task = asyncio.current_task()
        started = time.perf_counter()
        try:
            return await original(self, *args, **kwargs)
        finally:
            if task in _discord_time:
                _discord_time[task] += time.perf_counter() - started

    discord.http.HTTPClient.request = timed  # type: ignore[method-assign]


async def main() -> None:
    configure_logging(enabled=False)
    count_discord_time()
    with tempfile.TemporaryDirectory(prefix="tb-bench-subagents-") as tmp:
        async with FakeDiscord(wait_timeout=60) as fake:
            discord.http.Route.BASE = f"{fake.base_url}/api/v10"
            discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)
            me = fake.add_bot("bench-bot", "threadbound")
            guild = fake.add_guild("bench")
            channel = fake.add_text_channel(guild, "general")
            alice = fake.add_member(guild, "alice")
            config = parse_config(
                {
                    "store": {"url": f"sqlite:///{Path(tmp) / 'bot.db'}"},
                    "channels": {"discord": {"threadBindings": {"spawnSubagentSessions": True}}},
                    "discord": {"command_guild_ids": [guild.id]},
                    "agent": {"subagent_timeout_seconds": 0},
                },
                env={},
            )
            provider = ScriptedProvider(lambda _m: Step(text="done", chunks=3))
            services = await build_services(config, clock=FakeClock(), env={}, provider=provider)
            bot = ThreadboundClient("default", services, ManagerRegistry(), min_edit_interval=0)
            runner = asyncio.create_task(bot.start("bench-bot"))
            await fake.wait_ready(me.id)
            where = bot.get_channel(channel.id) or await bot.fetch_channel(channel.id)

            overhead: list[float] = []
            in_discord: list[float] = []

            async def one(i: int) -> int:
                task = asyncio.current_task()
                assert task is not None
                _discord_time[task] = 0.0
                started = time.perf_counter()
                result = await spawn(
                    bot.account,
                    SpawnRequest(guild.id, where, alice.id, f"task {i}"),  # type: ignore[arg-type]
                )
                total = time.perf_counter() - started
                waited = _discord_time.pop(task)
                overhead.append((total - waited) * 1000)
                in_discord.append(waited * 1000)
                assert result.thread_id is not None
                return result.thread_id

            wall_start = time.perf_counter()
            threads = await asyncio.gather(*(one(i) for i in range(SPAWNS)))
            await services.subagents.wait_settled()
            await bot.account.drain()
            wall = time.perf_counter() - wall_start

            per_thread = [
                sum(ANNOUNCED in m.content for m in fake.messages_in(thread_id))
                for thread_id in threads
            ]
            statuses = await services.database.run(_repository.delivery_statuses)
            completions = sum(1 for s in statuses.values() if s == "delivered")
            deliveries = sum(per_thread)
            parent = sum(ANNOUNCED in m.content for m in fake.messages_in(channel.id))

            print(f"\n[1] {SPAWNS} subagents spawned and completed concurrently")
            print(f"    wall time, first spawn to last announcement: {wall:.2f} s")
            print(
                f"    completions recorded {completions}, announcements delivered {deliveries}, "
                f"threads with two or more {sum(n > 1 for n in per_thread)}, "
                f"in the parent channel {parent}   "
                f"{'OK' if deliveries == completions == SPAWNS and parent == 0 else 'WRONG'}"
            )
            print(
                "    spawn latency outside Discord with all 100 in flight (queued behind each "
                f"other on one loop and one store), median: {statistics.median(overhead):.2f} ms"
            )

            # -- [2] the same spawns one at a time: the bot's own work per spawn, uncontended
            overhead.clear()
            in_discord.clear()
            for i in range(SPAWNS):
                await one(SPAWNS + i)
                await services.subagents.wait_settled()  # the previous run is over
                await bot.account.drain()
            median = statistics.median(overhead)
            print(f"\n[2] {SPAWNS} spawns one after another")
            print(
                f"    bot's own overhead per spawn, median: {median:.2f} ms "
                f"(p90 {statistics.quantiles(overhead, n=10)[-1]:.2f} ms)   target < 20 ms   "
                f"{'MET' if median < 20 else 'MISSED'}"
            )
            print(
                "    baseline: the same spawns' time waiting on the fake Discord, median "
                f"{statistics.median(in_discord):.2f} ms"
            )

            await bot.close()
            await runner
            await services.close()


if __name__ == "__main__":
    asyncio.run(main())
