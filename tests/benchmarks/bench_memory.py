"""Memory benchmark: peak RSS of a bot process with 1,000 idle bound sessions and 100 live agents.

Run with ``python3 tb.py bench memory``. Nothing here asserts; the figures are
printed beside baselines measured in the same run (issue 26, item 5: target a
peak of at most 130 MiB).

Every figure comes from a fresh process, so nothing this script imported counts:

- the **bot** process imports what ``python -m bot run`` imports (``bot.app``,
  ``bot.wiring``), writes JSON log lines to a file, builds the services from a
  config with one OpenAI-compatible provider and no MCP server (SQLite store), then
  holds 1,000 idle bound sessions, each a thread bound to a session with one finished
  turn in the store, rehydrated as the bot holds a session whose thread spoke within
  its idle window, and starts 100 live agents in 100 more bound threads, each mid-turn:
  its model answer is streaming over HTTP from a fake model (a separate process)
  that holds the stream open. Its peak RSS (``VmHWM``) is the figure.
- the same bot process over an empty store with the same 100 live agents: the
  difference, divided by 1,000, is the cost of one idle bound session.
- **baselines**: a bare interpreter (this script started, nothing more imported: the
  bot process's starting point), and one importing the same third-party top-level
  modules the bot process ended up with, without the bot's own code.

The Discord gateway is not connected: its caches depend on the guilds, not the bot.
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

IDLE = 1_000
LIVE = 100
TARGET_MIB = 130
OWN_PACKAGES = frozenset({"adapters", "bot", "core", "fakediscord", "tests", "__main__"})
THREAD_BASE = 10**18
PARENT_CHANNEL = "900000000000000001"


def memory_kib() -> dict[str, int]:
    """This process's resident set now (``VmRSS``) and at its peak (``VmHWM``), in KiB."""
    status = Path("/proc/self/status")
    if status.exists():
        fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        return {
            "rss": int(fields["VmRSS"].split()[0]),
            "peak": int(fields["VmHWM"].split()[0]),
        }
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak = peak // 1024 if sys.platform == "darwin" else peak  # bytes there, KiB on Linux
    return {"rss": peak, "peak": peak}


def mib(kib: float) -> str:
    return f"{kib / 1024:.1f} MiB"


# ---------------------------------------------------------------------------
# Child: the fake model, answering every request with a stream it holds open.


async def serve_model() -> None:
    from tests.fixtures.fake_llm import FakeLLM, Reply, chunk

    held = Reply(
        chunks=[chunk({"role": "assistant", "content": ""}), chunk({"content": "thinking"})],
        hold_after=2,
    )

    async with FakeLLM(answer=lambda _body: held) as llm:
        print(llm.base_url, flush=True)
        # Until the parent closes stdin: no sleeping, no polling.
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


# ---------------------------------------------------------------------------
# Children: the bot, seeding its store and under load.


def bot_config(workdir: Path, model_url: str) -> Any:
    from core.config import parse_config

    return parse_config(
        {
            "store": {"url": f"sqlite:///{workdir / 'bot.db'}"},
            "providers": {"local": {"base_url": model_url, "model": "tiny"}},
        },
        config_path=workdir / "config.toml",
        env={},
    )


def thread(index: int) -> Any:
    from core.bindings.records import ConversationRef

    return ConversationRef(
        channel="discord",
        account_id="default",
        conversation_id=str(THREAD_BASE + index),
        parent_conversation_id=PARENT_CHANNEL,
    )


async def seed(workdir: Path, sessions: int) -> None:
    """Bind ``sessions`` threads, each session with one finished turn, then stop."""
    from bot.wiring import build_services
    from core.logging import configure_logging
    from core.providers.scripted import ScriptedProvider, Step

    configure_logging(enabled=False)
    provider = ScriptedProvider(lambda _messages: Step(text="Hello! How can I help today?"))
    services = await build_services(
        bot_config(workdir, "http://127.0.0.1:9/v1"), env={}, provider=provider
    )
    try:
        for i in range(sessions):
            key = f"agent:main:idle-{i}"
            await services.bindings.bind(key, "session", thread(i), scope="42")
            agent = await services.runtime.get(key)
            await agent.send("Hello, can you help me with something?")
            await agent.wait_idle()
    finally:
        await services.close()


async def run_bot(workdir: Path, idle: int, model_url: str) -> None:
    """The measured process: prints one JSON object of memory figures, in KiB."""
    figures: dict[str, Any] = {"start": memory_kib()["rss"]}
    import bot.app  # noqa: F401 - what `python -m bot run` imports
    from bot.wiring import build_services
    from core.agent.events import TextDelta
    from core.logging import configure_logging

    figures["imported"] = memory_kib()["rss"]
    configure_logging(level="info", json_path=workdir / "bot.jsonl", console=False)
    services = await build_services(bot_config(workdir, model_url), env={})
    try:
        figures["built"] = memory_kib()["rss"]
        for i in range(idle):
            await services.runtime.get(f"agent:main:idle-{i}")
        assert len(services.runtime.resident()) == idle
        figures["idle"] = memory_kib()["rss"]

        streaming: set[str] = set()
        all_streaming = asyncio.Event()

        def on_event(event: object) -> None:
            if isinstance(event, TextDelta):
                streaming.add(event.session_key)
                if len(streaming) == LIVE:
                    all_streaming.set()

        for i in range(LIVE):
            key = f"agent:main:live-{i}"
            await services.bindings.bind(key, "session", thread(IDLE + i), scope="42")
            agent = await services.runtime.get(key)
            agent.subscribe(on_event)
            await agent.send("Please write me a long answer.")
        await all_streaming.wait()  # every live agent is mid-turn, its answer streaming
        memory = memory_kib()
        figures["live"], figures["peak"] = memory["rss"], memory["peak"]
        figures["bindings"] = sum(1 for _ in services.bindings.live())
    finally:
        await services.close()
    figures["mcp_loaded"] = "mcp" in sys.modules
    figures["third_party"] = third_party_modules()
    print(json.dumps(figures), flush=True)


def third_party_modules() -> list[str]:
    """Top-level modules loaded from outside the standard library and this project."""
    names = {name.partition(".")[0] for name in list(sys.modules)}
    return sorted(names - set(sys.stdlib_module_names) - OWN_PACKAGES)


def baseline(modules: list[str]) -> None:
    """A bare interpreter (no modules) or one that imported ``modules``; prints peak KiB."""
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # a module that only loads as part of another
            continue
    print(json.dumps(memory_kib()), flush=True)


# ---------------------------------------------------------------------------
# Parent: runs the children and prints the figures.


def child(*args: str) -> Any:
    done = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=False, cwd=ROOT
    )
    if done.returncode != 0:
        raise RuntimeError(f"child {args[0]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tb-bench-memory-") as tmp:
        loaded, empty = Path(tmp) / "loaded", Path(tmp) / "empty"
        loaded.mkdir()
        empty.mkdir()
        model = subprocess.Popen(
            [sys.executable, __file__, "--model"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        try:
            assert model.stdout is not None
            model_url = model.stdout.readline().strip()
            done = subprocess.run(
                [sys.executable, __file__, "--seed", str(loaded), str(IDLE)], check=False, cwd=ROOT
            )
            if done.returncode != 0:
                raise RuntimeError("seeding the store failed")
            under_load = child("--bot", str(loaded), str(IDLE), model_url)
            live_only = child("--bot", str(empty), "0", model_url)
        finally:
            assert model.stdin is not None
            model.stdin.close()
            model.wait()
        bare = child("--baseline")
        third_party = child("--baseline", *under_load["third_party"])

    peak = under_load["peak"]
    per_idle = (peak - live_only["peak"]) / IDLE
    imported = under_load["imported"]
    met = "MET" if peak <= TARGET_MIB * 1024 else "MISSED"
    print(
        f"\n[1] peak RSS: {IDLE:,} idle bound sessions and {LIVE} live agents mid-turn "
        f"({under_load['bindings']:,} bindings)"
    )
    print(f"    peak: {mib(peak)}   target <= {TARGET_MIB} MiB   {met}")
    print(
        f"    baselines: bare interpreter {mib(bare['peak'])}; it with the same "
        f"{len(under_load['third_party'])} third-party packages imported alone "
        f"{mib(third_party['peak'])}"
    )
    print(
        f"    after the bot's imports: {mib(imported)} ({imported / peak:.0%} of the peak; "
        f"{mib(imported - under_load['start'])} above the interpreter)"
    )
    print(f"    mcp SDK loaded: {'yes' if under_load['mcp_loaded'] else 'no'}")
    print(f"\n[2] per idle bound session: {per_idle:.1f} KiB")
    print(
        f"    (peak with {IDLE:,} minus peak with none, each with {LIVE} live agents: "
        f"{mib(peak)} - {mib(live_only['peak'])})"
    )
    held = (under_load["idle"] - under_load["built"]) / IDLE
    print(f"    rehydrated agents alone (RSS before and after holding them): {held:.1f} KiB each")
    print(
        f"\n[3] {LIVE} live agents: {mib(under_load['live'] - under_load['idle'])} above "
        f"the idle ones ({(under_load['live'] - under_load['idle']) / LIVE:.0f} KiB each)"
    )


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "--model":
        asyncio.run(serve_model())
    elif mode == "--seed":
        asyncio.run(seed(Path(sys.argv[2]), int(sys.argv[3])))
    elif mode == "--bot":
        asyncio.run(run_bot(Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
    elif mode == "--baseline":
        baseline(sys.argv[2:])
    else:
        main()
