"""Subagents benchmark: 100 spawned and completed at once against the fake Discord.

Run with ``python3 tb.py bench subagents``. Nothing here asserts; figures are
printed beside a baseline measured in the same run.

The fake Discord runs in a process of its own, so this process's CPU time is
the bot's alone (the scripted model's share is a few dicts per step).

1. 100 subagents spawned at once, each answering and being announced:
   - wall time from the first spawn to the last announcement;
   - announcements found in the threads, which must equal the completions
     in the outbox, with no thread holding two and none in the parent channel;
   - the bot's own CPU per subagent life (target: at most 5x the floor):
     this process's CPU time over the whole run (spawn, turn, streaming,
     announcement, farewell, store writes on their thread) divided by 100.
     The floor, measured first in the same run against the same fake
     Discord: this process's CPU per life for the same Discord work done
     with bare discord.py (a thread created, three posts, one edit, one
     webhook post, and the gateway events they cause), 100 lives at once,
     its bot-token requests held to the bot's ``requests_per_second`` by a
     bare token bucket. The bot paces itself under Discord's global limit,
     so its 100 lives spread over seconds instead of one burst, and work
     spread out costs more per life than the same work in one burst (fewer
     events and store writes share a wake-up): a floor that went as fast as
     the unlimited fake answers would compare a paced bot with a client
     Discord would refuse. That unpaced floor is printed too, beside the
     ratio last measured before the pacing (4.8-5.0x);
   - spawn latency with all 100 in flight, from the spawn command to its
     thread bound and introduced (target median and p90 <= 0.2 s), beside
     the time the rate alone needs for the bot-token requests made meanwhile.
2. The same, one spawn after another: each spawn's latency minus the time it
   waited on Discord's REST API (thread creation, intro, with the bot token or
   through a webhook, and the waits for the rate budget before them), beside
   that wait.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import discord  # noqa: E402

from adapters.discord.endpoints import use_endpoints  # noqa: E402
from adapters.discord.manager import ManagerRegistry  # noqa: E402
from adapters.discord.pacing import Pacer  # noqa: E402
from bot.client import ThreadboundClient  # noqa: E402
from bot.spawn import SpawnCommand, spawn  # noqa: E402
from bot.wiring import build_services  # noqa: E402
from core.clock import FakeClock  # noqa: E402
from core.config import parse_config  # noqa: E402
from core.logging import configure_logging  # noqa: E402
from core.providers.scripted import ScriptedProvider, Step  # noqa: E402
from core.subagents import repository  # noqa: E402

SPAWNS = 100
FLOOR_MESSAGES = 5
"""Messages one life posts (three posts and the webhook's announcement) plus its edit:
the MESSAGE_CREATE and MESSAGE_UPDATE events the floor waits for."""

_discord_time: dict[asyncio.Task[Any], float] = {}


def count_discord_time() -> None:
    """Add the time each task spends on Discord to that task: its REST calls with the
    bot token and through webhooks, and its waits for the rate budget before them (the
    bot's pacers), each counted once where they nest."""
    depth: dict[asyncio.Task[Any], int] = {}

    def timing(original: Any) -> Any:
        async def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
            task = asyncio.current_task()
            assert task is not None
            outermost = depth.get(task, 0) == 0
            depth[task] = depth.get(task, 0) + 1
            started = time.perf_counter()
            try:
                return await original(self, *args, **kwargs)
            finally:
                depth[task] -= 1
                if not depth[task]:
                    del depth[task]
                if outermost and task in _discord_time:
                    _discord_time[task] += time.perf_counter() - started

        return timed

    discord.http.HTTPClient.request = timing(discord.http.HTTPClient.request)  # type: ignore[method-assign]
    adapter = discord.webhook.async_.AsyncWebhookAdapter
    adapter.request = timing(adapter.request)  # type: ignore[method-assign]
    Pacer.run = timing(Pacer.run)  # type: ignore[method-assign]


class FakeProcess:
    """The fake Discord's process: its seed, and the announcement counts it reports."""

    def __init__(self, process: asyncio.subprocess.Process, seed: dict[str, Any]) -> None:
        self.process = process
        self.seed = seed

    @classmethod
    async def start(cls) -> FakeProcess:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(Path(__file__).with_name("_fake_discord_process.py")),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None
        seed = json.loads(await process.stdout.readline())
        return cls(process, seed)

    async def counts(self, channel_ids: list[int]) -> dict[int, int]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(f"count {' '.join(map(str, channel_ids))}\n".encode())
        await self.process.stdin.drain()
        return {int(k): v for k, v in json.loads(await self.process.stdout.readline()).items()}

    async def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"quit\n")
        await self.process.stdin.drain()
        await self.process.wait()


def bare_bucket(rate: float | None) -> Callable[[], Awaitable[None]]:
    """What a careful bare client does before each bot-token request to stay under
    ``rate`` a second: wait for its slot (None: no wait at all)."""
    slot = 0.0

    async def take() -> None:
        nonlocal slot
        if rate is None:
            return
        now = asyncio.get_running_loop().time()
        slot = max(now, slot + 1 / rate)
        if slot > now:
            await asyncio.sleep(slot - now)

    return take


async def bare_floor(seed: dict[str, Any], rate: float | None) -> float:
    """This process's CPU per life for one subagent's Discord work in bare discord.py.

    A client of its own (a second bot account) creates a thread, posts three
    messages, edits one, and posts through a webhook into the thread, 100 lives
    at once, its bot-token requests held to ``rate`` a second (None: unheld); the
    timed window ends when every gateway event those calls cause (thread create,
    message creates and the update) has been handled. Run before the bot
    connects, so the bot does not handle these events too.
    """
    take = bare_bucket(rate)
    client = discord.Client(intents=discord.Intents.default())
    seen = 0
    done = asyncio.Event()
    expected = SPAWNS * FLOOR_MESSAGES

    def count() -> None:
        nonlocal seen
        seen += 1
        if seen == expected:
            done.set()

    @client.event
    async def on_message(_message: discord.Message) -> None:
        count()

    @client.event
    async def on_raw_message_edit(_payload: discord.RawMessageUpdateEvent) -> None:
        count()

    await client.login(seed["floor_token"])
    runner = asyncio.create_task(client.connect())
    async with asyncio.timeout(60):
        await client.wait_until_ready()
    channel = await client.fetch_channel(seed["channel"])
    assert isinstance(channel, discord.TextChannel)
    hook = await channel.create_webhook(name="floor")

    async def life(i: int) -> None:
        await take()
        thread = await channel.create_thread(
            name=f"floor {i}", type=discord.ChannelType.public_thread
        )
        await take()
        await thread.send(f"intro {i}")
        await take()
        status = await thread.send("Status: working")
        await take()
        await thread.send("done")
        await take()
        await status.edit(content="Status: done")
        await hook.send("completed its task (floor)", username="floor", thread=thread, wait=True)

    cpu_start = time.process_time()
    await asyncio.gather(*(life(i) for i in range(SPAWNS)))
    async with asyncio.timeout(60):
        await done.wait()
    cpu = (time.process_time() - cpu_start) * 1000 / SPAWNS
    await client.close()
    await runner
    return cpu


async def main() -> None:
    configure_logging(enabled=False)
    count_discord_time()
    fake = await FakeProcess.start()
    seed = fake.seed
    use_endpoints(seed["api"], seed["gateway"])
    with tempfile.TemporaryDirectory(prefix="tb-bench-subagents-") as tmp:
        config = parse_config(
            {
                "store": {"url": f"sqlite:///{Path(tmp) / 'bot.db'}"},
                "channels": {"discord": {"threadBindings": {"spawnSubagentSessions": True}}},
                "discord": {"command_guild_ids": [seed["guild"]]},
                "agent": {"subagent_timeout_seconds": 0},
            },
            env={},
        )
        rate = config.discord.requests_per_second
        floor = await bare_floor(seed, rate)
        unpaced_floor = await bare_floor(seed, None)
        provider = ScriptedProvider(lambda _m: Step(text="done", chunks=3))
        services = await build_services(config, clock=FakeClock(), env={}, provider=provider)
        bot = ThreadboundClient("default", services, ManagerRegistry(), min_edit_interval=0)
        await bot.login(seed["token"])
        runner = asyncio.create_task(bot.connect())
        async with asyncio.timeout(60):
            await bot.wait_until_ready()
        where = await bot.fetch_channel(seed["channel"])

        latency: list[float] = []
        in_discord: list[float] = []
        whole: list[float] = []

        async def one(i: int) -> int:
            task = asyncio.current_task()
            assert task is not None
            _discord_time[task] = 0.0
            started = time.perf_counter()
            result = await spawn(
                bot.account,
                SpawnCommand(seed["guild"], where, seed["alice"], f"task {i}"),  # type: ignore[arg-type]
            )
            total = time.perf_counter() - started
            waited = _discord_time.pop(task)
            whole.append(total)
            latency.append((total - waited) * 1000)
            in_discord.append(waited * 1000)
            assert result.thread_id is not None
            return result.thread_id

        # -- [1] 100 at once
        requests_start = bot.pacer.started
        cpu_start, wall_start = time.process_time(), time.perf_counter()
        threads = await asyncio.gather(*(one(i) for i in range(SPAWNS)))
        spawned_in = time.perf_counter() - wall_start
        spawn_requests = bot.pacer.started - requests_start
        await services.subagents.wait_settled()
        await bot.account.drain()
        wall = time.perf_counter() - wall_start
        cpu = (time.process_time() - cpu_start) * 1000 / SPAWNS

        counts = await fake.counts([*threads, seed["channel"]])
        parent = counts.pop(seed["channel"])
        statuses = await services.database.run(repository.delivery_statuses)
        completions = sum(1 for s in statuses.values() if s == "delivered")
        deliveries = sum(counts.values())
        twice = sum(n > 1 for n in counts.values())
        ok = deliveries == completions == SPAWNS and parent == 0 and twice == 0
        print(f"\n[1] {SPAWNS} subagents spawned and completed concurrently")
        print(f"    wall time, first spawn to last announcement: {wall:.2f} s")
        print(
            f"    completions recorded {completions}, announcements delivered {deliveries}, "
            f"threads with two or more {twice}, in the parent channel {parent}   "
            f"{'OK' if ok else 'WRONG'}"
        )
        ratio = cpu / floor
        print(f"    bot's own CPU per subagent, whole life (spawn to farewell): {cpu:.2f} ms")
        print(
            f"    floor: the same Discord work in bare discord.py held to the same "
            f"{rate:g} requests/s (thread, 3 posts, 1 edit, 1 webhook post, their gateway "
            f"events), CPU per life: {floor:.2f} ms"
        )
        print(
            f"    ratio to the floor: {ratio:.1f}x   target <= 5x   "
            f"{'MET' if ratio <= 5 else 'MISSED'}"
        )
        print(
            f"    the same bare work unheld, as fast as the unlimited fake answers (Discord "
            f"would refuse it): {unpaced_floor:.2f} ms per life; the bot's ratio to it "
            f"{cpu / unpaced_floor:.1f}x (4.8-5.0x before the bot paced itself)"
        )
        p50, p90 = statistics.median(whole), statistics.quantiles(whole, n=10)[-1]
        print(
            "    spawn latency with all 100 in flight (spawn command to thread bound and "
            f"introduced): median {p50:.3f} s, p90 {p90:.3f} s   target <= 0.2 s   "
            f"{'MET' if p90 <= 0.2 else 'MISSED'}"
        )
        print(
            f"    the rate's own floor for it: the {spawn_requests} bot-token requests sent "
            f"while the 100 spawns ran ({spawned_in:.2f} s) need {spawn_requests / rate:.2f} s "
            f"at {rate:g}/s"
        )
        print(
            "    spawn latency outside Discord with all 100 in flight (queued behind each "
            f"other on one loop and one store), median: {statistics.median(latency):.2f} ms"
        )

        # -- [2] one after another
        latency.clear()
        in_discord.clear()
        whole.clear()
        for i in range(SPAWNS):
            await one(SPAWNS + i)
            await services.subagents.wait_settled()  # the previous run is over
            await bot.account.drain()
        median = statistics.median(latency)
        print(f"\n[2] {SPAWNS} spawns one after another")
        print(
            f"    bot's own overhead per spawn (latency minus REST waits), median: {median:.2f} ms "
            f"(p90 {statistics.quantiles(latency, n=10)[-1]:.2f} ms)   target < 20 ms   "
            f"{'MET' if median < 20 else 'MISSED'}"
        )
        print(
            "    baseline: the same spawns' time waiting on the fake Discord, median "
            f"{statistics.median(in_discord):.2f} ms"
        )

        await bot.close()
        await runner
        await services.close()
    await fake.stop()


if __name__ == "__main__":
    asyncio.run(main())
