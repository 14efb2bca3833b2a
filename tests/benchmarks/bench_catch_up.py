"""Catching up after a downtime, against the fake Discord on loopback.

Run with ``python3 tb.py bench catch_up``. Nothing here asserts; figures are
printed beside baselines measured in the same run.

1. A start with 10,000 active bound threads and nothing missed: the REST calls
   the start makes (target: no per-thread history read) and the time from
   opening the store to the catch-up being done (target: within 2x of the
   same start with no bindings, over the same guild and its 10,000 threads).
2. 1,000 messages written while the bot was down, over 50 bound threads: the
   time from the start to the first answer, and the messages fed to their
   sessions per second; beside a bare discord.py client reading the same
   history back (the floor for reading it at all).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import discord  # noqa: E402
import yarl  # noqa: E402
from sqlalchemy import func, select  # noqa: E402

from adapters.discord.ids import conversation_for  # noqa: E402
from adapters.discord.manager import ManagerRegistry  # noqa: E402
from bot.client import ThreadboundClient  # noqa: E402
from bot.wiring import Services, build_services  # noqa: E402
from core.bindings.records import SessionBindingRecord  # noqa: E402
from core.bindings.repository import BindingRepository  # noqa: E402
from core.clock import FakeClock  # noqa: E402
from core.config import parse_config  # noqa: E402
from core.inbox import repository as inbox_repository  # noqa: E402
from core.logging import configure_logging, reset_logging  # noqa: E402
from core.providers.scripted import ScriptedProvider, Step  # noqa: E402
from core.store.tables import InboxRow, table_of  # noqa: E402
from fakediscord import FakeDiscord, RateLimits  # noqa: E402
from fakediscord.models import Channel, Guild, User  # noqa: E402

QUIET_THREADS = 10_000
RUNS = 3
BUSY_THREADS = 50
MISSED_PER_THREAD = 20
TOKEN = "bench-bot"


def intents() -> discord.Intents:
    value = discord.Intents.default()
    value.message_content = True
    return value


class Bare(discord.Client):
    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """No pause: the fake has no identify rate limit."""


def config_for(db: Path, guild: Guild) -> Any:
    return parse_config(
        {
            "store": {"url": f"sqlite:///{db}"},
            "discord": {"command_guild_ids": [guild.id]},
            "logging": {"level": "warning"},
        },
        env={},
    )


async def services_for(db: Path, guild: Guild) -> Services:
    answer = ScriptedProvider(lambda _messages: Step(text="ok"))
    return await build_services(config_for(db, guild), clock=FakeClock(), env={}, provider=answer)


async def seed_store(db: Path, guild: Guild, threads: list[Channel], fake: FakeDiscord) -> None:
    """Bindings for ``threads``, each read up to its last message (nothing missed)."""
    services = await services_for(db, guild)
    now = services.bindings.clock.now()
    records = [
        SessionBindingRecord(
            binding_id=uuid.uuid4().hex,
            target_session_key=f"bench:{thread.id}",
            target_kind="session",
            conversation=conversation_for("default", thread.id, thread.parent_id),
            status="active",
            bound_at=now,
            metadata={"persona": {"name": "Bench"}},
            scope=str(guild.id),
        )
        for thread in threads
    ]
    read_to = {str(t.id): fake.channel(t.id).last_message_id or t.id for t in threads}

    def write(conn: Any) -> None:
        repository = BindingRepository(conn)
        for record in records:
            repository.insert(record)
        inbox_repository.advance_cursors(conn, "discord", "default", read_to, now)

    await services.database.run(write)
    await services.close()


async def start(
    db: Path, guild: Guild, fake: FakeDiscord, bot: User
) -> tuple[Services, ThreadboundClient, asyncio.Task[None], float]:
    """Open the store, connect, and wait for the guild's catch-up; the seconds it took."""
    began = time.perf_counter()
    services = await services_for(db, guild)
    client = ThreadboundClient("default", services, ManagerRegistry())
    task = asyncio.create_task(client.start(TOKEN))
    await client.account.catch_up.wait_finished(1)
    return services, client, task, time.perf_counter() - began


async def stop(services: Services, client: ThreadboundClient, task: asyncio.Task[None]) -> None:
    await client.close()
    await asyncio.gather(task, return_exceptions=True)
    await services.close()


def history_reads(fake: FakeDiscord, since: int) -> int:
    return sum(
        1
        for r in fake.requests[since:]
        if r.method == "GET" and r.path.startswith("/channels/") and r.path.endswith("/messages")
    )


async def quiet_start(tmp: Path) -> None:
    # Unlimited: this measures the bot's own work; Discord's limits are bench_popular's.
    async with FakeDiscord(wait_timeout=120, rate_limits=RateLimits.off()) as fake:
        point_discord_py_at(fake)
        bot = fake.add_bot(TOKEN, "threadbound")
        guild = fake.add_guild("bench")
        channel = fake.add_text_channel(guild, "general")
        threads = [fake.add_thread(channel, f"t{i}", owner=bot) for i in range(QUIET_THREADS)]
        for thread in threads:
            fake.ops.post_message(thread.id, bot.id, {"content": "hello"})
        bound, empty = tmp / "bound.db", tmp / "empty.db"
        await seed_store(bound, guild, threads, fake)
        await seed_store(empty, guild, [], fake)

        timings: dict[str, list[float]] = {"bound": [], "empty": []}
        calls: dict[str, list[int]] = {"bound": [], "empty": []}
        reads = 0
        for _ in range(RUNS):
            for name, db in (("empty", empty), ("bound", bound)):
                mark = len(fake.requests)
                services, client, task, seconds = await start(db, guild, fake, bot)
                report = client.account.catch_up.reports[0]
                timings[name].append(seconds)
                calls[name].append(len(fake.requests) - mark)
                if name == "bound":
                    reads += history_reads(fake, mark)
                    assert report.threads == QUIET_THREADS, report
                await stop(services, client, task)
        bound_s, empty_s = statistics.median(timings["bound"]), statistics.median(timings["empty"])
        ratio = bound_s / empty_s
        print(f"\n[1] a start with {QUIET_THREADS:,} active bound threads, nothing missed")
        print(
            f"    REST calls during the start: {statistics.median(calls['bound']):.0f} "
            f"(no bindings: {statistics.median(calls['empty']):.0f}); history reads: "
            f"{reads}   target 0   {'MET' if reads == 0 else 'MISSED'}"
        )
        print(f"    store opened to caught up, median of {RUNS}: {bound_s:.2f} s")
        print(f"    baseline, the same start with no bindings: {empty_s:.2f} s")
        print(f"    ratio: {ratio:.2f}x   target <= 2x   {'MET' if ratio <= 2 else 'MISSED'}")


async def busy_start(tmp: Path) -> None:
    # Unlimited: this measures the bot's own work; Discord's limits are bench_popular's.
    async with FakeDiscord(wait_timeout=120, rate_limits=RateLimits.off()) as fake:
        point_discord_py_at(fake)
        bot = fake.add_bot(TOKEN, "threadbound")
        bare_user = fake.add_bot("bench-bare", "bare")
        guild = fake.add_guild("bench")
        channel = fake.add_text_channel(guild, "general")
        alice = fake.add_member(guild, "alice")
        threads = [fake.add_thread(channel, f"t{i}", owner=bot) for i in range(BUSY_THREADS)]
        for thread in threads:
            fake.ops.post_message(thread.id, bot.id, {"content": "hello"})
        db = tmp / "busy.db"
        await seed_store(db, guild, threads, fake)
        cursors = {t.id: fake.channel(t.id).last_message_id for t in threads}
        for i in range(MISSED_PER_THREAD):
            for thread in threads:
                fake.ops.post_message(thread.id, alice.id, {"content": f"missed {i}"})
        missed = BUSY_THREADS * MISSED_PER_THREAD

        # the floor: a bare discord.py client reading the same history back
        bare = Bare(intents=intents())
        bare_task = asyncio.create_task(bare.start("bench-bare"))
        await fake.wait_ready(bare_user.id)
        began = time.perf_counter()
        read = 0
        for thread in threads:
            channel_of = bare.get_channel(thread.id) or await bare.fetch_channel(thread.id)
            assert isinstance(channel_of, discord.Thread)
            async for _ in channel_of.history(
                limit=None, after=discord.Object(cursors[thread.id]), oldest_first=True
            ):
                read += 1
        floor = time.perf_counter() - began
        await bare.close()
        await asyncio.gather(bare_task, return_exceptions=True)

        began = time.perf_counter()
        services = await services_for(db, guild)
        client = ThreadboundClient("default", services, ManagerRegistry())
        task = asyncio.create_task(client.start(TOKEN))
        ids = {t.id for t in threads}

        def answered() -> bool | None:
            latest = _latest(fake)
            return True if any(m.webhook_id and m.channel_id in ids for m in latest) else None

        await fake.state.changed.wait_for(answered)
        first_answer = time.perf_counter() - began

        # Polled, not re-checked at every change of the fake: counting costs time the
        # bot would otherwise have (a benchmark may sleep; the tests never do).
        while await services.database.run(done_count) < missed:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        fed = time.perf_counter() - began
        await stop(services, client, task)
        print(
            f"\n[2] {missed:,} messages written while the bot was down, over {BUSY_THREADS} threads"
        )
        print(f"    start to the first answer: {first_answer:.2f} s")
        print(
            f"    start to all {missed:,} in their sessions' logs: {fed:.2f} s "
            f"({missed / fed:,.0f} messages fed per second)"
        )
        print(
            f"    baseline, a bare discord.py client reading the same history back: "
            f"{floor:.2f} s ({read / floor:,.0f} messages per second)"
        )


def done_count(conn: Any) -> int:
    """Messages the inbox has handed over (their sessions' logs hold them)."""
    inbox = table_of(InboxRow)
    query = select(func.count()).where(inbox.c.status == "done", inbox.c.kind == "message")
    return int(conn.execute(query).scalar() or 0)


def _latest(fake: FakeDiscord) -> list[Any]:
    return [fake.state.messages[i] for i in list(fake.state.messages)[-200:]]


def point_discord_py_at(fake: FakeDiscord) -> None:
    discord.http.Route.BASE = f"{fake.base_url}/api/v10"
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)


async def main() -> None:
    configure_logging(enabled=False)
    # Each run stops its client within discord.py's two seconds before on_ready; the
    # dispatch left pending then is dropped, which is all this warning says.
    warnings.filterwarnings("ignore", message="coroutine 'Client._run_event' was never awaited")
    with tempfile.TemporaryDirectory(prefix="tb-bench-catch-up-") as tmp:
        await quiet_start(Path(tmp))
        await busy_start(Path(tmp))
    reset_logging()


if __name__ == "__main__":
    asyncio.run(main())
