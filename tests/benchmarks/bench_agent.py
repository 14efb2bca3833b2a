"""Agent runtime benchmarks: loop overhead per model step, memory per session.

Run with ``python3 tb.py bench agent``. Figures are printed beside baselines
measured in the same run; nothing here asserts.

1. Loop overhead per model step, scripted provider and a zero-latency tool
   (target < 2 ms). Every step durably writes the model's answer and the tool
   result, so the baseline is two raw ``sqlite3`` single-row commits with the
   store's pragmas: the floor any durable loop pays per step. The step cost is
   also measured after 10, 100 and 500 messages of earlier history: a loop
   whose bookkeeping walks the history gets slower as a turn gets longer. (The
   one conversion of the history a new agent makes is done before timing.)
2. Memory per idle resident session (target < 64 KiB): 1,000 agents, each
   holding a short finished conversation, measured with tracemalloc.
3. Memory for 1,000 concurrently running sessions, each blocked in a tool.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pydantic import BaseModel  # noqa: E402

from core.agent import (  # noqa: E402
    Agent,
    AgentSettings,
    StopPolicy,
    Tool,
    ToolContext,
    ToolRegistry,
)
from core.logging import configure_logging, reset_logging  # noqa: E402
from core.providers.scripted import ScriptedProvider, Step  # noqa: E402
from core.providers.types import ToolCall  # noqa: E402
from core.runtime import SessionRuntime  # noqa: E402
from core.sessions.log import AppendItem, SessionLog, as_item  # noqa: E402
from core.sessions.payloads import (  # noqa: E402
    AssistantMessagePayload,
    ToolCallRecord,
    ToolResultPayload,
    UserMessagePayload,
)
from core.store import open_database  # noqa: E402
from core.store.engine import sqlite_pragmas  # noqa: E402

STEPS = 200
ROUNDS = 3
HISTORIES = (10, 100, 500)
HISTORY_STEPS = 30
HISTORY_ROUNDS = 5
SESSIONS = 1_000


class NoArgs(BaseModel):
    pass


async def instant(_args: NoArgs, _ctx: ToolContext) -> str:
    return "ok"


def tool_step(index: int) -> Step:
    return Step(tool_calls=(ToolCall(id=f"c{index}", name="noop", arguments="{}"),))


def history_items(messages: int) -> list[AppendItem]:
    """``messages`` messages of an earlier tool loop: a question, then call and result pairs."""
    items: list[AppendItem] = [as_item(UserMessagePayload(text="earlier question"), "normal")]
    for index in range((messages - 1) // 2):
        call = ToolCallRecord(id=f"old{index}", name="noop", arguments="{}")
        items.append(as_item(AssistantMessagePayload(turn_id="old", text="", tool_calls=[call])))
        items.append(
            as_item(
                ToolResultPayload(turn_id="old", tool_call_id=call.id, name="noop", content="ok")
            )
        )
    return items


async def one_turn_per_step(workdir: Path, name: str, steps: int, history: int = 0) -> float:
    """Seconds per model step of one turn of ``steps`` steps, after ``history`` messages."""
    db = await open_database(f"sqlite:///{workdir / f'loop-{name}.db'}")
    log = SessionLog(db)
    tree = await log.load(f"bench:{name}")
    if history:
        await log.append_many(tree, history_items(history))
    script = [tool_step(i) for i in range(steps - 1)] + [Step(text="done")]
    # The scripted provider's own history check is test-double work, not loop cost.
    provider = ScriptedProvider(script, check_history=False)
    tools = ToolRegistry([Tool("noop", "No-op.", NoArgs, instant)])
    settings = AgentSettings(stop_policy=StopPolicy(max_steps_per_turn=steps + 1))
    agent = Agent(tree, log, provider, tools, settings)
    # A new agent converts the whole history once, at its first step; that is a
    # cost per agent (after a restart or an eviction), not per step: paid here.
    agent.derive_messages()
    start = time.perf_counter()
    await agent.send("go")
    await agent.wait_idle()
    elapsed = time.perf_counter() - start
    assert len(provider.calls) == steps, len(provider.calls)
    await db.close()
    return elapsed / steps


def raw_two_commits(path: Path, count: int) -> float:
    """Two single-row commits (answer + tool result) per step, raw sqlite3, same pragmas."""
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in sqlite_pragmas(5000):
        conn.execute(pragma)
    conn.execute("CREATE TABLE IF NOT EXISTS ev (k TEXT, seq INTEGER, payload TEXT)")
    payload = json.dumps({"text": "x" * 40, "tool_calls": []})
    start = time.perf_counter()
    for i in range(count):
        for part in range(2):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO ev VALUES (?, ?, ?)", ("s", 2 * i + part, payload))
            conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed / count


async def bench_loop(workdir: Path) -> None:
    ours, floor = [], []
    for round_ in range(ROUNDS):
        ours.append(await one_turn_per_step(workdir, str(round_), STEPS))
        floor.append(raw_two_commits(workdir / f"raw-{round_}.db", STEPS))
    per_step, raw = statistics.median(ours), statistics.median(floor)
    met = "MET" if per_step < 0.002 else "MISSED"
    print(f"\n[1] loop per model step ({STEPS} steps, zero-latency tool, median of {ROUNDS})")
    print(f"    per step: {per_step * 1000:.2f} ms   target < 2 ms   {met}")
    print(f"    overhead above the durable-write floor: {(per_step - raw) * 1000:.2f} ms")
    print(f"    baseline two raw sqlite3 single-row commits: {raw * 1000:.2f} ms")

    by_history: dict[int, list[float]] = {h: [] for h in HISTORIES}
    for round_ in range(HISTORY_ROUNDS):  # interleaved, so drift hits every length alike
        for history in HISTORIES:
            name = f"h{history}-{round_}"
            by_history[history].append(
                await one_turn_per_step(workdir, name, HISTORY_STEPS, history)
            )
    medians = {h: statistics.median(times) for h, times in by_history.items()}
    print(
        f"    per step after earlier history ({HISTORY_STEPS}-step turns, "
        f"median of {HISTORY_ROUNDS}):"
    )
    for history, median in medians.items():
        ratio = median / medians[HISTORIES[0]]
        print(f"      {history:>4} messages: {median * 1000:.2f} ms   ({ratio:.2f}x)")


def factory(provider: ScriptedProvider, tools: ToolRegistry):
    def build(tree, log, on_crash):
        return Agent(tree, log, provider, tools, on_crash=on_crash)

    return build


async def bench_memory(workdir: Path) -> None:
    db = await open_database(f"sqlite:///{workdir / 'memory.db'}")
    log = SessionLog(db)
    writer = SessionRuntime(
        log, factory(ScriptedProvider(lambda _m: Step(text="hello back")), ToolRegistry())
    )
    for i in range(SESSIONS):
        agent = await writer.get(f"idle:{i}")
        await agent.send("hello")
    for key in writer.resident():
        await writer.peek(key).wait_idle()
    await writer.close()

    runtime = SessionRuntime(log, factory(ScriptedProvider([]), ToolRegistry()))
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for i in range(SESSIONS):
        await runtime.get(f"idle:{i}")
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    idle = sum(s.size_diff for s in after.compare_to(before, "filename")) / SESSIONS
    events = len(runtime.peek("idle:0").tree.events)
    met = "MET" if idle < 64 * 1024 else "MISSED"
    print(f"\n[2] memory per idle resident session ({SESSIONS:,} sessions of {events} events)")
    print(f"    {idle / 1024:.1f} KiB per session   target < 64 KiB   {met}")
    print(
        f"    baseline: the same events as raw JSON text: {raw_event_bytes(runtime) / 1024:.1f} KiB"
    )
    await runtime.close()

    gates: list[asyncio.Event] = []
    all_blocked = asyncio.Event()

    async def blocked(_args: NoArgs, _ctx: ToolContext) -> str:
        gate = asyncio.Event()
        gates.append(gate)
        if len(gates) == SESSIONS:
            all_blocked.set()
        await gate.wait()
        return "ok"

    provider = ScriptedProvider(
        lambda messages: tool_step(0) if messages[-1].role == "user" else Step(text="done")
    )
    busy = SessionRuntime(
        log, factory(provider, ToolRegistry([Tool("noop", "Blocks.", NoArgs, blocked)]))
    )
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for i in range(SESSIONS):
        agent = await busy.get(f"busy:{i}")
        await agent.send("work")
    await all_blocked.wait()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    running = sum(s.size_diff for s in after.compare_to(before, "filename"))
    print(f"\n[3] {SESSIONS:,} sessions running at once, each blocked in a tool")
    print(f"    total {running / 2**20:.1f} MiB, {running / SESSIONS / 1024:.1f} KiB per session")
    for gate in gates:
        gate.set()
    for key in busy.resident():
        await busy.peek(key).wait_idle()
    await busy.close()
    await db.close()


def raw_event_bytes(runtime: SessionRuntime) -> float:
    tree = runtime.peek("idle:0").tree
    return sum(len(e.model_dump_json()) for e in tree.events)


async def main() -> None:
    configure_logging(enabled=False)
    with tempfile.TemporaryDirectory(prefix="tb-bench-agent-") as tmp:
        workdir = Path(tmp)
        await bench_loop(workdir)
        await bench_memory(workdir)
    reset_logging()


if __name__ == "__main__":
    asyncio.run(main())
