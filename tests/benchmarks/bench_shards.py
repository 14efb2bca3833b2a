"""Shards benchmark: 1,000 subagents over two guilds, one bot process, then two.

Run with ``python3 tb.py bench shards`` (PostgreSQL must answer at
127.0.0.1:5432). Nothing here asserts; the figures are printed with their targets.

Both phases run the real ``python -m bot`` against the fake Discord and the
fake model server hosted by this process, on a fresh PostgreSQL schema each:

1. baseline: ONE process with both shards (``shard_count = 2``, ``shard_ids = [0, 1]``);
2. TWO processes with one shard each.

Each phase first runs 50 untimed spawns per guild at once (every process grows
its connection pool and fills its caches: imports, compiled SQL). Then the timed
window: :data:`SPAWNS` run-mode subagents (threads off: each answers and is
announced in its channel), alternating between the guilds, with at most
:data:`IN_FLIGHT` spawned and not yet answered at any time, so the window is
several seconds of steady load rather than one burst.

What the figures mean. This machine's cores run the fake Discord, the fake model
server (both in this process, "the fakes") and PostgreSQL beside the bots, so
wall-clock throughput measures the machine, not the bot. The bot is measured by
its own CPU instead:

- **completions per bot CPU-second**: completions over the user + system CPU time
  of the bot processes (from ``/proc/<pid>/stat``), for one process and for two;
- **scaling efficiency**: that figure for two processes over one (target >= 0.9):
  how much of a second process's CPU is work rather than the cost of sharding;
- **saturation** of the single process: (time on a CPU + time waiting on the run
  queue for one) over wall time, from ``/proc/<pid>/task/*/schedstat``. Near 1 the
  process itself limited the run (it always had work); well below 1 it waited on
  the fakes or PostgreSQL, and its wall-clock figures understate what it can do;
- **ceiling** of the wall ratio two/one on this machine: with the bots' CPU ``B``
  and everything else's CPU ``O`` (the fakes, plus PostgreSQL: all children of the
  postmaster, read from ``/proc``, exited ones through the postmaster's
  ``cutime``/``cstime``) per completion, two processes on ``C = 2`` cores reach at
  most ``C / (B + O)`` completions per second, one saturated process ``1 / B``,
  so the ratio is at most ``2 / (1 + O / B)``. It is printed beside the measured
  wall ratio; **the wall ratio means something only with >= 4 cores and the bots
  pinned to separate cores** (e.g. ``taskset``), so that the fakes and PostgreSQL
  do not take the bots' cores;
- **projected capacity** of two processes on a core each, relative to one process
  on one core (target >= 1.6): one process on a core of its own completes
  ``1 / c1`` per second, ``c1`` its CPU-seconds per completion in phase 1. In
  phase 2 each process takes half the spawns (one guild each), so the pair is
  held back by the costlier one: ``2 / max(c2a, c2b)``. The projection is
  ``2 * c1 / max(c2a, c2b)``. It assumes the fakes and PostgreSQL have cores of
  their own: how many they would need at that rate (their CPU per completion times
  the projected rate) is printed beside it.

With ``BENCH_PROFILE=1`` py-spy samples every bot process over the timed window and
the two phases' CPU per completion is printed side by side by place (the package or
our module a sample's innermost frame runs in), largest difference first.

PostgreSQL's CPU includes any other client's backends active meanwhile (other
test runs on a shared server); run on a quiet machine, two or three times, and
compare ratios rather than absolute rates.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fakediscord import (  # noqa: E402
    FakeDiscord,
    InteractionHandle,
    RateLimits,
)
from tests.fixtures.shard_processes import (  # noqa: E402
    ANSWER,
    BotProcess,
    ShardWorld,
    TaskLLM,
    shard_world,
    wait_until,
)
from tests.fixtures.stores import PG_DSN, PG_URL, pg_schema, require_postgres  # noqa: E402

SPAWNS = int(os.environ.get("BENCH_SPAWNS", "1000"))
"""Spawns in each phase's timed window: enough for several seconds of load, not one burst."""
IN_FLIGHT = 200
"""At most this many spawns are waiting for their answer at any time (100 per guild)."""
WARMUP = 50
"""Untimed spawns per guild before each phase, at once: each process's connection pool
grows to its working size and its caches fill before the clock starts."""
TICKS = os.sysconf("SC_CLK_TCK")
PROFILE = os.environ.get("BENCH_PROFILE") == "1"
"""``BENCH_PROFILE=1``: sample each bot process with py-spy over the timed window and
print where each phase's CPU per completion goes, side by side (:class:`Sampler`)."""
SAMPLE_RATE = 250
"""py-spy samples a second (on-CPU samples only: an idle thread is not counted)."""


def _stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name (field 3 onwards)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process, from /proc/<pid>/stat."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / TICKS


def reaped_children_cpu(pid: int) -> float:
    """User + system CPU time of the children ``pid`` has waited for (cutime + cstime)."""
    fields = _stat_fields(pid)
    return (int(fields[13]) + int(fields[14])) / TICKS


def parent_pid(pid: int) -> int:
    return int(_stat_fields(pid)[1])


def schedstat(pid: int) -> tuple[float, float]:
    """Seconds on a CPU and seconds waiting on the run queue, over the process's threads."""
    running = waiting = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            on_cpu, run_queue, _slices = (task / "schedstat").read_text().split()
        except OSError:
            continue  # the thread ended meanwhile
        running += int(on_cpu)
        waiting += int(run_queue)
    return running / 1e9, waiting / 1e9


async def postmaster_pid() -> int:
    """The PostgreSQL server's main process: the parent of a backend we connect to."""
    import asyncpg

    conn = await asyncpg.connect(PG_DSN)
    try:
        return parent_pid(await conn.fetchval("SELECT pg_backend_pid()"))  # while it lives
    finally:
        await conn.close()


@dataclass(frozen=True)
class PostgresClock:
    """A reading of the CPU time of PostgreSQL: the postmaster and all its children."""

    postmaster: int
    own_and_reaped: float
    """The postmaster's own time plus that of the children it has reaped."""
    children: dict[int, float]
    """Each live child's time so far."""

    @classmethod
    def read(cls, postmaster: int) -> PostgresClock:
        children: dict[int, float] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            try:
                if parent_pid(pid) == postmaster:
                    children[pid] = cpu_seconds(pid)
            except (OSError, IndexError, ValueError):
                continue  # it ended meanwhile
        own = cpu_seconds(postmaster) + reaped_children_cpu(postmaster)
        return cls(postmaster, own, children)

    def since(self, earlier: PostgresClock) -> float:
        """CPU-seconds PostgreSQL spent between ``earlier`` and this reading.

        A backend that ended in between is in the reaped time whole; the part it had
        spent before ``earlier`` is taken off again.
        """
        live = sum(t - earlier.children.get(pid, 0.0) for pid, t in self.children.items())
        ended = sum(t for pid, t in earlier.children.items() if pid not in self.children)
        return self.own_and_reaped - earlier.own_and_reaped + live - ended


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

    def reached(self, count: int) -> Callable[[], bool | None]:
        """A probe for :func:`wait_until`: true once ``count`` answers have arrived."""
        return lambda: True if self() >= count else None


@dataclass(frozen=True)
class Figures:
    """One phase's timed window."""

    wall: float
    bot_cpu: list[float]
    """CPU-seconds of each bot process."""
    fakes_cpu: float
    """CPU-seconds of this process (the fake Discord and the model server)."""
    postgres_cpu: float
    machine_cpu: float
    """CPU-seconds of the whole machine (every process)."""
    saturation: list[float]
    """Each bot process's (on-CPU + run-queue wait) / wall."""
    profile: Counter[str]
    """Sampled CPU-seconds by place (``BENCH_PROFILE=1``; empty otherwise)."""

    @property
    def bots(self) -> float:
        return sum(self.bot_cpu)

    @property
    def per_second(self) -> float:
        return SPAWNS / self.wall

    @property
    def per_cpu_second(self) -> float:
        return SPAWNS / self.bots

    @property
    def others(self) -> float:
        """CPU-seconds of everything the bots depend on: the fakes and PostgreSQL."""
        return self.fakes_cpu + self.postgres_cpu


async def spawn_all(
    world: ShardWorld, answers: Answers, count: int, in_flight: int | None = None
) -> None:
    """``count`` spawns alternating between the guilds, until all are answered.

    With ``in_flight``, a new spawn starts only while fewer than that many wait
    for their answer; without, all start at once.
    """
    base = answers()
    target = base + count
    handles: list[InteractionHandle] = []
    for i in range(count):
        if in_flight is not None and i >= in_flight:
            await wait_until(world.fake, answers.reached(base + i - in_flight + 1))
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
        await wait_until(world.fake, answers.reached(target))
    except TimeoutError:
        raise SystemExit(f"only {answers() - base} of {count} answers arrived") from None
    unanswered = sum(1 for handle in handles if not handle.followups)
    if unanswered:
        raise SystemExit(f"{unanswered} spawns were announced but never answered")


class Sampler:
    """py-spy recording the bot processes' stacks while the timed window runs.

    A sampling profiler outside the process: the bots run unchanged (no tracing
    overhead, which would weigh most on the small calls sharding adds), and only the
    window is sampled. Each stack's leaf frame is charged to where it runs: the
    package (``sqlalchemy``, ``asyncpg``, ``discord``...) or our module.
    """

    def __init__(self, folder: Path, name: str) -> None:
        self.folder = folder
        self.name = name
        self._runs: list[tuple[asyncio.subprocess.Process, Path]] = []

    async def start(self, pids: list[int]) -> None:
        for pid in pids:
            out = self.folder / f"{self.name}-{pid}.txt"
            spy = await asyncio.create_subprocess_exec(
                str(Path(sys.executable).with_name("py-spy")),
                *("record", "--pid", str(pid), "--rate", str(SAMPLE_RATE)),
                *("--format", "raw", "--nonblocking", "--output", str(out)),
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            self._runs.append((spy, out))

    async def stop(self) -> Counter[str]:
        """Stop recording; seconds of CPU sampled, by where the leaf frame runs."""
        for spy, _ in self._runs:
            spy.send_signal(signal.SIGINT)
        await asyncio.gather(*(spy.wait() for spy, _ in self._runs))
        where: Counter[str] = Counter()
        for _, out in self._runs:
            if not out.exists():
                raise SystemExit(f"py-spy wrote no profile ({out.name}); is it installed?")
            for line in out.read_text().splitlines():
                stack, _, count = line.rpartition(" ")
                where[_place(stack.rsplit(";", 1)[-1])] += int(count) / SAMPLE_RATE
        return where


def _place(frame: str) -> str:
    """``execute (sqlalchemy/engine/base.py:1234)`` -> ``sqlalchemy``; our own modules
    keep their path (``core/store/changes.py``)."""
    path = frame.rpartition("(")[2].rstrip(")").rpartition(":")[0]
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    for ours in ("core/", "adapters/", "bot/", "fakediscord/"):
        if f"/{ours}" in path or path.startswith(ours):
            return ours + path.split(f"/{ours}", 1)[-1].removeprefix(ours)
    if "/lib/python3" in path:
        return "stdlib " + path.rsplit("/", 1)[-1].removesuffix(".py")
    return path or frame


def report_profile(one: Counter[str], two: Counter[str], top: int = 25) -> None:
    """Both phases' sampled CPU per completion by place, largest difference first."""
    print("\n  profile (py-spy, on-CPU samples over the timed window), ms per completion:")
    print(f"    {'one':>7} {'two':>7} {'two-one':>8}  where")
    rows = sorted(set(one) | set(two), key=lambda k: -abs(two[k] - one[k]))
    for key in rows[:top]:
        a, b = 1000 * one[key] / SPAWNS, 1000 * two[key] / SPAWNS
        print(f"    {a:7.3f} {b:7.3f} {b - a:+8.3f}  {key}")
    total_one, total_two = sum(one.values()), sum(two.values())
    print(
        f"    {1000 * total_one / SPAWNS:7.3f} {1000 * total_two / SPAWNS:7.3f} "
        f"{1000 * (total_two - total_one) / SPAWNS:+8.3f}  in all"
    )


async def phase(world: ShardWorld, layout: list[list[int]], postmaster: int) -> Figures:
    """Run the spawns with one process per entry of ``layout``."""
    async with pg_schema() as schema:
        store = {"url": PG_URL, "schema": schema}
        processes: list[BotProcess] = await asyncio.gather(
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

        cpu_before = [cpu_seconds(p.pid) for p in processes]
        sched_before = [schedstat(p.pid) for p in processes]
        postgres_before = PostgresClock.read(postmaster)
        fakes_before = time.process_time()
        machine_before = machine_busy_seconds()
        sampler = Sampler(world.tmp, f"phase-{len(layout)}") if PROFILE else None
        if sampler is not None:
            await sampler.start([p.pid for p in processes])
        started = time.perf_counter()
        await spawn_all(world, answers, SPAWNS, IN_FLIGHT)
        wall = time.perf_counter() - started
        profile = await sampler.stop() if sampler is not None else Counter[str]()
        machine = machine_busy_seconds() - machine_before
        fakes = time.process_time() - fakes_before
        postgres = PostgresClock.read(postmaster).since(postgres_before)
        cpu = [cpu_seconds(p.pid) - before for p, before in zip(processes, cpu_before, strict=True)]
        saturation = [
            (run + wait - run0 - wait0) / wall
            for (run, wait), (run0, wait0) in zip(
                [schedstat(p.pid) for p in processes], sched_before, strict=True
            )
        ]

        await asyncio.gather(*(process.stop() for process in processes))
        return Figures(wall, cpu, fakes, postgres, machine, saturation, profile)


def report_phase(name: str, figures: Figures) -> None:
    per_process = ", ".join(
        f"{1000 * cpu / (SPAWNS / len(figures.bot_cpu)):.2f}" for cpu in figures.bot_cpu
    )
    print(f"  {name}")
    print(
        f"    {figures.per_second:7.1f} completions/s (wall {figures.wall:.1f} s), "
        f"{figures.per_cpu_second:6.1f} per bot CPU-second "
        "(target: +25% over the figure before issue 26's PostgreSQL changes)"
    )
    print(f"    bot CPU per completion, each process: {per_process} ms")
    print(
        f"    cores busy: {figures.machine_cpu / figures.wall:.2f} in all, bots "
        f"{figures.bots / figures.wall:.2f}, fakes {figures.fakes_cpu / figures.wall:.2f}, "
        f"PostgreSQL {figures.postgres_cpu / figures.wall:.2f}"
    )
    print(
        "    saturation (on-CPU + run-queue wait) / wall, each process: "
        + ", ".join(f"{s:.2f}" for s in figures.saturation)
    )


def report(one: Figures, two: Figures, took: float) -> None:
    print(
        f"\n{SPAWNS} subagents over two guilds in each timed window (run mode, answered in "
        f"the channel, at most {IN_FLIGHT} in flight), {os.cpu_count()} cores"
    )
    report_phase("one process with both shards:", one)
    report_phase("two processes, one shard each:", two)

    efficiency = two.per_cpu_second / one.per_cpu_second
    print(f"  scaling efficiency (per bot CPU-second, two/one): {efficiency:.2f} (target >= 0.9)")
    print(
        f"  saturation of the single process: {one.saturation[0]:.2f} "
        "(target >= 0.9: the process itself limits the run)"
    )
    ceiling = 2 / (1 + two.others / two.bots)
    print(
        f"  wall ratio two/one: {two.per_second / one.per_second:.2f}, ceiling on "
        f"{os.cpu_count()} cores 2 / (1 + (fakes + PostgreSQL CPU) / bot CPU) = {ceiling:.2f} "
        "(target >= 1.6 only with >= 4 cores and the bots pinned apart)"
    )
    c1 = one.bots / SPAWNS
    c2 = max(two.bot_cpu) / (SPAWNS / len(two.bot_cpu))
    projected = 2 * c1 / c2
    others_cores = (two.others / SPAWNS) * (2 / c2)
    print(
        f"  projected capacity, two processes on a core each: {projected:.2f}x one "
        f"(target >= 1.6); the fakes and PostgreSQL would need {others_cores:.2f} cores "
        "more at that rate"
    )
    if PROFILE:
        report_profile(one.profile, two.profile)
    print(f"  benchmark took {took:.0f} s")


async def main() -> None:
    began = time.perf_counter()
    try:
        await require_postgres()
    except pytest.skip.Exception as skipped:
        print(f"bench_shards: skipped, {skipped.msg}")
        return
    postmaster = await postmaster_pid()
    with tempfile.TemporaryDirectory() as tmp:
        # Unlimited: this measures the bot's own work; Discord's limits are bench_popular's.
        async with (
            TaskLLM() as llm,
            FakeDiscord(wait_timeout=300, keep_requests=1000, rate_limits=RateLimits.off()) as fake,
        ):
            world = await shard_world(fake, llm, Path(tmp))
            one = await phase(world, [[0, 1]], postmaster)
            two = await phase(world, [[0], [1]], postmaster)
    report(one, two, time.perf_counter() - began)


if __name__ == "__main__":
    asyncio.run(main())
