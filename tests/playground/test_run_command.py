"""``python -m bot`` without a token: the playground starts, answers, and stops on SIGINT."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from pathlib import Path

import aiohttp

from fakediscord.persistence import Journal
from fakediscord.state import State

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60.0
POLL = 0.2


async def read_url(stdout: asyncio.StreamReader, seen: list[str]) -> str:
    while True:
        line = (await stdout.readline()).decode()
        if not line:
            raise AssertionError(f"the process ended its output without a URL: {seen}")
        seen.append(line)
        match = re.search(r"open (http://127\.0\.0\.1:\d+/)", line)
        if match:
            return match.group(1)


async def poll(session: aiohttp.ClientSession, url: str, find) -> object:
    """GET ``url`` until ``find(json)`` is not None; a deadline bounds it."""
    async with asyncio.timeout(DEADLINE):
        while True:
            async with session.get(url) as response:
                found = find(await response.json())
            if found is not None:
                return found
            await asyncio.sleep(POLL)


async def start_bot_process(
    tmp_path: Path,
    config: str,
    *args: str,
    env: dict[str, str] | None = None,
    stderr: int = asyncio.subprocess.PIPE,
) -> asyncio.subprocess.Process:
    """``python -m bot ARGS`` in ``tmp_path`` with ``config`` as its config.toml, no Discord
    token in its environment unless ``env`` gives one."""
    (tmp_path / "config.toml").write_text(config)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DISCORD_TOKEN")}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        cwd=tmp_path,
        env={**clean, "PYTHONPATH": str(ROOT), **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
    )


async def test_no_token_opens_the_playground_and_sigint_stops_it(tmp_path: Path) -> None:
    process = await start_bot_process(
        tmp_path,
        "[playground]\nport = 0\ndemo_sleep_seconds = 0.2\ndemo_steps = 1\n"
        '[logging]\njson_file = "bot.jsonl"\n',
    )
    seen: list[str] = []
    try:
        async with asyncio.timeout(DEADLINE):
            url = await read_url(process.stdout, seen)
        assert "no Discord token set (DISCORD_TOKEN)" in "".join(seen)
        async with aiohttp.ClientSession() as session:
            async with session.get(url) as page:
                assert page.status == 200
                assert "threadbound playground" in await page.text()
            async with session.get(url + "api/state") as response:
                state = await response.json()
            general = next(c["id"] for c in state["channels"] if c["name"] == "general")
            alice = next(u["id"] for u in state["users"] if u["name"] == "alice")
            body = {"channel_id": general, "user_id": alice, "text": "/agents spawn task:hello"}
            async with session.post(url + "api/command", json=body) as response:
                assert response.status == 200, await response.text()

            def thread_of(snapshot: dict) -> str | None:
                threads = [c["id"] for c in snapshot["channels"] if c["thread"]]
                return threads[0] if threads else None

            thread = await poll(session, url + "api/state", thread_of)

            def answer(data: dict) -> str | None:
                found = [m["content"] for m in data["messages"] if "Final answer" in m["content"]]
                return found[0] if found else None

            reply = await poll(session, f"{url}api/channels/{thread}/messages", answer)
            assert "[demo model]" in reply
            assert "“hello”" in reply
    finally:
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(30):
            _, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()
    assert "Traceback" not in stderr.decode()
    assert "voice will NOT be supported" not in stderr.decode()  # the bot has no voice
    assert "is not installed" not in stderr.decode()
    assert "playground http://127.0.0.1:" in stderr.decode()  # the progress line
    saved = json.loads((tmp_path / "playground.json").read_text())
    assert any(c["name"] == "general" for c in saved["channels"].values())
    assert (tmp_path / "playground.db").exists()
    lines = [json.loads(line) for line in (tmp_path / "bot.jsonl").read_text().splitlines()]
    events = [line["event"] for line in lines]
    assert "playground.started" in events
    assert events.index("bot.starting") < events.index("playground.started")
    # the bot stopped cleanly in its own process, then the host stopped
    assert events.index("bot.stopped") < events.index("playground.bot_exited")
    assert events[-1] == "playground.stopped"
    (started,) = [line for line in lines if line["event"] == "playground.bot_started"]
    (exited,) = [line for line in lines if line["event"] == "playground.bot_exited"]
    assert started["pid"] != process.pid
    assert (exited["pid"], exited["exit_code"]) == (started["pid"], 0)


async def watch(session: aiohttp.ClientSession, url: str, path: str, find) -> object:
    """``find(GET path)`` once it is not None, re-checked at each change the page is told of
    (its server-sent events), as the page itself learns of them; a deadline bounds it."""
    async with asyncio.timeout(DEADLINE), session.get(url + "api/events") as events:
        while True:
            async with session.get(url + path) as response:
                found = find(await response.json())
            if found is not None:
                return found
            while not (await events.content.readline()).startswith(b"data:"):
                pass


async def exited(pid: int) -> None:
    """Return once process ``pid`` (not necessarily a child of this one) has ended."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    ended = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(handle, ended.set)
    try:
        async with asyncio.timeout(DEADLINE):
            await ended.wait()
    finally:
        loop.remove_reader(handle)
        os.close(handle)


async def test_a_kill_9_of_the_playground_loses_nothing_it_answered(tmp_path: Path) -> None:
    """Every change is saved before it is answered: the newest thread (made by the bot's
    REST call) and a message the page sent are on disk when the host dies a second later."""
    process = await start_bot_process(
        tmp_path,
        "[playground]\nport = 0\ndemo_sleep_seconds = 5\ndemo_steps = 2\n"
        '[logging]\njson_file = "bot.jsonl"\nconsole = false\n',
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(DEADLINE):
            url = await read_url(process.stdout, [])
        async with aiohttp.ClientSession() as session:
            async with session.get(url + "api/state") as response:
                state = await response.json()
            general = next(c["id"] for c in state["channels"] if c["name"] == "general")
            alice = next(u["id"] for u in state["users"] if u["name"] == "alice")
            body = {"channel_id": general, "user_id": alice, "text": "/agents spawn task:tidy up"}
            async with session.post(url + "api/command", json=body) as response:
                assert response.status == 200, await response.text()

            def thread_of(snapshot: dict) -> str | None:
                threads = [c["id"] for c in snapshot["channels"] if c["thread"]]
                return threads[0] if threads else None

            thread = await watch(session, url, "api/state", thread_of)
            body = {"channel_id": general, "user_id": alice, "content": "written, then a crash"}
            async with session.post(url + "api/messages", json=body) as response:
                sent = (await response.json())["id"]
    finally:
        process.kill()  # SIGKILL: no shutdown, no save at exit
        await process.wait()
    log = [json.loads(line) for line in (tmp_path / "bot.jsonl").read_text().splitlines()]
    (bot,) = [line["pid"] for line in log if line["event"] == "playground.bot_started"]
    await exited(bot)  # orphaned, the bot noticed (its stdin closed) and stopped by itself
    log = [json.loads(line) for line in (tmp_path / "bot.jsonl").read_text().splitlines()]
    assert log[-1]["event"] == "bot.stopped"

    saved = State()
    Journal(tmp_path / "playground.json").open(saved)
    assert saved.channels[int(thread)].name == "Scout: tidy up"
    assert saved.messages[int(sent)].content == "written, then a crash"
    (spawn,) = [i for i in saved.interactions.values() if i.type == 2]
    assert saved.users[spawn.user_id].username == "alice"  # who used the command is kept


async def test_playground_flag_runs_it_beside_a_token(tmp_path: Path) -> None:
    """``--playground`` with a token set: the playground, never Discord, and the token is
    not in the log of either process."""
    token = "real-token-" + "x" * 40
    process = await start_bot_process(
        tmp_path,
        "[playground]\nport = 0\n"
        '[logging]\njson_file = "bot.jsonl"\nconsole = false\nlevel = "debug"\n',
        "--playground",
        env={"DISCORD_TOKEN": token},
    )
    seen: list[str] = []
    try:
        async with asyncio.timeout(DEADLINE):
            await read_url(process.stdout, seen)
        assert "--playground: starting the local playground" in "".join(seen)
    finally:
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(30):
            _, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()
    log = (tmp_path / "bot.jsonl").read_text()
    assert '"event": "bot.stopped"' in log
    assert token not in log
