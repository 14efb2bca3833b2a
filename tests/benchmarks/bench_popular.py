"""A popular bot: 1,000 subagents streaming at once beside 10,000 idle bound threads.

Run with ``python3 tb.py bench popular``. Nothing here asserts; each figure is
printed on a line of its own, ``<figure>: <value> (target <target>)``, beside a
baseline measured in the same run.

The scene (issue 3), against the fake Discord limiting as Discord does
(``RateLimits.discord()``: 50 requests a second per bot token, 5 per 2 s per
webhook, per-route buckets, the invalid-request ban):

- one bot process (SQLite store) holding 10,000 bound threads that stay idle
  (bindings seeded in its store, their threads in the fake's guild, nothing
  missed), spread over 10 channels;
- 1,000 subagents spawned with ``/agents spawn`` within 60 s over those 10
  channels (100 threads under each), every one answering at once (a channel's
  threads are created at most 10 per 10 s, so the last ones open after ~100 s);
- the model is in the bot process (:class:`TimedProvider`, not HTTP): each
  answer is 20 chunks, one every 3 s (60 s an answer), every chunk marked
  ``⟦task.call.chunk⟧`` so the fake can tell when it became visible;
- people steer 100 of the subagents (a plain message while it streams, 🧭) and
  queue follow-ups in 100 others (``>> ...``, 📥), each at a random moment of the
  first answer; each then answers once more (another 60 s).

The fake runs in this process and the bot in a child of its own, so the bot's
peak RSS is its own. Times on both sides are ``time.monotonic()`` (one clock on
Linux across processes). Figures:

- the bot process's peak RSS (target <= 512 MiB);
- 429s answered by the fake: of scope ``global`` (target 0) and all of them;
  invalid requests (401/403/429) in the last 10 minutes (target < 100);
- acknowledgement latency: from the fake dispatching a person's message to it
  accepting the bot's 🧭 / 📥 reaction, p50 / p99 (target p99 <= 1 s);
- staleness of the streams' visible text: from a chunk leaving the model to the
  fake accepting the first post or edit that shows it, p50 / p99, beside the
  theoretical floor (the streams over the webhook edit budget: channels x
  webhooks per channel x webhook requests per second);
- from a task's last chunk to its completion announcement accepted, p99
  (target <= 5 s), with where the time goes (the announcement waits for the
  thread's status line to say idle); announcements exactly once per task (1,000
  of 1,000, none in the parent channels); every answer's final text whole in its
  thread.

Baseline, in the same run and against a fresh fake with the same limits: the
naive design, a bare discord.py client (:func:`run_naive`) doing the same work
with no pacing and no webhooks: it opens the same threads on the same schedule,
posts each answer as itself and edits every stream once a second while its
text grows, reacts to the same people at the same moments, answers their
messages once more and posts the announcement; its 429s and its p99
acknowledgement latency are printed (a message never acknowledged counts as
slower than any). It is followed only until every person's message is
acknowledged or given up on (it gets itself banned for invalid requests and
never finishes), about 150 s at full scale.

At full scale the bot's part takes about 4 minutes and the whole about 6.5
(``BENCH_POPULAR_NAIVE=0``: under 5).

Scale knobs (environment): ``BENCH_POPULAR_SPAWNS`` (1000), ``_IDLE`` (10000),
``_CHANNELS`` (10), ``_SPAWN_SECONDS`` (60), ``_CHUNKS`` (20),
``_CHUNK_SECONDS`` (3), ``_STEERS`` (100), ``_FOLLOW_UPS`` (100), ``_NAIVE``
(1; 0 skips the baseline), ``_SEED`` (1). E.g. a quick run::

    BENCH_POPULAR_SPAWNS=100 BENCH_POPULAR_IDLE=1000 BENCH_POPULAR_STEERS=10 \\
    BENCH_POPULAR_FOLLOW_UPS=10 BENCH_POPULAR_CHUNK_SECONDS=1 python3 tb.py bench popular
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.providers.types import (  # noqa: E402
    ChatMessage,
    ProviderEvent,
    StreamDone,
    TextDelta,
    ToolSpec,
)


def knob(name: str, default: float) -> float:
    return float(os.environ.get(f"BENCH_POPULAR_{name}", default))


SPAWNS = int(knob("SPAWNS", 1000))
IDLE = int(knob("IDLE", 10_000))
CHANNELS = int(knob("CHANNELS", 10))
SPAWN_SECONDS = knob("SPAWN_SECONDS", 60)
CHUNKS = int(knob("CHUNKS", 20))
CHUNK_SECONDS = knob("CHUNK_SECONDS", 3)
STEERS = int(knob("STEERS", 100))
FOLLOW_UPS = int(knob("FOLLOW_UPS", 100))
NAIVE = bool(int(knob("NAIVE", 1)))
SEED = int(knob("SEED", 1))

TOKEN = "bench-bot"
NAIVE_TOKEN = "bench-naive"
ANNOUNCED = "completed its task."
PEAK_TARGET_MIB = 512
WEBHOOKS_PER_CHANNEL = 10
"""``[discord] webhooks_per_channel``'s default; with :data:`WEBHOOK_RPS` each, the
streams' edit budget."""
WEBHOOK_RPS = 5 / 2
"""A webhook's bucket in ``RateLimits.discord()`` (5 per 2 s): the pace of its requests,
which go one at a time and wait whenever Discord's headers say the bucket is empty."""
PREFIX = "@@ "
"""What starts a child's line meant for the parent (anything else is the child's noise)."""


# ---------------------------------------------------------------------------
# The model: slow, marked chunks (in the bot's process; the naive client's too).

_FILLER = "the quick brown fox jumps over the lazy dog, then naps"
_MARK = re.compile(r"⟦(\d+)\.(\d+)\.(\d+)⟧")
_TASK = re.compile(r"bench-task-(\d+)")


def chunk_text(task: int, call: int, index: int) -> str:
    """One chunk of about 60 characters, starting with its mark."""
    text = f"⟦{task}.{call}.{index}⟧ {_FILLER}."
    return text if index == 0 else " " + text


def answer_text(task: int, call: int) -> str:
    """The whole text of a task's ``call``-th answer: what its thread must show."""
    return "".join(chunk_text(task, call, k) for k in range(CHUNKS))


def task_of(messages: Sequence[ChatMessage]) -> int:
    for message in messages:
        found = _TASK.search(message.content or "")
        if found:
            return int(found.group(1))
    raise ValueError("no bench task named in the conversation")


class TimedProvider:
    """Answers every call with :data:`CHUNKS` chunks, one every :data:`CHUNK_SECONDS`,
    noting when each left (``arrivals``, monotonic seconds, by ``task.call.chunk``)."""

    name = "bench-model"

    def __init__(self) -> None:
        self.calls: Counter[int] = Counter()
        self.arrivals: dict[str, float] = {}

    async def chunks(self, task: int) -> AsyncGenerator[str, None]:
        call = self.calls[task]
        self.calls[task] += 1
        for index in range(CHUNKS):
            await asyncio.sleep(CHUNK_SECONDS)
            self.arrivals[f"{task}.{call}.{index}"] = time.monotonic()
            yield chunk_text(task, call, index)

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        model: str | None = None,
    ) -> AsyncGenerator[ProviderEvent, None]:
        async for text in self.chunks(task_of(messages)):
            yield TextDelta(text=text)
        yield StreamDone(finish_reason="stop")


def peak_rss_kib() -> int:
    status = Path("/proc/self/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in status if ":" in line)
    return int(fields["VmHWM"].split()[0])


def say(payload: dict[str, Any]) -> None:
    print(PREFIX + json.dumps(payload), flush=True)


async def read_stdin_lines() -> AsyncGenerator[str, None]:
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        yield line.strip()


# ---------------------------------------------------------------------------
# Child: the bot.


async def run_bot(workdir: Path, seed: dict[str, Any]) -> None:
    from adapters.discord.endpoints import use_endpoints
    from adapters.discord.manager import ManagerRegistry
    from bot.client import ThreadboundClient
    from bot.wiring import build_services
    from core.logging import configure_logging

    configure_logging(level="warning", json_path=workdir / "bot.jsonl", console=False)
    use_endpoints(seed["api"], seed["gateway"])
    provider = TimedProvider()
    services = await build_services(bot_config(workdir, seed["guild"]), env={}, provider=provider)
    client = ThreadboundClient("default", services, ManagerRegistry())
    runner = asyncio.create_task(client.start(TOKEN))
    await client.account.catch_up.wait_finished(1)
    say({"ready": True, "rss_kib": peak_rss_kib()})
    async for line in read_stdin_lines():
        if line == "quit":
            break
    peak = peak_rss_kib()
    await client.close()
    await asyncio.gather(runner, return_exceptions=True)
    await services.close()
    (workdir / "arrivals.json").write_text(json.dumps(provider.arrivals))
    say(
        {
            "peak_kib": peak,
            "calls": {str(k): v for k, v in provider.calls.items()},
            "arrivals": str(workdir / "arrivals.json"),
            "limited": client.rate_limits.limited,
            "incidents": client.rate_limits.incidents,
            "started": client.pacer.started,
            "coalesced": client.pacer.coalesced,
            "warnings": log_events(workdir / "bot.jsonl"),
        }
    )


def bot_config(workdir: Path, guild: int) -> Any:
    from core.config import parse_config

    return parse_config(
        {
            "store": {"url": f"sqlite:///{workdir / 'bot.db'}"},
            "channels": {"discord": {"threadBindings": {"spawnSubagentSessions": True}}},
            "discord": {"command_guild_ids": [guild]},
            "agent": {"subagent_timeout_seconds": 0},
        },
        config_path=workdir / "config.toml",
        env={},
    )


def log_events(path: Path) -> dict[str, Any]:
    """Warnings and errors the bot logged, by event (with the first of each but the
    rate-limit incidents, cut short)."""
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                logged = json.loads(line)
            except ValueError:
                continue
            event = str(logged.get("event", "?"))
            if " " not in event:  # the bot's own events (not discord.py's voice notes)
                counts[event] += 1
                why = str(logged.get("exception", "")).strip().splitlines()[-1:]
                first.setdefault(event, " ".join([*why, str(logged.get("step", ""))])[:300])
    return {
        event: count if event == "discord.rate_limited" else f"{count}, first: {first[event]}"
        for event, count in counts.most_common(8)
    }


# ---------------------------------------------------------------------------
# Child: the naive design (bare discord.py, no pacing, no webhooks).


@dataclass
class NaiveThread:
    task: int
    more: int = 0
    """Answers the people asked for since (a steer or a follow-up: one more answer each)."""


async def run_naive(seed: dict[str, Any]) -> None:
    import discord
    import yarl

    discord.http.Route.BASE = seed["api"]
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(seed["gateway"])
    intents = discord.Intents.default()
    intents.message_content = True
    client = discord.Client(intents=intents, allowed_mentions=discord.AllowedMentions.none())
    provider = TimedProvider()
    threads: dict[int, NaiveThread] = {}
    failures: Counter[str] = Counter()

    async def react(message: discord.Message, emoji: str) -> None:
        try:
            await message.add_reaction(emoji)
        except discord.HTTPException as exc:
            failures[f"reaction {exc.status}"] += 1

    @client.event
    async def on_message(message: discord.Message) -> None:
        thread = threads.get(message.channel.id)
        if thread is None or message.author.bot or message.webhook_id is not None:
            return
        thread.more += 1
        await react(message, "📥" if message.content.startswith(">>") else "🧭")

    async def answer(channel: Any, task: int) -> None:
        text, done = "", False

        async def model() -> None:
            nonlocal text, done
            async for chunk in provider.chunks(task):
                text += chunk
            done = True

        streaming = asyncio.create_task(model())
        message, shown = None, ""
        while not (done and shown == text):
            await asyncio.sleep(1)  # every stream edited once a second while it grows
            if text == shown:
                continue
            wanted = text
            try:
                if message is None:
                    message = await channel.send(wanted)
                else:
                    await message.edit(content=wanted)
                shown = wanted
            except discord.HTTPException as exc:
                failures[f"stream {exc.status}"] += 1
        await streaming

    async def life(task: int, channel_id: int) -> None:
        try:
            parent = client.get_channel(channel_id)
            assert isinstance(parent, discord.TextChannel)
            channel = await parent.create_thread(
                name=f"bench-task-{task}", type=discord.ChannelType.public_thread
            )
        except discord.HTTPException as exc:
            failures[f"thread {exc.status}"] += 1
            return
        thread = threads[channel.id] = NaiveThread(task)
        await answer(channel, task)
        while thread.more:
            thread.more -= 1
            await answer(channel, task)
        try:
            await channel.send(f"✅ **Naive** {ANNOUNCED}")
        except discord.HTTPException as exc:
            failures[f"announcement {exc.status}"] += 1

    await client.login(NAIVE_TOKEN)
    runner = asyncio.create_task(client.connect())
    await client.wait_until_ready()
    say({"ready": True})
    lives: list[asyncio.Task[None]] = []
    async for line in read_stdin_lines():
        if line == "quit":
            break
        _, task, channel_id = line.split()
        lives.append(asyncio.create_task(life(int(task), int(channel_id))))
    for life_task in lives:
        life_task.cancel()
    await asyncio.gather(*lives, return_exceptions=True)
    await client.close()
    await asyncio.gather(runner, return_exceptions=True)
    say(
        {
            "calls": {str(k): v for k, v in provider.calls.items()},
            "arrivals": provider.arrivals,
            "failures": dict(failures),
        }
    )


# ---------------------------------------------------------------------------
# Parent: the fake, the people, and what the fake saw.


@dataclass
class Person:
    task: int
    kind: str  # "steer" or "follow_up"
    at: float = 0.0
    message_id: int = 0


@dataclass
class Seen:
    """What the fake accepted (2xx), as it accepted it: watched from its request log."""

    visible: dict[tuple[int, int, int], float] = field(default_factory=dict)
    thread_of: dict[int, int] = field(default_factory=dict)
    started: dict[int, asyncio.Event] = field(default_factory=dict)
    reactions: dict[int, tuple[float, str]] = field(default_factory=dict)
    announced: dict[int, list[float]] = field(default_factory=dict)
    threads_created: list[float] = field(default_factory=list)
    idle_status: dict[int, list[float]] = field(default_factory=dict)
    """When each thread's status line was edited to say it is idle."""

    def watch(self, fake: Any) -> None:
        answered = fake.recorder.answered

        def seen(record: Any, status: int) -> None:
            answered(record, status)
            if 200 <= status < 300:
                self._accepted(record, time.monotonic())

        fake.recorder.answered = seen

    def started_event(self, task: int) -> asyncio.Event:
        return self.started.setdefault(task, asyncio.Event())

    def _accepted(self, record: Any, now: float) -> None:
        method, path = record.method, record.path
        parts = path.strip("/").split("/")
        if method == "PUT" and "reactions" in parts:
            self.reactions.setdefault(int(parts[3]), (now, unquote(parts[5])))
            return
        if method == "POST" and path.endswith("/threads"):
            self.threads_created.append(now)
            return
        body = record.json if isinstance(record.json, dict) else {}
        content = body.get("content")
        if not isinstance(content, str) or method not in ("POST", "PATCH"):
            return
        if parts[0] == "webhooks":
            where = record.query.get("thread_id")
            if where is None:
                return  # an interaction's followup
            thread = int(where)
        elif parts[0] == "channels" and parts[2] == "messages":
            thread = int(parts[1])
        else:
            return
        if ANNOUNCED in content:
            self.announced.setdefault(thread, []).append(now)
        if content.startswith("Status: ✅ idle"):
            self.idle_status.setdefault(thread, []).append(now)
        for found in _MARK.finditer(content):
            key = (int(found[1]), int(found[2]), int(found[3]))
            if key not in self.visible:
                self.visible[key] = now
                if key[0] not in self.thread_of:
                    self.thread_of[key[0]] = thread
                    self.started_event(key[0]).set()


class Child:
    """A child process (the bot, or the naive client) talking JSON lines."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )

    async def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, self.process.stdout.readline)
            if not line:
                raise RuntimeError(f"child {self.process.args[2:]} ended early")
            if line.startswith(PREFIX):
                result: dict[str, Any] = json.loads(line[len(PREFIX) :])
                return result

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    async def finish(self) -> dict[str, Any]:
        self.send("quit")
        result = await self.read()
        await asyncio.get_running_loop().run_in_executor(None, self.process.wait)
        return result


async def seed_store(workdir: Path, guild: Any, threads: list[Any]) -> None:
    """Bindings for the idle threads, each read up to date (nothing missed)."""
    from adapters.discord.ids import conversation_for
    from bot.wiring import build_services
    from core.bindings.records import SessionBindingRecord
    from core.bindings.repository import BindingRepository
    from core.inbox import repository as inbox_repository
    from core.providers.scripted import ScriptedProvider, Step

    provider = ScriptedProvider(lambda _messages: Step(text="ok"))
    services = await build_services(bot_config(workdir, guild.id), env={}, provider=provider)
    now = services.bindings.clock.now()
    records = [
        SessionBindingRecord(
            binding_id=uuid.uuid4().hex,
            target_session_key=f"idle:{thread.id}",
            target_kind="session",
            conversation=conversation_for("default", thread.id, thread.parent_id),
            status="active",
            bound_at=now,
            metadata={"persona": {"name": "Idle"}},
            scope=str(guild.id),
        )
        for thread in threads
    ]

    def write(conn: Any) -> None:
        repository = BindingRepository(conn)
        for record in records:
            repository.insert(record)
        inbox_repository.advance_cursors(
            conn, "discord", "default", {str(t.id): t.id for t in threads}, now
        )

    await services.database.run(write)
    await services.close()


@dataclass
class Outcome:
    """One run's figures (the bot's or the naive client's)."""

    seen: Seen
    people: list[Person]
    calls: dict[int, int]
    arrivals: dict[str, float]
    contents: dict[int, list[str]]
    parent_announcements: int
    global_429: int
    all_429: int
    invalid: int
    wall: float
    spawned_by: float
    child: dict[str, Any]


def people_for(rng: random.Random) -> list[Person]:
    chosen = rng.sample(range(SPAWNS), min(SPAWNS, STEERS + FOLLOW_UPS))
    return [Person(task, "steer" if i < STEERS else "follow_up") for i, task in enumerate(chosen)]


async def drive(
    fake: Any,
    seen: Seen,
    channels: list[Any],
    alice: Any,
    spawn_one: Any,
    people: list[Person],
    rng: random.Random,
    *,
    to_the_end: bool,
    spawned_all: Any = None,
) -> tuple[float, float]:
    """Spawns on schedule; each person writes at a random moment of their task's first
    answer. Then waits for every announcement (``to_the_end``: of every spawn that
    started, once ``spawned_all()`` says how many did), or only until every person's
    message is acknowledged (or 30 s more went by). Returns (last spawn asked, the end)
    as seconds from the start."""
    began = time.monotonic()
    answer_seconds = CHUNKS * CHUNK_SECONDS

    async def person(who: Person) -> None:
        await seen.started_event(who.task).wait()
        # the first chunk is visible: the answer streams for about answer_seconds more
        await asyncio.sleep(rng.uniform(0, 0.66 * answer_seconds))
        text = (
            f"focus on part {who.task} please"
            if who.kind == "steer"
            else f">> then summarise part {who.task}"
        )
        who.at = time.monotonic()
        message = await fake.user_says(seen.thread_of[who.task], alice, text)
        who.message_id = message.id

    def announced() -> int:
        return sum(1 for t in range(SPAWNS) if seen.announced.get(seen.thread_of.get(t, -1)))

    def acknowledged() -> bool:
        return all(p.message_id in seen.reactions for p in people)

    async def progress() -> None:
        while True:
            await asyncio.sleep(15)
            print(
                f"    ... {time.monotonic() - began:.0f} s: {len(seen.threads_created)} threads, "
                f"{len(seen.thread_of)} streaming, {announced()} announced, "
                f"{len(seen.reactions)} reactions, {fake.rate_limits.total_429} 429s",
                file=sys.stderr,
                flush=True,
            )

    reporter = asyncio.create_task(progress())
    writers = [asyncio.create_task(person(p)) for p in people]
    for task in range(SPAWNS):
        due = began + task * SPAWN_SECONDS / SPAWNS
        if (wait := due - time.monotonic()) > 0:
            await asyncio.sleep(wait)
        await spawn_one(task, channels[task % len(channels)])
    spawned = time.monotonic() - began
    # Polled, not awaited on the fake's changes: a benchmark may sleep; the tests never do.
    if to_the_end:
        deadline = time.monotonic() + 4 * answer_seconds + 120
        while time.monotonic() < deadline:
            started = spawned_all() if spawned_all is not None else SPAWNS
            if started is not None and announced() >= started:
                break
            await asyncio.sleep(0.5)
    else:
        await asyncio.wait(writers, timeout=answer_seconds)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not acknowledged():  # noqa: ASYNC110
            await asyncio.sleep(0.5)
    for writer in writers:  # a task that never streamed has nobody writing to it
        writer.cancel()
    reporter.cancel()
    await asyncio.gather(*writers, reporter, return_exceptions=True)
    return spawned, time.monotonic() - began


async def bot_run(tmp: Path) -> Outcome:
    from fakediscord import FakeDiscord
    from fakediscord.ratelimits import RateLimits

    rng = random.Random(SEED)
    async with FakeDiscord(
        rate_limits=RateLimits.discord(), wait_timeout=600, keep_requests=2000
    ) as fake:
        bot = fake.add_bot(TOKEN, "threadbound")
        guild = fake.add_guild("popular")
        channels = [fake.add_text_channel(guild, f"channel-{c}") for c in range(CHANNELS)]
        alice = fake.add_member(guild, "alice")
        idle = [
            fake.add_thread(channels[i % CHANNELS], f"idle-{i}", owner=bot) for i in range(IDLE)
        ]
        workdir = tmp / "bot"
        workdir.mkdir()
        await seed_store(workdir, guild, idle)
        seen = Seen()
        seen.watch(fake)
        seed = {"api": f"{fake.base_url}/api/v10", "gateway": fake.gateway_url, "guild": guild.id}
        child = Child("--bot", str(workdir), json.dumps(seed))
        ready = await child.read()
        print(f"    (bot ready: RSS {ready['rss_kib'] / 1024:.0f} MiB with {IDLE:,} idle)")
        people = people_for(rng)

        handles: list[Any] = []

        async def spawn_one(task: int, channel: Any) -> None:
            handles.append(
                await fake.invoke_command(
                    guild, channel, alice, "agents spawn", {"task": f"Write bench-task-{task}."}
                )
            )

        def spawned_all() -> int | None:
            """How many spawns started a subagent, once every spawn was answered."""
            if len(handles) < SPAWNS or not all(h.followups for h in handles):
                return None
            return sum(
                h.followups[0].body.get("content", "").startswith("Started") for h in handles
            )

        try:
            spawned, wall = await drive(
                fake,
                seen,
                channels,
                alice,
                spawn_one,
                people,
                rng,
                to_the_end=True,
                spawned_all=spawned_all,
            )
        finally:
            result = await child.finish()
        answers: Counter[str] = Counter()
        for handle in handles:
            said = handle.followups[0].body.get("content", "") if handle.followups else ""
            said = re.sub(r"<#\d+>", "<#…>", said)  # refusals alike whatever the channel
            answers["started" if said.startswith("Started") else said[:120] or "no answer"] += 1
        result["spawn_answers"] = dict(answers)
        return outcome(fake, seen, people, channels, result, spawned, wall)


async def naive_run(tmp: Path) -> Outcome:
    from fakediscord import FakeDiscord
    from fakediscord.ratelimits import RateLimits

    rng = random.Random(SEED)
    async with FakeDiscord(
        rate_limits=RateLimits.discord(), wait_timeout=600, keep_requests=2000
    ) as fake:
        fake.add_bot(NAIVE_TOKEN, "naive")
        guild = fake.add_guild("popular")
        channels = [fake.add_text_channel(guild, f"channel-{c}") for c in range(CHANNELS)]
        alice = fake.add_member(guild, "alice")
        seen = Seen()
        seen.watch(fake)
        seed = {"api": f"{fake.base_url}/api/v10", "gateway": fake.gateway_url}
        child = Child("--naive", json.dumps(seed))
        await child.read()
        people = people_for(rng)

        async def spawn_one(task: int, channel: Any) -> None:
            child.send(f"spawn {task} {channel.id}")

        try:
            spawned, wall = await drive(
                fake, seen, channels, alice, spawn_one, people, rng, to_the_end=False
            )
        finally:
            result = await child.finish()
        return outcome(fake, seen, people, channels, result, spawned, wall)


def outcome(
    fake: Any,
    seen: Seen,
    people: list[Person],
    channels: list[Any],
    child: dict[str, Any],
    spawned: float,
    wall: float,
) -> Outcome:
    arrivals = child.get("arrivals", {})
    if isinstance(arrivals, str):
        arrivals = json.loads(Path(arrivals).read_text())
    contents = {
        thread: [m.content for m in fake.messages_in(thread)] for thread in seen.thread_of.values()
    }
    parents = sum(
        ANNOUNCED in m.content for channel in channels for m in fake.messages_in(channel.id)
    )
    limiter = fake.rate_limits
    return Outcome(
        seen=seen,
        people=people,
        calls={int(k): v for k, v in child.get("calls", {}).items()},
        arrivals=arrivals,
        contents=contents,
        parent_announcements=parents,
        global_429=limiter.counts_by_scope["global"],
        all_429=limiter.total_429,
        invalid=limiter.invalid_requests(),
        wall=wall,
        spawned_by=spawned,
        child=child,
    )


# ---------------------------------------------------------------------------
# Figures.


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def acks(run: Outcome) -> tuple[list[float], int, int, Counter[str]]:
    """Acknowledgement latencies (s); messages written and never acknowledged; people who
    never wrote (their task never streamed); the reactions by kind of message."""
    latencies: list[float] = []
    missing = unwritten = 0
    marks: Counter[str] = Counter()
    for who in run.people:
        if not who.message_id:
            unwritten += 1
            continue
        got = run.seen.reactions.get(who.message_id)
        if got is None:
            missing += 1
            continue
        latencies.append(got[0] - who.at)
        marks[f"{who.kind} {got[1]}"] += 1
    return latencies, missing, unwritten, marks


def ack_p(latencies: list[float], missing: int, q: float) -> str:
    """The ``q``-th percentile of the acknowledgement latencies, a message never
    acknowledged counting as slower than any."""
    total = len(latencies) + missing
    if not total:
        return "not measured: nobody wrote"
    rank = min(total, max(1, round(q / 100 * total)))
    if rank > len(latencies):
        return f"never ({missing} of {total} messages written never acknowledged)"
    return f"{sorted(latencies)[rank - 1]:.3f} s"


def staleness(run: Outcome) -> tuple[list[float], int]:
    values: list[float] = []
    never = 0
    for key, left in run.arrivals.items():
        task, call, index = (int(x) for x in key.split("."))
        shown = run.seen.visible.get((task, call, index))
        if shown is None:
            never += 1
        else:
            values.append(shown - left)
    return values, never


def completions(run: Outcome) -> tuple[int, list[float], int, list[float], list[float]]:
    """Tasks announced exactly once; last chunk to announcement (s); whole final texts;
    last chunk to the status line's last idle edit before the announcement, and from that
    edit to the announcement (s)."""
    once = 0
    latency: list[float] = []
    whole = 0
    to_idle: list[float] = []
    idle_to_announced: list[float] = []
    for task in range(SPAWNS):
        thread = run.seen.thread_of.get(task)
        if thread is None:
            continue
        said = run.contents.get(thread, [])
        if sum(ANNOUNCED in c for c in said) == 1:
            once += 1
        calls = run.calls.get(task, 0)
        whole += sum(1 for call in range(calls) if answer_text(task, call) in said)
        announced = run.seen.announced.get(thread)
        last = run.arrivals.get(f"{task}.{calls - 1}.{CHUNKS - 1}")
        if announced and last is not None:
            latency.append(announced[0] - last)
            idle = [t for t in run.seen.idle_status.get(thread, []) if t <= announced[0]]
            if idle:
                to_idle.append(idle[-1] - last)
                idle_to_announced.append(announced[0] - idle[-1])
    return once, latency, whole, to_idle, idle_to_announced


def seconds(value: float, digits: int = 2) -> str:
    return "not measured: no sample" if value != value else f"{value:.{digits}f} s"


def report(bot: Outcome, naive: Outcome | None) -> None:
    per_channel = max(1, SPAWNS // CHANNELS)
    budget = CHANNELS * min(WEBHOOKS_PER_CHANNEL, per_channel) * WEBHOOK_RPS
    created = bot.seen.threads_created
    print(
        f"\n[1] the bot: {SPAWNS:,} subagents spawned within {SPAWN_SECONDS:g} s over "
        f"{CHANNELS} channels beside {IDLE:,} idle bound threads; answers of {CHUNKS} chunks, "
        f"one every {CHUNK_SECONDS:g} s; {STEERS} steered, {FOLLOW_UPS} followed up"
    )
    print(
        f"    (spawns asked by {bot.spawned_by:.0f} s; their threads created over "
        f"{(max(created) - min(created)) if created else 0:.0f} s; every announcement "
        f"accepted by {bot.wall:.0f} s; answers to /agents spawn: {bot.child.get('spawn_answers')})"
    )
    peak = bot.child["peak_kib"] / 1024
    print(f"peak RSS of the bot process: {peak:.0f} MiB (target <= {PEAK_TARGET_MIB} MiB)")
    print(f"global-scope 429s: {bot.global_429} (target 0)")
    print(f"all 429s: {bot.all_429} (target none stated; 0 is best)")
    print(f"invalid requests per 10 minutes: {bot.invalid} (target < 100)")
    print(f"    (the run's last 10 minutes at its end: the whole run, {bot.wall:.0f} s)")
    latencies, missing, unwritten, marks = acks(bot)
    print(f"acknowledgement latency p50: {ack_p(latencies, missing, 50)} (target none stated)")
    print(f"acknowledgement latency p99: {ack_p(latencies, missing, 99)} (target <= 1 s)")
    print(
        f"    (gateway event to the 🧭/📥 reaction accepted by the fake: {len(latencies)} of "
        f"{len(bot.people)} acknowledged, {missing} never, {unwritten} not written as their "
        "task never streamed; "
        f"{', '.join(f'{k} {v}' for k, v in sorted(marks.items()))})"
    )
    stale, never = staleness(bot)
    floor = f"{SPAWNS / budget:.2f} s"
    print(f"stream staleness p50: {seconds(pct(stale, 50), 3)} (target the floor, {floor})")
    print(f"stream staleness p99: {seconds(pct(stale, 99), 3)} (target the floor, {floor})")
    print(f"stream staleness theoretical floor: {floor} (target none: a bound)")
    print(
        f"    (from a chunk leaving the model to the fake accepting a post or edit showing it, "
        f"over {len(stale):,} chunks, {never} never shown; the floor is {SPAWNS:,} streams / "
        f"{budget:g} webhook edits a second: {CHANNELS} channels x "
        f"{min(WEBHOOKS_PER_CHANNEL, per_channel)} webhooks x {WEBHOOK_RPS:g} a second)"
    )
    once, latency, whole, to_idle, idle_to_announced = completions(bot)
    print(f"last chunk to completion announcement p99: {seconds(pct(latency, 99))} (target <= 5 s)")
    print(
        f"    (p50 {seconds(pct(latency, 50))}; the announcement waits for the thread's status "
        f"line to say ✅ idle, a streaming edit of the bot's token: last chunk to that edit "
        f"p50 {seconds(pct(to_idle, 50))} / p99 {seconds(pct(to_idle, 99))}, that edit to the "
        f"announcement p50 {seconds(pct(idle_to_announced, 50))} / p99 "
        f"{seconds(pct(idle_to_announced, 99))}, over {len(to_idle)} tasks)"
    )
    print(f"completions announced exactly once: {once} of {SPAWNS} (target {SPAWNS} of {SPAWNS})")
    print(f"    ({bot.parent_announcements} announcements in the parent channels)")
    answers = sum(bot.calls.values())
    print(f"final texts whole: {whole} of {answers} (target {answers} of {answers})")
    child = bot.child
    print(
        f"    (the bot's own view: {child['limited']} 429s in {child['incidents']} incidents; "
        f"{child['started']:,} bot-token requests paced, {child['coalesced']:,} streaming edits "
        f"coalesced; its warnings: {child['warnings'] or 'none'})"
    )
    if naive is None:
        print("\n[2] baseline, the naive design")
        print("naive 429s: not measured: BENCH_POPULAR_NAIVE=0 (target none: a baseline)")
        print(
            "naive acknowledgement latency p99: not measured: BENCH_POPULAR_NAIVE=0 "
            "(target none: a baseline)"
        )
        return
    print(
        "\n[2] baseline, the naive design: bare discord.py, no pacing and no webhooks, every "
        "stream posted as the bot and edited once a second while it grows; the same scene, "
        "followed until every person was acknowledged (or 30 s more)"
    )
    print(f"naive 429s: {naive.all_429} (target none: a baseline)")
    nl, nmissing, nunwritten, _ = acks(naive)
    print(f"naive acknowledgement latency p99: {ack_p(nl, nmissing, 99)} (target none: a baseline)")
    nstale, nnever = staleness(naive)
    print(
        f"    (over {naive.wall:.0f} s: {naive.global_429} of global scope; invalid requests "
        f"in 10 minutes {naive.invalid}; acknowledgement p50 {ack_p(nl, nmissing, 50)}, "
        f"{len(nl)} of {len(naive.people)} acknowledged, {nmissing} never, {nunwritten} not "
        f"written as their task never streamed; staleness p50 "
        f"{seconds(pct(nstale, 50))} / p99 {seconds(pct(nstale, 99))}, {nnever} chunks never "
        f"shown; {len(naive.seen.threads_created)} threads created; failures seen by the "
        f"client: {naive.child.get('failures') or 'none'})"
    )


async def main() -> None:
    from core.logging import configure_logging

    configure_logging(enabled=False)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tb-bench-popular-") as tmp:
        bot = await bot_run(Path(tmp))
        naive = await naive_run(Path(tmp)) if NAIVE else None
    report(bot, naive)
    print(f"\n(the whole benchmark took {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "--bot":
        asyncio.run(run_bot(Path(sys.argv[2]), json.loads(sys.argv[3])))
    elif mode == "--naive":
        asyncio.run(run_naive(json.loads(sys.argv[2])))
    else:
        asyncio.run(main())
