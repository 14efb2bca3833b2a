"""External agents over ACP: what the bot adds between an agent and the thread.

Run with ``python3 tb.py bench acp``. Nothing here asserts; figures are printed
beside a baseline measured in the same run: a raw client built on the ACP SDK
alone, talking to the same agent program (``_acp_stream_agent.py``).

1. Per streamed chunk: from the agent writing its ``session/update`` to the chunk
   showing in the thread's message in the fake Discord (the bot's ACP client, the
   agent's event, the persona stream, the webhook edit), beside the same chunk
   reaching the raw SDK client. Each chunk carries the system's monotonic clock
   (the same in both processes). Edits are not throttled here (``min_edit_interval``
   0): the throttle (1 s by default) is a deliberate wait, not a cost.
2. From ``/agents spawn`` to the agent's first words in the thread, beside the raw
   client's start of the same program, initialize, ``session/new`` and prompt to its
   first chunk.
"""

from __future__ import annotations

import asyncio
import re
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
from acp import PROTOCOL_VERSION, spawn_agent_process, text_block  # noqa: E402

from adapters.discord.manager import ManagerRegistry  # noqa: E402
from bot.client import ThreadboundClient  # noqa: E402
from bot.wiring import build_services  # noqa: E402
from core.clock import FakeClock  # noqa: E402
from core.config import parse_config  # noqa: E402
from core.logging import configure_logging  # noqa: E402
from core.providers.scripted import ScriptedProvider  # noqa: E402
from fakediscord import FakeDiscord, RateLimits  # noqa: E402

AGENT = Path(__file__).with_name("_acp_stream_agent.py")
STAMP = re.compile(r"\[(\d+):(\d+)\]")
TURNS = 5
SPAWNS = 5
WAIT = 60


class RawClient:
    """The baseline: an SDK client that only notes when each chunk arrived."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.first_at: int | None = None
        self.first = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        now = time.monotonic_ns()
        for _n, sent in STAMP.findall(getattr(update.content, "text", "") or ""):
            self.latencies.append((now - int(sent)) / 1e6)
        if self.first_at is None:
            self.first_at = now
            self.first.set()


async def raw_baseline(workdir: Path) -> tuple[list[float], list[float]]:
    """Per-chunk latencies over TURNS prompts, and spawn-to-first-chunk times (ms)."""
    latencies: list[float] = []
    spawns: list[float] = []
    for attempt in range(SPAWNS):
        client = RawClient()
        started = time.monotonic_ns()
        async with spawn_agent_process(lambda _agent, c=client: c, sys.executable, str(AGENT)) as (
            conn,
            _process,
        ):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(workdir), mcp_servers=[])
            turns = TURNS if attempt == 0 else 1
            for _ in range(turns):
                await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
            assert client.first_at is not None
            spawns.append((client.first_at - started) / 1e6)
            if attempt == 0:
                latencies = client.latencies
    return latencies, spawns


class Stamps:
    """The bot's side: when each stamped chunk first shows in a thread message."""

    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake
        self.seen: dict[tuple[int, int, int], float] = {}
        self.first_in: dict[int, int] = {}

    def probe(self) -> None:
        now = time.monotonic_ns()
        for message in list(self.fake.state.messages.values()):
            if message.webhook_id is None:
                continue
            for n, sent in STAMP.findall(message.content):
                key = (message.channel_id, int(n), int(sent))
                if key not in self.seen:
                    self.seen[key] = (now - int(sent)) / 1e6
                    self.first_in.setdefault(message.channel_id, now)

    async def watch(self) -> None:
        while True:
            self.probe()
            await self.fake.state.changed.wait_next()


async def bot_side(workdir: Path) -> tuple[list[float], list[float]]:
    """The same, through the bot: per-chunk latencies and spawn-to-first-words times (ms)."""
    # Unlimited: this measures the bot's own work; Discord's limits are bench_popular's.
    async with FakeDiscord(wait_timeout=WAIT, rate_limits=RateLimits.off()) as fake:
        discord.http.Route.BASE = f"{fake.base_url}/api/v10"
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)
        me = fake.add_bot("bench-bot", "threadbound")
        guild = fake.add_guild("bench")
        channel = fake.add_text_channel(guild, "general")
        alice = fake.add_member(guild, "alice")
        config = parse_config(
            {
                "store": {"url": f"sqlite:///{workdir / 'bot.db'}"},
                "channels": {"discord": {"threadBindings": {"spawnSubagentSessions": True}}},
                "discord": {"command_guild_ids": [guild.id]},
                "agent": {"subagent_timeout_seconds": 0},
                "acp_agents": {"stream": {"command": ["python", str(AGENT)]}},
                "agents": {"coder": {"display_name": "Coder", "acp": "stream"}},
            },
            config_path=workdir / "config.toml",
            env={},
        )
        services = await build_services(
            config, clock=FakeClock(), env={}, provider=ScriptedProvider([])
        )
        bot = ThreadboundClient("default", services, ManagerRegistry(), min_edit_interval=0)
        task = asyncio.create_task(bot.start("bench-bot"))
        await fake.wait_ready(me.id)
        stamps = Stamps(fake)
        watcher = asyncio.create_task(stamps.watch())
        spawns: list[float] = []
        threads: list[int] = []
        try:
            for _ in range(SPAWNS):
                before = {r.binding_id for r in services.bindings.live()}
                started = time.monotonic_ns()
                handle = await fake.invoke_command(
                    guild,
                    channel,
                    alice,
                    "agents spawn",
                    {"task": "go", "agent": "coder", "mode": "session"},
                )
                async with asyncio.timeout(WAIT):
                    await handle.wait_followups(1)
                (record,) = [r for r in services.bindings.live() if r.binding_id not in before]
                thread = int(record.conversation.conversation_id)
                threads.append(thread)
                async with asyncio.timeout(WAIT):
                    await fake.state.changed.wait_for(lambda t=thread: stamps.first_in.get(t))
                spawns.append((stamps.first_in[thread] - started) / 1e6)
                agent = await services.runtime.get(record.target_session_key)
                async with asyncio.timeout(WAIT):
                    await agent.wait_idle()
            # more turns in the first thread: the per-chunk figure covers TURNS prompts
            first = next(
                r
                for r in services.bindings.live()
                if r.conversation.conversation_id == str(threads[0])
            )
            agent = await services.runtime.get(first.target_session_key)

            def ended() -> int:
                return sum(1 for e in agent.tree.events if e.type == "turn_ended")

            for n in range(TURNS - 1):
                done = ended()
                await fake.user_says(threads[0], alice, f"again {n}")
                async with asyncio.timeout(WAIT):
                    await fake.state.changed.wait_for(lambda d=done: ended() > d or None)
                    await agent.wait_idle()
            await bot.account.drain()
            stamps.probe()
        finally:
            watcher.cancel()
            await bot.close()
            await asyncio.gather(task, return_exceptions=True)
            await services.close()
        first_thread = threads[0]
        latencies = [ms for (ch, _n, _s), ms in stamps.seen.items() if ch == first_thread]
        return latencies, spawns


def line(name: str, values: list[float]) -> str:
    values = sorted(values)
    p95 = values[int(len(values) * 0.95) - 1] if len(values) >= 20 else values[-1]
    return (
        f"    {name}: median {statistics.median(values):.2f} ms, p95 {p95:.2f} ms "
        f"({len(values)} samples)"
    )


async def main() -> None:
    configure_logging(enabled=False)
    with tempfile.TemporaryDirectory(prefix="tb-bench-acp-") as tmp:
        workdir = Path(tmp)
        raw_chunks, raw_spawns = await raw_baseline(workdir)
        ours_chunks, ours_spawns = await bot_side(workdir)
    added = statistics.median(ours_chunks) - statistics.median(raw_chunks)
    print(f"\n[1] agent session/update -> chunk in the thread ({TURNS} turns of 60 chunks)")
    print(line("through the bot to the Discord edit", ours_chunks))
    print(line("baseline raw SDK client, update received", raw_chunks))
    print(f"    added per chunk by the bot (medians): {added:.2f} ms")
    print(f"\n[2] spawn -> the agent's first words ({SPAWNS} spawns)")
    print(line("/agents spawn -> first words in the new thread", ours_spawns))
    print(line("baseline raw SDK client: start, initialize, session/new, first chunk", raw_spawns))
    extra = statistics.median(ours_spawns) - statistics.median(raw_spawns)
    print(f"    added by the bot (medians): {extra:.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
