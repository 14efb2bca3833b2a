"""Discord-side benchmarks against the fake Discord on loopback.

Run with ``python3 tb.py bench discord``. Nothing here asserts; figures are
printed beside baselines measured in the same run.

1. The bot's own added latency from a thread message arriving on the gateway
   to the steer being enqueued (target median < 5 ms). Baseline: a bare
   discord.py client connected to the same fake Discord, whose ``on_message``
   gets the same MESSAGE_CREATE; the difference is the bot's own work
   (routing, binding lookup, touch, the durable message_queued write).
2. From a completion to the webhook POST (target median < 10 ms above the
   baseline): routing plus persona delivery, beside a raw ``webhook.send``.
3. 200 bound sessions streaming at once: edits per message per second.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import discord  # noqa: E402
import yarl  # noqa: E402

from adapters.discord.delivery import Persona  # noqa: E402
from adapters.discord.ids import conversation_for  # noqa: E402
from adapters.discord.manager import ManagerRegistry  # noqa: E402
from adapters.discord.sinks import ThreadSink  # noqa: E402
from adapters.discord.streaming import StreamingMessage  # noqa: E402
from bot.client import ThreadboundClient  # noqa: E402
from bot.wiring import build_services  # noqa: E402
from core.agent.events import MessageQueued  # noqa: E402
from core.bindings.records import ConversationRef  # noqa: E402
from core.clock import FakeClock  # noqa: E402
from core.config import parse_config  # noqa: E402
from core.logging import configure_logging, reset_logging  # noqa: E402
from core.providers.scripted import ScriptedProvider, Step  # noqa: E402
from core.providers.types import ToolCall  # noqa: E402
from fakediscord import FakeDiscord, RateLimits  # noqa: E402

MESSAGES = 200
COMPLETIONS = 200
STREAMS = 200
STREAM_SECONDS = 4.0


def intents() -> discord.Intents:
    value = discord.Intents.default()
    value.message_content = True
    return value


class Bare(discord.Client):
    """The baseline: a client that only notes when each message arrived."""

    def __init__(self) -> None:
        super().__init__(intents=intents())
        self.seen: dict[int, float] = {}
        self.arrived = asyncio.Event()

    async def on_message(self, message: discord.Message) -> None:
        self.seen[message.id] = time.perf_counter()
        self.arrived.set()


async def start(
    client: discord.Client, token: str, fake: FakeDiscord, user_id: int
) -> asyncio.Task:
    task = asyncio.create_task(client.start(token))
    await fake.wait_ready(user_id)
    return task


async def main() -> None:
    configure_logging(enabled=False)
    with tempfile.TemporaryDirectory(prefix="tb-bench-discord-") as tmp:
        # Unlimited: this measures the bot's own work; Discord's limits are bench_popular's.
        async with FakeDiscord(wait_timeout=30, rate_limits=RateLimits.off()) as fake:
            discord.http.Route.BASE = f"{fake.base_url}/api/v10"
            discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)
            me = fake.add_bot("bench-bot", "threadbound")
            other = fake.add_bot("bench-bare", "bare")
            guild = fake.add_guild("bench")
            channel = fake.add_text_channel(guild, "general")
            alice = fake.add_member(guild, "alice")
            config = parse_config(
                {
                    "store": {"url": f"sqlite:///{Path(tmp) / 'bot.db'}"},
                    "channels": {"discord": {"threadBindings": {"spawnSubagentSessions": True}}},
                    "discord": {"command_guild_ids": [guild.id]},
                },
                env={},
            )
            clock = FakeClock()
            sleep = ToolCall(id="c1", name="sleep", arguments='{"seconds": 300}')
            provider = ScriptedProvider(lambda _m: Step(tool_calls=(sleep,)))
            services = await build_services(config, clock=clock, env={}, provider=provider)
            bot = ThreadboundClient("default", services, ManagerRegistry())
            bare = Bare()
            tasks = [
                await start(bot, "bench-bot", fake, me.id),
                await start(bare, "bench-bare", fake, other.id),
            ]

            # -- [1] gateway message -> steer enqueued, with the agent busy in a tool
            record = await services.bindings.bind(
                "bench:session",
                "session",
                ConversationRef(
                    channel="discord",
                    account_id="default",
                    conversation_id="",
                    parent_conversation_id=str(channel.id),
                ),
            )
            thread_id = int(record.conversation.conversation_id)
            agent = await services.runtime.get(record.target_session_key)
            await agent.send("work")
            await clock.wait_for_sleepers()
            queued_at: list[float] = []
            queued = asyncio.Event()

            def on_event(event: object) -> None:
                if isinstance(event, MessageQueued):
                    queued_at.append(time.perf_counter())
                    queued.set()

            agent.subscribe(on_event)
            added: list[float] = []
            absolute: list[float] = []
            for i in range(MESSAGES):
                queued.clear()
                bare.arrived.clear()
                message = await fake.user_says(thread_id, alice, f"steer {i}")
                written = time.perf_counter()  # the event is on both clients' sockets
                await queued.wait()
                await bare.arrived.wait()
                added.append((queued_at[-1] - bare.seen[message.id]) * 1000)
                absolute.append((queued_at[-1] - written) * 1000)
            inbound = statistics.median(added)
            print(f"\n[1] thread message -> steer enqueued ({MESSAGES} messages, agent busy)")
            print(
                f"    bot's own added latency, median: {inbound:.2f} ms   target < 5 ms   "
                f"{'MET' if inbound < 5 else 'MISSED'}"
            )
            print(
                "    baseline: a bare discord.py client's on_message for the same event "
                f"(p90 added {statistics.quantiles(added, n=10)[-1]:.2f} ms)"
            )
            print(
                "    from the gateway write to enqueued, incl. discord.py parsing, median: "
                f"{statistics.median(absolute):.2f} ms"
            )

            # -- [2] completion -> webhook POST (routing + persona delivery vs raw webhook.send)
            delivery = bot.account.delivery
            requester = conversation_for("default", channel.id)
            hook = await bot.account.webhooks.get(channel.id)
            ours, raw = [], []
            for i in range(COMPLETIONS):
                start_at = time.perf_counter()
                resolution = services.router.resolve_destination(
                    target_session_key=record.target_session_key, requester=requester
                )
                await delivery.send(resolution.binding, Persona("Bench"), f"done {i}")
                ours.append((time.perf_counter() - start_at) * 1000)
                start_at = time.perf_counter()
                await hook.send(
                    f"raw {i}",
                    username="Bench",
                    thread=discord.Object(thread_id),
                    allowed_mentions=discord.AllowedMentions.none(),
                    wait=True,
                )
                raw.append((time.perf_counter() - start_at) * 1000)
            ours_median, raw_median = statistics.median(ours), statistics.median(raw)
            overhead = ours_median - raw_median
            print(f"\n[2] completion -> webhook message ({COMPLETIONS} completions)")
            print(f"    route + deliver, median: {ours_median:.2f} ms")
            print(f"    baseline raw webhook.send round trip: {raw_median:.2f} ms")
            print(
                f"    added by the bot: {overhead:.2f} ms   target < 10 ms   "
                f"{'MET' if overhead < 10 else 'MISSED'}"
            )

            # -- [3] 200 bound sessions streaming at once
            records = []
            for i in range(STREAMS):
                records.append(
                    await services.bindings.bind(
                        f"bench:stream:{i}",
                        "session",
                        ConversationRef(
                            channel="discord",
                            account_id="default",
                            conversation_id="",
                            parent_conversation_id=str(channel.id),
                        ),
                    )
                )
            streams = [
                StreamingMessage(ThreadSink(delivery, r, Persona(f"S{i}")), min_interval=1.0)
                for i, r in enumerate(records)
            ]
            mark = len(fake.requests)
            started = time.perf_counter()
            while time.perf_counter() - started < STREAM_SECONDS:
                for stream in streams:
                    stream.append("token ")
                await asyncio.sleep(0.05)
            await asyncio.gather(*(s.close() for s in streams))
            edits: dict[str, list] = defaultdict(list)
            for request in fake.requests[mark:]:
                if request.method == "PATCH" and "/messages/" in request.path:
                    edits[request.path].append(request.at)
            gaps = [
                (b - a).total_seconds()
                for times in edits.values()
                for a, b in itertools.pairwise(times)
            ]
            too_fast = sum(1 for g in gaps if g < 0.999)
            print(f"\n[3] {STREAMS} bound sessions streaming for {STREAM_SECONDS:g} s")
            print(
                f"    {sum(len(t) for t in edits.values())} edits over {len(edits)} messages; "
                f"shortest gap between two edits of one message: {min(gaps):.3f} s"
            )
            print(
                f"    edits closer than 1 s: {too_fast}   target 0   "
                f"{'MET' if too_fast == 0 else 'MISSED'}"
            )

            await bot.close()
            await bare.close()
            await asyncio.gather(*tasks, return_exceptions=True)
            await services.close()
    reset_logging()


if __name__ == "__main__":
    asyncio.run(main())
